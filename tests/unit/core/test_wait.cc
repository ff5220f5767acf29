// Waiting (src/core/wait.h): the spin budget's learning rules, a sleeper woken by the
// writer's doorbell, a waiter that sleeps at once when its peer waits on its CPU, and the
// deadline and abort exits, and a broken link elsewhere. Real threads, a real futex.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "src/core/checks.h"
#include "src/core/wait.h"

namespace chorus {
namespace {

TEST(WaitPolicy, BudgetMovesTowardsFourTimesTheMeasuredWakeLatency) {
  WaitPolicy p;
  p.configure(100000, 1000, 10000000, true);
  // Woken 1 ms after the ring: a sleep is dear here, spin longer (100 us -> 1.075 ms).
  p.onWait(/*slept*/ true, /*forPeer*/ false, /*wakeLatency*/ 1000000);
  EXPECT_EQ(p.spinNs.load(), 100000 + (4000000 - 100000) / 4);
  for (int i = 0; i < 100; ++i) p.onWait(true, false, 1000000);
  EXPECT_NEAR(static_cast<double>(p.spinNs.load()), 4000000.0, 4.0);
  // Woken 5 us after the ring: sleeping is cheap, spin less; the floor holds.
  for (int i = 0; i < 100; ++i) p.onWait(true, false, 5000);
  EXPECT_NEAR(static_cast<double>(p.spinNs.load()), 20000.0, 4.0);
  for (int i = 0; i < 100; ++i) p.onWait(true, false, 0);
  EXPECT_EQ(p.spinNs.load(), 1000);
  for (int i = 0; i < 100; ++i) p.onWait(true, false, 1000000000);
  EXPECT_EQ(p.spinNs.load(), 10000000) << "the ceiling holds";
}

TEST(WaitPolicy, SpinsThatEndInTimeSleepsForThePeerAndTimeoutsTeachNothing) {
  WaitPolicy p;
  p.configure(50000, 1000, 10000000, true);
  p.onWait(false, false, -1);     // ended while spinning
  p.onWait(true, true, 3000000);  // slept because the peer needed the CPU
  p.onWait(true, false, -1);      // woke by timeout, not by a ring
  EXPECT_EQ(p.spinNs.load(), 50000);
  EXPECT_EQ(p.slowWaits.load(), 3u);
  EXPECT_EQ(p.sleeps.load(), 2u);
  EXPECT_EQ(p.peerSleeps.load(), 1u);
  WaitPolicy fixed;
  fixed.configure(7000, 7000, 7000, false);
  fixed.onWait(true, false, 5000000);
  EXPECT_EQ(fixed.spinNs.load(), 7000);
}

TEST(WaitPolicy, ConfigureClampsTheStart) {
  WaitPolicy p;
  p.configure(1, 500, 900, true);
  EXPECT_EQ(p.spinNs.load(), 500);
  p.configure(5000, 500, 900, true);
  EXPECT_EQ(p.spinNs.load(), 900);
}

struct Waiting {
  std::atomic<int> flag{0};
  Doorbell bell{};
  Doorbell peerBell{};
  std::atomic<int> abortFlag{0};
  WaitPolicy policy;
  WaitCtx ctx(int64_t forNs) {
    return WaitCtx{nowNs() + forNs, &abortFlag, 0, "the test", &policy};
  }
};

// The writer: publish, then ring, as the transports do.
void publishLater(Waiting* w, int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  w->flag.store(1, std::memory_order_release);
  ringDoorbell(&w->bell);
}

// The writer for a wait that should do something first (go to sleep, step to another CPU):
// publish once it has (or after maxMs, if it never does), so the outcome does not hang on how
// much CPU a loaded machine lets the waiter have in a fixed time. A writer that published
// after a fixed pause found the waiter not yet waiting when a loaded machine (or TSan) held
// it back that long; and a fixed 50 ms ends just as a sleeper's fifth 10 ms futex slice does,
// when it is awake and counted out of the doorbell's sleepers, so the ring found nobody to
// wake (1 run in 300 beside two busy loops: "the writer stamped its ring" failed).
template <typename Done>
void publishOnce(Waiting* w, int maxMs, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(maxMs);
  while (!done() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  w->flag.store(1, std::memory_order_release);
  ringDoorbell(&w->bell);
}

void publishOnceAsleep(Waiting* w, int maxMs) {
  publishOnce(w, maxMs, [w] { return w->bell.sleepers.load() != 0; });
}

void publishOnceStepped(Waiting* w, int maxMs) {
  publishOnce(w, maxMs, [w] { return w->policy.unstacks.load() != 0; });
}

// More runnable threads than CPUs: `count` threads that spin until stop() (or the end of
// the scope), so the machine reads as busy while they run.
class SpinningHogs {
 public:
  explicit SpinningHogs(int count) {
    for (int i = 0; i < count; ++i)
      threads_.emplace_back([this] {
        while (!stop_.load(std::memory_order_relaxed)) cpuRelax();
      });
  }
  ~SpinningHogs() { stop(); }
  void stop() {
    stop_.store(true);
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST(WaitUntil, SleeperIsWokenByTheWritersDoorbell) {
  Waiting w;
  w.policy.configure(0, 0, 0, false);  // no spinning: sleep at once
  std::thread writer(publishOnceAsleep, &w, 10000);
  chorusResult_t r = waitUntil([&] { return w.flag.load(std::memory_order_acquire) == 1; },
                               w.ctx(20000000000), &w.bell, 0, &w.peerBell);
  writer.join();
  EXPECT_EQ(r, chorusSuccess);
  EXPECT_EQ(w.flag.load(), 1);
  EXPECT_EQ(w.policy.sleeps.load(), 1u);
  EXPECT_EQ(w.bell.sleepers.load(), 0u) << "the sleeper unregistered";
  EXPECT_NE(w.bell.cpuPlusOne.load(), 0) << "the waiter published its CPU";
  EXPECT_GT(w.bell.rangNs.load(), 0) << "the writer stamped its ring";
}

TEST(WaitUntil, PeerQueuedOnThisCpuMakesTheWaiterSleepAtOnce) {
  // Pin the waiter so the CPU it publishes is the one it polls on.
  cpu_set_t all, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  Waiting w;
  w.policy.configure(60000000000, 60000000000, 60000000000, false);  // would spin a minute
  w.peerBell.cpuPlusOne.store(sched_getcpu() + 1);
  std::thread writer(publishOnceAsleep, &w, 10000);
  chorusResult_t r = waitUntil([&] { return w.flag.load(std::memory_order_acquire) == 1; },
                               w.ctx(20000000000), &w.bell, 0, &w.peerBell);
  writer.join();
  sched_setaffinity(0, sizeof(all), &all);
  EXPECT_EQ(r, chorusSuccess);
  EXPECT_EQ(w.policy.peerSleeps.load(), 1u) << "it slept for the peer, not after its budget";
}

TEST(WaitUntil, UnstackingStepsToAnotherCpuAndKeepsTheMask) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "needs two CPUs to step between";
  Waiting w;
  w.policy.configure(200000000, 200000000, 200000000, false);  // spin 0.2 s
  w.policy.unstack = true;
  // "The peer waits on my CPU", wherever the scheduler puts this thread: a stand-in peer
  // follows the CPU the waiter publishes (a fixed CPU read before the wait let the test
  // fail when the thread migrated before its first poll, as it did once under TSan in CI).
  w.peerBell.cpuPlusOne.store(sched_getcpu() + 1);
  std::atomic<bool> stop{false};
  std::thread peer([&] {
    while (!stop.load()) {
      const int cpu = w.bell.cpuPlusOne.load();
      if (cpu != 0) w.peerBell.cpuPlusOne.store(cpu);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::thread writer(publishOnceStepped, &w, 10000);
  chorusResult_t r = waitUntil([&] { return w.flag.load(std::memory_order_acquire) == 1; },
                               w.ctx(20000000000), &w.bell, 0, &w.peerBell);
  const auto waitedMs =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  writer.join();
  stop.store(true);
  peer.join();
  EXPECT_EQ(r, chorusSuccess);
  // One step, then at most one more per 100 ms gap (the writer publishes once the first
  // step is made).
  EXPECT_GE(w.policy.unstacks.load(), 1u) << "it stepped off the peer's CPU";
  EXPECT_LE(w.policy.unstacks.load(), 1u + static_cast<unsigned>(waitedMs / 100))
      << "steps kept the 100 ms gap (waited " << waitedMs << " ms)";
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "the thread's mask is as it was";
}

TEST(WaitUntil, PeerOnAnotherCpuIsWaitedForBySpinning) {
  Waiting w;
  w.policy.configure(60000000000, 60000000000, 60000000000, false);
  w.peerBell.cpuPlusOne.store(100000);  // a CPU this machine does not have
  std::thread writer(publishLater, &w, 20);
  chorusResult_t r = waitUntil([&] { return w.flag.load(std::memory_order_acquire) == 1; },
                               w.ctx(20000000000), &w.bell, 0, &w.peerBell);
  writer.join();
  EXPECT_EQ(r, chorusSuccess);
  EXPECT_EQ(w.policy.sleeps.load(), 0u);
}

// A busy machine (more runnable threads than CPUs: real spinning threads here) cuts a long
// learnt budget short; the same wait on the same busy machine with the check off spins it
// out (negative control, ~40 ms). The busy wait's writer publishes once it sleeps (at most
// 10 s): it needs two looks 2 ms apart, and under a heavy load (other jobs on the machine)
// a waiter that shares its CPU with the hogs and them may not get 2 ms of CPU within a
// fixed 40 ms, which made the test flaky there.
TEST(WaitUntil, BusyMachineCutsTheSpinShort) {
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  SpinningHogs hogs(cpus + 1);
  auto waitOnce = [](int64_t busySpinNs, WaitPolicy* policy) {
    Waiting w;
    w.policy.configure(60000000000, 60000000000, 60000000000, true);  // would spin a minute
    EXPECT_TRUE(w.policy.enableBusyCheck(busySpinNs));
    w.peerBell.cpuPlusOne.store(100000);  // the peer waits on another CPU
    std::thread writer(busySpinNs > 0 ? publishOnceAsleep : publishLater, &w,
                       busySpinNs > 0 ? 10000 : 40);
    chorusResult_t r = waitUntil([&] { return w.flag.load(std::memory_order_acquire) == 1; },
                                 w.ctx(20000000000), &w.bell, 0, &w.peerBell);
    writer.join();
    EXPECT_EQ(r, chorusSuccess);
    policy->busySleeps.store(w.policy.busySleeps.load());
    policy->sleeps.store(w.policy.sleeps.load());
    policy->spinNs.store(w.policy.spinNs.load());
  };
  WaitPolicy on, off;
  waitOnce(5000, &on);
  waitOnce(0, &off);
  // Still busy now? Otherwise the machine did not see the threads (they are real runnable
  // threads, so it does unless something else ends them).
  // Two looks 2 ms apart, as a wait takes them (one look alone is an instant, not a busy
  // machine). A bar raised by this job's own threads above the hogs reads as not busy; the
  // bar is out of any real load's reach (a bar of 2 * cpus + 4 was not: other jobs' compilers
  // beside the hogs made it flaky on a loaded machine).
  constexpr int kOwnThreads = 1 << 20;
  WaitPolicy probe, ownThreads;
  ASSERT_TRUE(probe.enableBusyCheck(1));
  ASSERT_TRUE(ownThreads.enableBusyCheck(1, kOwnThreads));
  const int64_t t0 = nowNs();
  const bool firstLook = probe.machineBusy(t0);
  const bool stillBusy = probe.machineBusy(t0 + 3000000);
  ownThreads.machineBusy(t0);
  const bool ownBusy = ownThreads.machineBusy(t0 + 3000000);
  hogs.stop();
  EXPECT_FALSE(firstLook) << "one look is not enough to call the machine busy";
  ASSERT_TRUE(stillBusy) << cpus + 1 << " spinning threads and this one on " << cpus
                         << " CPUs should read as busy";
  EXPECT_FALSE(ownBusy) << "the job's own threads raise the bar (" << kOwnThreads << ")";
  EXPECT_GE(on.busySleeps.load(), 1u) << "it slept on the busy machine";
  EXPECT_EQ(on.spinNs.load(), 60000000000) << "a busy machine's sleep teaches nothing";
  EXPECT_EQ(off.sleeps.load(), 0u) << "without the check it spins its budget out";
}

// A stream worker's cap kSpinCapWhenCrowded: beside more runnable threads than CPUs (a
// rank's compute threads) its wait sleeps at once, however long the learnt budget; the same
// thread with no cap spins its budget out.
TEST(WaitUntil, CrowdedCpusMakeAStreamWorkerSleepAtOnce) {
  const int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  SpinningHogs hogs(cpus + 1);
  auto waitOnce = [](int64_t cap, uint64_t* sleeps, int64_t* spinNs) {
    std::thread worker([&] {
      setThreadSpinCap(cap);
      Waiting w;
      w.policy.configure(60000000000, 60000000000, 60000000000, true);  // would spin a minute
      w.peerBell.cpuPlusOne.store(100000);  // the peer waits on another CPU
      // Capped, it should sleep: publish once it does (at most 10 s); uncapped, it spins.
      const bool capped = cap == kSpinCapWhenCrowded;
      std::thread writer(capped ? publishOnceAsleep : publishLater, &w, capped ? 10000 : 40);
      chorusResult_t r = waitUntil([&] { return w.flag.load(std::memory_order_acquire) == 1; },
                                   w.ctx(20000000000), &w.bell, 0, &w.peerBell);
      writer.join();
      EXPECT_EQ(r, chorusSuccess);
      *sleeps = w.policy.sleeps.load();
      *spinNs = w.policy.spinNs.load();
    });
    worker.join();
  };
  uint64_t crowdedSleeps = 0, uncappedSleeps = 0;
  int64_t crowdedSpin = 0, uncappedSpin = 0;
  waitOnce(kSpinCapWhenCrowded, &crowdedSleeps, &crowdedSpin);
  waitOnce(-1, &uncappedSleeps, &uncappedSpin);
  hogs.stop();
  EXPECT_GE(crowdedSleeps, 1u) << cpus + 1 << " spinning threads on " << cpus << " CPUs";
  EXPECT_EQ(crowdedSpin, 60000000000) << "a crowded machine's sleep teaches nothing";
  EXPECT_EQ(uncappedSleeps, 0u) << "without the cap it spins its budget out";
}

TEST(WaitPolicy, QuietMachineIsNotBusy) {
  WaitPolicy p;
  EXPECT_FALSE(p.machineBusy(nowNs())) << "the check is off until enabled";
  ASSERT_TRUE(p.enableBusyCheck(5000));
  EXPECT_EQ(p.busySpinNs, 5000);
  ASSERT_TRUE(p.enableBusyCheck(0));
  EXPECT_EQ(p.busySpinNs, 0) << "0 turns it off";
}

TEST(WaitUntil, DeadlineAndAbortEndTheWait) {
  Waiting w;
  w.policy.configure(1000, 1000, 1000, false);
  EXPECT_EQ(waitUntil([] { return false; }, w.ctx(30000000), &w.bell, 0, nullptr), chorusTimeout);
  w.abortFlag.store(1);
  EXPECT_EQ(waitUntil([] { return false; }, w.ctx(20000000000), &w.bell, 0, nullptr),
            chorusAborted);
  WaitCtx noPolicy{nowNs() + 30000000, nullptr, 0, "no policy"};
  EXPECT_EQ(waitUntil([] { return false; }, noPolicy, nullptr), chorusTimeout);
}

// A broken link elsewhere in the communicator ends a wait on a healthy peer, asleep or not,
// with the link's own message; what already arrived is still taken first.
TEST(WaitUntil, BrokenLinkElsewhereEndsTheWait) {
  Waiting w;
  w.policy.configure(0, 0, 0, false);  // asleep on the doorbell when the link breaks
  LinkFailure links;
  WaitCtx ctx = w.ctx(20000000000);
  ctx.linkFailure = &links;
  const auto start = std::chrono::steady_clock::now();
  std::thread breaker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    links.record(chorusRemoteError, "RDMA write to rank 1 (dev:1 qp 0x5) failed");
    ringDoorbell(&w.bell);
  });
  EXPECT_EQ(waitUntil([&] { return w.flag.load() != 0; }, ctx, &w.bell, 0, nullptr),
            chorusRemoteError);
  breaker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  const std::string msg = threadLastError();
  EXPECT_NE(msg.find("broke earlier, so the test cannot complete"), std::string::npos) << msg;
  EXPECT_NE(msg.find("RDMA write to rank 1 (dev:1 qp 0x5) failed"), std::string::npos) << msg;
  // The first failure stays; a ready wait still succeeds.
  links.record(chorusSystemError, "a later failure");
  EXPECT_EQ(links.code.load(), chorusRemoteError);
  EXPECT_EQ(links.what, "RDMA write to rank 1 (dev:1 qp 0x5) failed");
  w.flag.store(1);
  EXPECT_EQ(waitUntil([&] { return w.flag.load() != 0; }, ctx, &w.bell, 0, nullptr), chorusSuccess);
}

}  // namespace
}  // namespace chorus
