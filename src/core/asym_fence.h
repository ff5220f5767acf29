// asym_fence.h — an asymmetric fence: a compiler barrier on the side that runs on every
// call, a membarrier(2) system call on the side that runs rarely.
//
// Two threads that each store one word and then load the other's (Dekker's pattern: a
// writer publishes and then looks whether anyone sleeps; a sleeper counts itself and then
// looks whether anything was published) need a store-load barrier on both sides, or both
// may read the old values. On x86 that barrier is a locked instruction, which waits until
// every earlier store has left the store buffer: on the LL send path, stores into lines
// the receiver holds, one cache-line round trip each (docs/PERF.md #perf-asym-fence).
//
// membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) makes every running thread of every process
// that registered (MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) pass through a full memory
// barrier before the call returns (an IPI to each CPU that runs one; a thread that is not
// running passes through the scheduler's barrier when it is switched back in). The kernel
// also puts a full barrier at the call's entry and exit. So with
//     fast side (registered process):  store A; asymLightFence(); load B
//     slow side:                       store B; asymHeavyFence(); load A
// the fast thread's barrier point P, forced by the IPI, falls somewhere in its program
// order: if P is after "store A", A is visible before the heavy fence returns, and the
// slow side's load sees it; if P is before "store A", then "load B" is after P, P is after
// the slow side's entry barrier, which is after "store B", and the fast side's load sees B.
// Either way one side sees the other's store, as with a full fence on both sides
// (membarrier(2), "the fast-side memory barriers ... replaced by compiler barriers").
//
// A process takes part only where the kernel offers the command and registration
// succeeded (asymFenceReady); a fast side may use the light fence only where every slow
// side it pairs with issues the heavy one, so each use says how both ends agree (the shm
// doorbell: its owner's flag in the shared segment; the exec bias: one process).
// CHORUS_ASYM_FENCE=0 turns it off: full fences on both sides, as before.
#pragma once

#include <atomic>

namespace chorus {

/// Whether this process takes part in asymmetric fences: membarrier's global expedited
/// command exists, registration succeeded (done on the first call, again in a forked
/// child), and CHORUS_ASYM_FENCE is not 0.
bool asymFenceReady();

/// The fast side: orders the compiler only; the heavy fence of the other side supplies
/// the hardware barrier when one is needed.
inline void asymLightFence() { std::atomic_signal_fence(std::memory_order_seq_cst); }

/// The slow side: a full barrier on this thread and on every running thread of every
/// registered process before it returns. Only where asymFenceReady(). (Should the call
/// fail where the query offered it, never seen, a doorbell's sleeper still wakes at its
/// 10 ms slice and looks again: a late wake-up, not a hang.)
void asymHeavyFence();

}  // namespace chorus
