#include "src/core/wait.h"

#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace chorus {

namespace {
// After this long yielding, go to sleep on the doorbell: yielding keeps latency low for
// short waits, sleeping keeps an idle rank from costing its peers CPU time.
constexpr int64_t kYieldPhaseNs = 2000000;   // 2 ms
constexpr int64_t kSleepSliceNs = 10000000;  // futex timeout: re-check deadline/abort
constexpr int64_t kPeerCheckNs = 500000000;  // how often a sleeping waiter checks its peer

}  // namespace

bool processGone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[32];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "re");
  if (!f) return false;
  char buf[512];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');  // the command name may hold spaces and parentheses
  return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

chorusResult_t waitSlow(bool (*ready)(void*), void* arg, const WaitCtx& w, Doorbell* bell,
                        int watchPid) {
  const int64_t start = nowNs();
  int64_t nextPeerCheck = start + kPeerCheckNs;
  for (uint64_t iter = 1;; ++iter) {
    if (ready(arg)) return chorusSuccess;
    if (w.abortFlag && w.abortFlag->load(std::memory_order_relaxed)) return chorusAborted;
    sched_yield();
    if ((iter & 15) == 0) {
      int64_t t = nowNs();
      if (t > w.deadlineNs) return chorusTimeout;
      if (watchPid > 0 && t > nextPeerCheck) {
        nextPeerCheck = t + kPeerCheckNs;
        if (processGone(watchPid)) return ready(arg) ? chorusSuccess : chorusRemoteError;
      }
      if (bell && t - start > kYieldPhaseNs) {
        uint32_t seen = bell->seq.load(std::memory_order_acquire);
        bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
        if (ready(arg)) {
          bell->sleepers.fetch_sub(1, std::memory_order_relaxed);
          return chorusSuccess;
        }
        timespec ts{0, kSleepSliceNs};
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell->seq), FUTEX_WAIT, seen, &ts, nullptr,
                0);
        bell->sleepers.fetch_sub(1, std::memory_order_relaxed);
      }
    }
  }
}

}  // namespace chorus
