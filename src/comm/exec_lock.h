// exec_lock.h — a communicator's exec lock, biased to the thread that makes its blocking
// calls.
//
// Every operation on a communicator runs under its exec lock (chorusComm::execMutex), and
// every API call counts itself in activeCalls so that destroy and abort wait for it. Both
// are locked read-modify-writes, four per call, and on x86 each is a full barrier that
// waits for the call's earlier stores to leave the store buffer: on the LL path, stores
// into lines the receiving core holds (docs/PERF.md #perf-asym-fence). Most communicators
// are driven by one thread. So the first thread to make a blocking call takes the lock's
// bias (under the mutex), and from then on its blocking calls enter by a plain store to
// `busy` and a look at `state`, ordered by a compiler barrier only (asym_fence.h). Any
// other thread that takes the lock (a stream's worker, a second calling thread, abort or
// destroy from a watchdog, split or shrink from another thread) revokes the bias for
// good under the mutex: it stores `state`, issues the heavy fence, and waits for `busy`
// to fall. The pairing (owner: store busy, load state; revoker: store state, heavy fence,
// load busy) means the owner either sees the revocation and takes the mutex like everyone
// else, or the revoker sees it inside and waits; the owner's release store of busy = 0
// hands over everything its call did. An owner's call is not counted in activeCalls:
// destroy and abort take the lock after their wait for activeCalls, and that revokes and
// waits. Without asymmetric fences (asymFenceReady) no bias is ever taken.
#pragma once

#include <pthread.h>

#include <mutex>

#include "src/comm/comm.h"
#include "src/core/asym_fence.h"

namespace chorus {

inline uintptr_t execThreadId() { return static_cast<uintptr_t>(pthread_self()); }

/// The owner's way in: true if the calling thread holds the bias and it still holds (the
/// call then runs without execMutex and must end with leaveBiased); false: take lockExec.
inline bool enterBiased(chorusComm* comm) {
  ExecBias& b = comm->execBias;
  if (b.state.load(std::memory_order_relaxed) != ExecBias::kBiased ||
      b.owner.load(std::memory_order_relaxed) != execThreadId())
    return false;
  b.busy.store(1, std::memory_order_relaxed);
  asymLightFence();
  if (__builtin_expect(b.state.load(std::memory_order_relaxed) == ExecBias::kBiased, 1))
    return true;
  b.busy.store(0, std::memory_order_release);
  return false;
}

inline void leaveBiased(chorusComm* comm) {
  comm->execBias.busy.store(0, std::memory_order_release);
}

/// Takes execMutex; from any thread but the bias owner, revokes the bias first and waits
/// until the owner is out of its call (waking the communicator's waiters while the abort
/// flag is up, as commWaitIdle does).
std::unique_lock<std::mutex> lockExec(chorusComm* comm);

/// Under execMutex, by a thread making a blocking call: takes the bias for this thread if
/// nobody has it yet and asymmetric fences work here (where they do not, marks the bias
/// revoked, so the question is asked once).
void claimExecBias(chorusComm* comm);

}  // namespace chorus
