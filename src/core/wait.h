// wait.h — how a rank waits for another: spin, then yield, then sleep on a futex.
//
// With more ranks than cores (8 ranks on 2 cores) a spinning waiter steals the core its
// peer needs, so the waiter yields early and, after a while, sleeps on a futex word in
// shared memory (a "doorbell") that writers ring after they publish. Ringing costs one
// fence and one load unless someone sleeps. Every wait has a deadline and watches the
// communicator's abort flag.
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

#include "chorus.h"

namespace chorus {

/// How to wait: until when, what to watch for abort, how eagerly to spin, and what to say
/// if the deadline passes.
struct WaitCtx {
  int64_t deadlineNs;  ///< absolute CLOCK_MONOTONIC
  const std::atomic<int>* abortFlag;
  int spin;          ///< polls before the first yield
  const char* what;  ///< e.g. "all_reduce #12"
};

/// A futex word plus a count of sleepers; lives in shared memory, one per rank.
struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> sleepers;
  char pad[56];
};
static_assert(sizeof(Doorbell) == 64, "one cache line");

inline int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

inline void cpuRelax() { __builtin_ia32_pause(); }

/// Wakes whoever sleeps on `bell`. Call after publishing (the fence orders the publish
/// before the sleeper check, pairing with the fence in waitUntil).
inline void ringDoorbell(Doorbell* bell) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (__builtin_expect(bell->sleepers.load(std::memory_order_relaxed) != 0, 0)) {
    bell->seq.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell->seq), FUTEX_WAKE, INT_MAX, nullptr,
            nullptr, 0);
  }
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

/// Slow part of waitUntil (out of line: keeps the fast path small).
chorusResult_t waitSlow(bool (*ready)(void*), void* arg, const WaitCtx& w, Doorbell* bell,
                        int watchPid);

/// Returns chorusSuccess once ready() is true, chorusAborted if the abort flag rises,
/// chorusTimeout at the deadline (the caller names what it waited for), and
/// chorusRemoteError once process `watchPid` (a same-host peer; 0: none) no longer exists,
/// checked about twice a second while sleeping, so a dead peer is not a five-minute hang.
template <class Ready>
inline chorusResult_t waitUntil(Ready&& ready, const WaitCtx& w, Doorbell* bell, int watchPid = 0) {
  if (__builtin_expect(ready(), 1)) return chorusSuccess;
  for (int i = 0; i < w.spin; ++i) {
    cpuRelax();
    if (ready()) return chorusSuccess;
  }
  using R = std::remove_reference_t<Ready>;
  return waitSlow([](void* a) { return (*static_cast<R*>(a))(); }, &ready, w, bell, watchPid);
}

}  // namespace chorus
