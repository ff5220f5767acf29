#include "src/core/wait.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/core/asym_fence.h"

namespace chorus {

namespace {
constexpr int64_t kSleepSliceNs = 10000000;  // futex timeout: re-check deadline/abort/peer
constexpr int64_t kPeerCheckNs = 500000000;  // how often a waiter checks its peer's process
constexpr int64_t kYieldSliceNs = 50000;     // no doorbell: sleep this long between polls
constexpr int kPollsPerClockRead = 32;       // clock_gettime costs ~20 ns; a poll ~5 ns
constexpr int64_t kBusyCheckNs = 2000000;    // how often /proc/loadavg is read (~2 us a read)

// The peer waits on this CPU, and the job's ranks do not crowd the CPUs they may use: the
// kernel stacked them (a futex wake-up pulls the woken task to the waker's CPU, and on a
// busy machine nothing pulls it back). Step to another CPU this thread may use, as the
// load balancer could, and leave the affinity mask as it was: set it to one other CPU,
// which moves the thread before the call returns, then restore it. At most once per
// kUnstackGapNs, so a kernel that keeps stacking the ranks is not fought in a loop.
constexpr int64_t kUnstackGapNs = 100000000;  // 100 ms

// How many tasks are runnable now, this caller included, from an open /proc/loadavg:
// "0.52 0.58 0.59 3/187 4321", the fourth field's first number; -1 if it cannot be read.
int runnableTasks(int loadFd) {
  char buf[128];
  const ssize_t n = loadFd >= 0 ? pread(loadFd, buf, sizeof(buf) - 1, 0) : -1;
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* p = buf;
  for (int field = 0; field < 3 && p; ++field) {
    p = strchr(p, ' ');
    if (p) ++p;
  }
  return p ? atoi(p) : -1;
}

// Per thread, not per process: only the threads that set it (stream workers) spin less.
thread_local int64_t threadSpinCapNs = -1;

// kSpinCapWhenCrowded: whether more tasks are runnable than the machine has CPUs, from
// /proc/loadavg looked at no more than every kCrowdLookNs by this thread. The count includes
// this waiter: beside DDP's backward pass (one compute thread a rank or more, on every core)
// it exceeds the CPUs, so a spin takes a core from a compute thread; once the callers block
// on the result, only the workers are left and they spin as before.
constexpr int64_t kCrowdLookNs = 1000000;
struct CrowdLook {
  int fd = -1;
  int cpus = 0;
  int64_t lookedNs = INT64_MIN;
  bool crowded = false;
  ~CrowdLook() {
    if (fd >= 0) close(fd);
  }
};
thread_local CrowdLook threadCrowdLook;

bool cpusCrowded(int64_t now) {
  CrowdLook& c = threadCrowdLook;
  if (c.lookedNs != INT64_MIN && now - c.lookedNs < kCrowdLookNs) return c.crowded;
  c.lookedNs = now;
  if (c.fd < 0) {
    c.fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    c.cpus = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  }
  const int runnable = runnableTasks(c.fd);
  return c.crowded = runnable >= 0 && runnable > c.cpus;
}

// Moves the calling thread to CPU `to` now (pinned there for an instant), then gives it back
// its `allowed` mask: the kernel leaves it where it is until it balances again.
bool stepTo(int to, const cpu_set_t& allowed) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(to, &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) return false;
  sched_setaffinity(0, sizeof(allowed), &allowed);
  return true;
}

bool moveOffPeersCpu(WaitPolicy* policy, int here, int64_t now) {
  if (now - policy->lastUnstackNs.load(std::memory_order_relaxed) < kUnstackGapNs) return false;
  policy->lastUnstackNs.store(now, std::memory_order_relaxed);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2) return false;
  // The next allowed CPU after this one, wrapping around.
  int to = -1;
  for (int k = 1; k < CPU_SETSIZE && to < 0; ++k) {
    const int c = (here + k) % CPU_SETSIZE;
    if (CPU_ISSET(c, &allowed)) to = c;
  }
  if (to < 0 || to == here || !stepTo(to, allowed)) return false;
  policy->unstacks.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// CHORUS_CROWD_BALANCE (WaitPolicy::hostBells): look at where the host's ranks wait no more
// than every kBalanceLookNs; step off a CPU that holds more than its share of them.
constexpr int64_t kBalanceLookNs = 2000000;  // 2 ms

int ranksWaitingOn(const WaitPolicy* policy, int cpuPlusOne, int* highest) {
  int count = 0;
  for (int i = 0; i < static_cast<int>(policy->hostBells.size()); ++i)
    if (policy->hostBells[static_cast<size_t>(i)]->cpuPlusOne.load(std::memory_order_relaxed) ==
        cpuPlusOne) {
      ++count;
      *highest = i;
    }
  return count;
}

bool balanceCrowdedCpus(WaitPolicy* policy, int here, int64_t now) {
  if (now - policy->lastBalanceLookNs.load(std::memory_order_relaxed) < kBalanceLookNs)
    return false;
  policy->lastBalanceLookNs.store(now, std::memory_order_relaxed);
  int highest = -1;
  if (ranksWaitingOn(policy, here + 1, &highest) <= policy->cpuShare ||
      highest != policy->hostBellIndex)
    return false;
  if (now - policy->lastUnstackNs.load(std::memory_order_relaxed) < kUnstackGapNs) return false;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2) return false;
  int to = -1;
  for (int c = 0; c < CPU_SETSIZE && to < 0; ++c) {
    int h = -1;
    if (c != here && CPU_ISSET(c, &allowed) && ranksWaitingOn(policy, c + 1, &h) < policy->cpuShare)
      to = c;
  }
  if (to < 0) return false;
  policy->lastUnstackNs.store(now, std::memory_order_relaxed);
  if (!stepTo(to, allowed)) return false;
  policy->rebalances.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace

void WaitPolicy::configure(int64_t startNs, int64_t minNs, int64_t maxNs, bool adapt) {
  minSpinNs = std::max<int64_t>(0, minNs);
  maxSpinNs = std::max(minSpinNs, maxNs);
  adaptive = adapt;
  spinNs.store(std::clamp(startNs, minSpinNs, maxSpinNs), std::memory_order_relaxed);
}

WaitPolicy::~WaitPolicy() {
  if (loadFd_ >= 0) close(loadFd_);
}

bool WaitPolicy::enableBusyCheck(int64_t spinNs, int ownThreads) {
  busySpinNs = 0;
  if (spinNs <= 0) return true;
  if (loadFd_ < 0) loadFd_ = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (loadFd_ < 0) return false;
  busyAbove_ =
      std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))) + std::max(0, ownThreads);
  busyCheckedNs_.store(INT64_MIN, std::memory_order_relaxed);
  busy_.store(false, std::memory_order_relaxed);
  lastLookBusy_.store(false, std::memory_order_relaxed);
  busySpinNs = spinNs;
  return true;
}

bool WaitPolicy::machineBusy(int64_t now) {
  const int64_t last = busyCheckedNs_.load(std::memory_order_relaxed);
  if (loadFd_ < 0 || (last != INT64_MIN && now - last < kBusyCheckNs))
    return busy_.load(std::memory_order_relaxed);
  busyCheckedNs_.store(now, std::memory_order_relaxed);
  const int runnable = runnableTasks(loadFd_);
  if (runnable < 0) return busy_.load(std::memory_order_relaxed);
  const bool look = runnable > busyAbove_;
  const bool before = lastLookBusy_.exchange(look, std::memory_order_relaxed);
  const bool busy = look && before;
  busy_.store(busy, std::memory_order_relaxed);
  return busy;
}

void WaitPolicy::onWait(bool slept, bool forPeer, int64_t wakeLatencyNs, bool busy) {
  slowWaits.fetch_add(1, std::memory_order_relaxed);
  if (!slept) return;
  sleeps.fetch_add(1, std::memory_order_relaxed);
  if (forPeer) peerSleeps.fetch_add(1, std::memory_order_relaxed);
  if (busy) busySleeps.fetch_add(1, std::memory_order_relaxed);
  if (!adaptive || forPeer || busy || wakeLatencyNs < 0) return;
  const int64_t target = std::clamp(kWakeFactor * wakeLatencyNs, minSpinNs, maxSpinNs);
  const int64_t now = spinNs.load(std::memory_order_relaxed);
  const int64_t step = (target - now) / 4;
  spinNs.store(step != 0 ? now + step : target, std::memory_order_relaxed);
}

void setThreadSpinCap(int64_t ns) { threadSpinCapNs = ns; }

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
                        int watchPid, const Doorbell* peerBell) {
  const int64_t start = nowNs();
  int64_t budget =
      w.policy ? w.policy->spinNs.load(std::memory_order_relaxed) : WaitPolicy::kDefaultSpinNs;
  const bool capApplies = !w.policy || w.policy->adaptive;
  if (threadSpinCapNs >= 0 && capApplies) budget = std::min(budget, threadSpinCapNs);
  const bool capWhenCrowded = threadSpinCapNs == kSpinCapWhenCrowded && capApplies;
  const int64_t spinUntil = start + budget;
  const int64_t deadline = w.deadlineNs > 0 ? w.deadlineNs : start - w.deadlineNs;
  int64_t nextPeerCheck = start + kPeerCheckNs;
  bool slept = false;
  bool sleptForPeer = false;  // a quick wake-up then says the sleep helped: learn nothing
  bool sleptBusy = false;     // slept early on a busy machine: learn nothing either
  const int64_t busySpin = w.policy ? w.policy->busySpinNs : 0;
  int64_t wakeLatency = -1;  // how long after the writer's ring this waiter ran again
  chorusResult_t result = chorusSuccess;
  // Ranks that crowd their cores (no spin budget, yield first) yield after every poll, not
  // every kPollsPerClockRead: each further poll keeps the core from the rank it waits for
  // (measured, np 4 and 8 on 2 CPUs, 8 B-4 KiB all-reduce: medians 25-30% lower).
  const uint64_t pollsPerCheck =
      w.policy && w.policy->yieldFirstNs > 0 && budget == 0 ? 1 : kPollsPerClockRead;
  for (uint64_t iter = 1;; ++iter) {
    if (ready(arg)) break;
    if (iter % pollsPerCheck != 0) {
      cpuRelax();
      continue;
    }
    if (w.abortFlag && w.abortFlag->load(std::memory_order_relaxed)) {
      result = chorusAborted;
      break;
    }
    if (w.linkFailure && w.linkFailure->failed()) {
      result = w.linkFailure->raise(w.what);
      break;
    }
    const int64_t t = nowNs();
    if (t > deadline) {
      result = chorusTimeout;
      break;
    }
    if (watchPid > 0 && t > nextPeerCheck) {
      nextPeerCheck = t + kPeerCheckNs;
      if (processGone(watchPid)) {
        result = ready(arg) ? chorusSuccess : chorusRemoteError;
        break;
      }
    }
    // A peer last seen waiting on this very CPU is queued behind us (or asleep): every poll
    // keeps it off the core that would let it answer. Step to another CPU, or sleep now.
    const int cpuPlusOne = sched_getcpu() + 1;
    if (bell && bell->cpuPlusOne.load(std::memory_order_relaxed) != cpuPlusOne)
      bell->cpuPlusOne.store(cpuPlusOne, std::memory_order_relaxed);
    bool peerHere = peerBell && peerBell->cpuPlusOne.load(std::memory_order_relaxed) == cpuPlusOne;
    if (peerHere && w.policy && w.policy->unstack && moveOffPeersCpu(w.policy, cpuPlusOne - 1, t))
      continue;  // now on another CPU: spin there
    if (w.policy && !w.policy->hostBells.empty() && balanceCrowdedCpus(w.policy, cpuPlusOne - 1, t))
      continue;  // now on a CPU with fewer of the host's ranks
    if (t < spinUntil && !peerHere) {
      // A stream worker whose process's (or a peer's) compute wants the cores: sleep at
      // once, the compute keeps the core, and the writer's ring runs the worker again.
      // Otherwise, more runnable tasks than CPUs: a spin past busySpinNs only spends this
      // waiter's share of its CPU; sleep, and let the writer's ring run it again.
      if (capWhenCrowded && cpusCrowded(t)) {
        sleptBusy = true;
      } else {
        if (busySpin <= 0 || t - start < busySpin || !w.policy->machineBusy(t)) continue;
        sleptBusy = true;
      }
    }
    // Where the host's own ranks crowd its CPUs, whoever runs next on this CPU is most
    // likely another rank of the job: yielding hands it the CPU without the system call
    // and wake-up a futex costs (measured: np 4 on 2 CPUs, 8 B in 3-7 us yielding against
    // 22 us sleeping). After yieldFirstNs of that, sleep like everybody else.
    if (w.policy && t - start < w.policy->yieldFirstNs) {
      sched_yield();
      continue;
    }
    // The budget is spent (or the peer needs this CPU): sleep until a writer rings, or a
    // slice passes, to look at the deadline, the abort flag and the peer again.
    slept = true;
    sleptForPeer = sleptForPeer || peerHere;
    if (!bell) {
      timespec ts{0, kYieldSliceNs};
      nanosleep(&ts, nullptr);
      continue;
    }
    uint32_t seen = bell->seq.load(std::memory_order_acquire);
    bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
    // Writers that ring this bell light (no fence: ringDoorbellLight) are ordered against
    // the count above by the heavy side of the asymmetric fence, before the last look.
    if (bell->asymmetric.load(std::memory_order_relaxed) != 0) asymHeavyFence();
    if (ready(arg)) {
      bell->sleepers.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
    timespec ts{0, kSleepSliceNs};
    const int64_t asleepSince = nowNs();
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell->seq), FUTEX_WAIT, seen, &ts, nullptr, 0);
    bell->sleepers.fetch_sub(1, std::memory_order_relaxed);
    const int64_t rang = bell->rangNs.load(std::memory_order_relaxed);
    if (rang >= asleepSince) wakeLatency = std::max<int64_t>(0, nowNs() - rang);
  }
  if (w.policy && result == chorusSuccess)
    w.policy->onWait(slept, sleptForPeer, wakeLatency, sleptBusy && !sleptForPeer);
  return result;
}

}  // namespace chorus
