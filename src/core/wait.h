// wait.h — how a rank waits for another: spin for a while, then sleep on a futex.
//
// Spinning is the fastest way to see a peer's write while the peer runs on another core.
// It is the worst thing to do when the peer is not running: on a busy machine (the peer's
// core runs somebody else's work) or an oversubscribed one (the peer waits for this very
// core). Then the waiter sleeps on a futex word in shared memory (a "doorbell") that
// writers ring after they publish — ringing costs one fence and one load unless someone
// sleeps (a load alone on an asymmetric doorbell, whose sleepers pay a membarrier) — and
// the writer's FUTEX_WAKE runs it again at once: a task that slept keeps its scheduler
// credit, where one that called sched_yield gives its whole slice away. How long to spin
// is learnt per communicator from its own waits (WaitPolicy). Every wait has a deadline
// and watches the communicator's abort flag.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "chorus.h"
#include "src/core/link_failure.h"

namespace chorus {

struct Doorbell;

/// How long a waiter spins before it sleeps, learnt from the waits a communicator has seen
/// (one per communicator; the fields are atomics because a communicator's calls may come
/// from the caller's thread and from its stream worker).
///
/// The rule is the competitive one for spin-then-block: spin about as long as a sleep
/// costs, so no wait costs more than twice the best choice made in hindsight. What a sleep
/// costs is measured, not assumed: the writer stamps the time it rang a sleeper's doorbell,
/// and the sleeper, once running again, sees how long the kernel took to run it — a few µs
/// on a quiet machine, milliseconds on one where other work queues on every core (there a
/// sleeper waits its turn behind it, while a spinner is always runnable). The budget moves
/// a quarter of the way towards kWakeFactor times that latency after each woken sleep.
/// Waits that end while spinning teach nothing, nor do sleeps for a peer queued on the
/// waiter's CPU, nor sleeps that ended by timeout.
struct WaitPolicy {
  static constexpr int64_t kWakeFactor = 4;
  static constexpr int64_t kDefaultSpinNs = 20000;  ///< also the budget of a wait without one
  std::atomic<int64_t> spinNs{kDefaultSpinNs};
  int64_t minSpinNs = 2000;
  int64_t maxSpinNs = 200000;
  bool adaptive = true;  ///< false: CHORUS_SPIN_NS fixed it, or ranks outnumber cores
  /// > 0: once the spin is over, yield for this long before sleeping (ranks crowd CPUs).
  int64_t yieldFirstNs = 0;
  /// Where the ranks do not crowd their CPUs: a waiter whose peer is queued on its CPU
  /// steps to another allowed CPU (at most every 100 ms) instead of sleeping for it.
  bool unstack = false;
  std::atomic<int64_t> lastUnstackNs{0};
  std::atomic<uint64_t> unstacks{0};
  /// Where the ranks crowd the CPUs (CHORUS_CROWD_BALANCE): the doorbells of this host's
  /// ranks (where each last waited, Doorbell::cpuPlusOne) and this rank's index among them.
  /// A waiter on a CPU that holds more than cpuShare of them, the highest-indexed there,
  /// steps to an allowed CPU that holds fewer (at most every 100 ms): the kernel can leave
  /// three of four ranks on one of two CPUs for hundreds of ms, every hand-off then waiting
  /// for a turn on the crowded CPU (docs/PERF.md#perf-np4steady). Empty: not watched.
  std::vector<const Doorbell*> hostBells;
  int hostBellIndex = -1;
  int cpuShare = 0;
  std::atomic<int64_t> lastBalanceLookNs{0};
  std::atomic<uint64_t> rebalances{0};
  // Counts for CHORUS_DEBUG=INFO at destroy: waits that outlasted the inline polls, those
  // that slept, and those that slept because the peer was queued on the waiter's CPU.
  std::atomic<uint64_t> slowWaits{0};
  std::atomic<uint64_t> sleeps{0};
  std::atomic<uint64_t> peerSleeps{0};
  std::atomic<uint64_t> busySleeps{0};  ///< slept after busySpinNs: the machine was busy

  /// > 0 (CHORUS_SPIN_BUSY_NS): where more tasks are runnable than the machine has CPUs
  /// (/proc/loadavg, looked at no more than every 2 ms), spin at most this long, then sleep.
  /// On a busy machine a spin is paid for later: a fair scheduler charges it to the
  /// waiter's share, so the waiter loses the CPU sooner and is queued behind the other
  /// work once its peer answers, and the wake-up latency it measured there says how long
  /// the queue is, not what a sleep costs. Measured (np 2 beside two busy loops, 64 B-4 KiB
  /// all-reduce): 1.5-2.2 us per call with a 5 us spin, 7-16 us with the learnt budget.
  int64_t busySpinNs = 0;
  WaitPolicy() = default;
  WaitPolicy(const WaitPolicy&) = delete;
  WaitPolicy& operator=(const WaitPolicy&) = delete;
  ~WaitPolicy();

  /// Sets the range and the starting budget.
  void configure(int64_t startNs, int64_t minNs, int64_t maxNs, bool adapt);
  /// Turns the busy-machine check on (spinNs > 0) or off (0). False if /proc/loadavg cannot
  /// be read (the check then stays off). ownThreads: threads of the job itself that may be
  /// runnable beside the ranks' callers on this kernel (their progress threads, woken by
  /// every message over tcp): they are not other work, so the bar is CPUs + ownThreads.
  bool enableBusyCheck(int64_t spinNs, int ownThreads = 0);
  /// Whether more tasks than CPUs + ownThreads were runnable at the last two looks at
  /// /proc/loadavg (looked at no more than every 2 ms). One look is an instant: a kernel
  /// thread or a progress thread woken for a moment would read as a busy machine, and
  /// other work that makes a machine busy stays runnable from one look to the next.
  bool machineBusy(int64_t now);
  /// Learns from one wait that reached waitSlow: whether it slept, whether for its peer,
  /// and how long after the writer's ring it ran again (-1: not woken by a ring). Sleeps
  /// of a busy machine (`busy`) are counted and teach nothing.
  void onWait(bool slept, bool forPeer, int64_t wakeLatencyNs, bool busy = false);

 private:
  int loadFd_ = -1;    ///< /proc/loadavg, open while the busy check is on
  int busyAbove_ = 1;  ///< online CPUs + ownThreads: more runnable tasks than this is busy
  std::atomic<int64_t> busyCheckedNs_{INT64_MIN};
  std::atomic<bool> busy_{false};
  std::atomic<bool> lastLookBusy_{false};  ///< the previous look alone said busy
};

/// How to wait: until when, what to watch for abort, how eagerly to spin, and what to say
/// if the deadline passes.
struct WaitCtx {
  /// > 0: absolute CLOCK_MONOTONIC; <= 0: -deadlineNs after the wait stops being quick
  /// (saves a clock read per call where most waits end in the inline polls).
  int64_t deadlineNs;
  const std::atomic<int>* abortFlag;
  int spin;                      ///< polls before the first clock read (the inline fast path)
  const char* what;              ///< e.g. "all_reduce #12"
  WaitPolicy* policy = nullptr;  ///< the communicator's; null: a fixed default budget
  /// The communicator's first broken connection (null: not watched): once recorded, the
  /// wait returns it whatever it waits for (see link_failure.h).
  const LinkFailure* linkFailure = nullptr;
};

/// A futex word plus a count of sleepers; lives in shared memory, one per rank. The second
/// cache line says where its rank last waited (its CPU + 1; 0: not known yet), written only
/// when that changes, so a peer can tell "my peer is queued on my own CPU: spinning only
/// keeps it off" without touching the line writers check after every publish.
///
/// `asymmetric` (set by the owner before any writer sees the bell, never changed): the
/// owner's sleepers issue the heavy asymmetric fence after counting themselves
/// (asym_fence.h), so a writer of a registered process may ring with ringDoorbellLight.
struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> sleepers;
  std::atomic<int64_t> rangNs;  ///< when a writer last woke a sleeper (CLOCK_MONOTONIC)
  std::atomic<uint32_t> asymmetric;
  char pad[44];
  std::atomic<int32_t> cpuPlusOne;
  char pad2[60];
};
static_assert(sizeof(Doorbell) == 128, "two cache lines");

inline int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

inline void cpuRelax() { __builtin_ia32_pause(); }

/// The sleeper check and wake-up of ringDoorbell, after its fence.
inline void wakeSleepers(Doorbell* bell) {
  if (__builtin_expect(bell->sleepers.load(std::memory_order_relaxed) != 0, 0)) {
    bell->rangNs.store(nowNs(), std::memory_order_relaxed);
    bell->seq.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell->seq), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

/// Wakes whoever sleeps on `bell`. Call after publishing (the fence orders the publish
/// before the sleeper check, pairing with the sleeper's fence in waitSlow: either the
/// sleeper sees the publish before it sleeps, or the writer sees the sleeper).
inline void ringDoorbell(Doorbell* bell) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  wakeSleepers(bell);
}

/// ringDoorbell with a compiler barrier for the fence: only from a process where
/// asymFenceReady() and on a bell whose `asymmetric` flag is set. Its sleepers issue
/// asymHeavyFence between counting themselves and their last look, which forces a full
/// barrier on this thread at some point of its program: before the publish (then the
/// sleeper count is loaded after the sleeper's store and is seen) or after it (then the
/// publish is visible before the sleeper's last look). So no wake-up is lost, and the
/// publish's stores drain from the store buffer while the caller goes on.
inline void ringDoorbellLight(Doorbell* bell) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  wakeSleepers(bell);
}

/// Wakes every thread sleeping on `bell`, registered as a sleeper or about to be (an
/// abort: nobody may go on sleeping until its time slice ends).
inline void wakeAllWaiters(Doorbell* bell) {
  bell->seq.fetch_add(1, std::memory_order_seq_cst);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell->seq), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
          0);
}

/// True once process `pid` is gone: no such process, or a zombie (killed, not yet reaped by
/// its parent — a launcher slow to wait(), or none at all, must not hide a dead peer).
bool processGone(int pid);

/// setThreadSpinCap's "cap only while the CPUs are crowded": a wait on the thread sleeps
/// at once while more tasks are runnable than the machine has CPUs (/proc/loadavg, looked at
/// no more than every ms), and spins its learnt budget otherwise.
constexpr int64_t kSpinCapWhenCrowded = -2;

/// Caps how long waits on the calling thread spin (ns; -1: no cap; kSpinCapWhenCrowded).
/// A host stream's worker sets it from CHORUS_SPIN_STREAM_NS (default -2, kSpinCapWhenCrowded):
/// nobody blocks on its waits directly, and where its process's compute threads want the
/// cores (DDP's backward pass beside its bucket all-reduces) every µs it spins is taken from
/// them (issue 39, docs/PERF.md "Training-step time"). A CHORUS_SPIN_NS fixed by the user
/// (WaitPolicy::adaptive false) is not capped.
void setThreadSpinCap(int64_t ns);

/// Slow part of waitUntil (out of line: keeps the fast path small).
chorusResult_t waitSlow(bool (*ready)(void*), void* arg, const WaitCtx& w, Doorbell* bell,
                        int watchPid, const Doorbell* peerBell);

/// Returns chorusSuccess once ready() is true, chorusAborted if the abort flag rises,
/// chorusTimeout at the deadline (the caller names what it waited for), and
/// chorusRemoteError once process `watchPid` (a same-host peer; 0: none) no longer exists,
/// checked about twice a second while sleeping, so a dead peer is not a five-minute hang.
/// `bell` is the waiter's own doorbell (writers ring it), `peerBell` the peer's (where the
/// peer says which CPU it waits on; null: not known, e.g. a progress thread).
template <class Ready>
inline chorusResult_t waitUntil(Ready&& ready, const WaitCtx& w, Doorbell* bell, int watchPid = 0,
                                const Doorbell* peerBell = nullptr) {
  if (__builtin_expect(ready(), 1)) return chorusSuccess;
  for (int i = 0; i < w.spin; ++i) {
    cpuRelax();
    if (ready()) return chorusSuccess;
  }
  using R = std::remove_reference_t<Ready>;
  return waitSlow([](void* a) { return (*static_cast<R*>(a))(); }, &ready, w, bell, watchPid,
                  peerBell);
}

}  // namespace chorus
