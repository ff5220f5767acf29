// The exec lock's bias (src/comm/exec_lock.h), ranks as threads: the thread that makes a
// communicator's blocking calls takes it and runs them without the exec mutex; abort from
// another thread still ends such a call; a lock taken by another thread (a test hook here,
// a stream's worker, a second calling thread) revokes the bias and waits until the
// owner's call in flight has ended; the calls stay correct on every path. Also in suite
// 'tsan': the owner's unlocked calls and the revoker's locked work must be ordered.
#include <gtest/gtest.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <thread>
#include <vector>

#include "chorus.h"
#include "src/api/test_hooks.h"
#include "tests/integration/lifecycle/thread_ranks.h"

namespace {

using Clock = std::chrono::steady_clock;

// `calls` small all-reduces of rank + 1 + k on every rank's own thread, each checked.
void sumCalls(int rank, chorusComm_t c, int n, int calls) {
  std::vector<int> in(64), out(64);
  for (int k = 0; k < calls; ++k) {
    for (int& v : in) v = rank + 1 + k;
    ASSERT_EQ(chorusAllReduce(in.data(), out.data(), in.size(), chorusInt32, chorusSum, c, nullptr),
              chorusSuccess);
    for (int v : out) ASSERT_EQ(v, n * (n + 1) / 2 + n * k);
  }
}

int biasState(chorusComm_t c, int* owned) {
  int state = -1;
  EXPECT_EQ(chorusTestExecBias(c, &state, owned), chorusSuccess);
  return state;
}

// Whether the library can take the bias here: membarrier's global expedited command
// exists and CHORUS_ASYM_FENCE is not 0 (test 'exec_bias_off' sets it: every test then
// checks that no bias is taken and the mutex path alone stays correct).
bool biasExpected() {
  const char* env = std::getenv("CHORUS_ASYM_FENCE");
  if (env && std::strcmp(env, "0") == 0) return false;
  const long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  return cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0;
}

// After blocking calls on the calling thread: that thread holds the bias, or nobody ever
// will (state 2) where it is not expected.
void expectOwnBias(chorusComm_t c) {
  int owned = 0;
  const int state = biasState(c, &owned);
  EXPECT_EQ(state, biasExpected() ? 1 : 2);
  EXPECT_EQ(owned, biasExpected() ? 1 : 0);
}

TEST(ExecBias, TheCallingThreadTakesItAndAnotherThreadRevokesIt) {
  const int n = 2;
  auto comms = initThreadRanks(n, 60);
  onRanks(comms, [&](int r, chorusComm_t c) {
    sumCalls(r, c, n, 20);
    expectOwnBias(c);
    // Another thread, started while the owner lives (a thread that has ended may hand its
    // id to a new one, which then is the owner, safely): its first call revokes the bias,
    // and the calls stay right.
    std::thread other([&] {
      int owned = 1;
      const int before = biasState(c, &owned);
      EXPECT_EQ(owned, 0);
      EXPECT_EQ(before, biasExpected() ? 1 : 2);
      sumCalls(r, c, n, 20);
      EXPECT_EQ(biasState(c, &owned), 2);
    });
    other.join();
  });
  // A host stream's worker after revocation, then blocking calls again.
  onRanks(comms, [&](int r, chorusComm_t c) {
    chorusStream_t s;
    ASSERT_EQ(chorusStreamCreate(&s), chorusSuccess);
    std::vector<int> in(1024, r + 1), out(1024, -1);
    ASSERT_EQ(chorusAllReduce(in.data(), out.data(), in.size(), chorusInt32, chorusSum, c, s),
              chorusSuccess);
    ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess);
    for (int v : out) ASSERT_EQ(v, 3);
    EXPECT_EQ(chorusStreamDestroy(s), chorusSuccess);
    sumCalls(r, c, n, 5);
  });
  for (chorusComm_t c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

TEST(ExecBias, AStreamsWorkerRevokesIt) {
  const int n = 2;
  auto comms = initThreadRanks(n, 60);
  onRanks(comms, [&](int r, chorusComm_t c) {
    sumCalls(r, c, n, 5);
    expectOwnBias(c);
    chorusStream_t s;
    ASSERT_EQ(chorusStreamCreate(&s), chorusSuccess);
    std::vector<int> in(256, r + 1), out(256, -1);
    for (int k = 0; k < 3; ++k)
      ASSERT_EQ(chorusAllReduce(in.data(), out.data(), in.size(), chorusInt32, chorusSum, c, s),
                chorusSuccess);
    ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess);
    for (int v : out) ASSERT_EQ(v, 3);
    int owned = 1;
    EXPECT_EQ(biasState(c, &owned), 2);
    EXPECT_EQ(chorusStreamDestroy(s), chorusSuccess);
    sumCalls(r, c, n, 5);  // the owner's calls take the mutex now
  });
  for (chorusComm_t c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

// Rank 0's owner thread starts a call that rank 1 joins only 300 ms later; meanwhile the
// main thread takes rank 0's exec lock (the plan hook). It must revoke the bias and wait
// until the owner's call has ended: the record it reads is that call's. The owner's call
// cannot end before rank 1 has entered its own, so the lock must come after lateEntered;
// a flag the owner sets after its call returns would race the lock's hand-over (the mutex
// is free before the owner's thread runs on: CI saw that with CHORUS_ASYM_FENCE=0).
TEST(ExecBias, ALockFromAnotherThreadWaitsForTheOwnersCall) {
  const int n = 2;
  auto comms = initThreadRanks(n, 60);
  std::atomic<int> warm{0};
  std::atomic<bool> lateEntered{false};
  std::thread owner([&] {
    sumCalls(0, comms[0], n, 3);
    expectOwnBias(comms[0]);
    warm.fetch_add(1);
    std::vector<int> in(64, 1), out(64);
    EXPECT_EQ(chorusAllReduce(in.data(), out.data(), in.size(), chorusInt32, chorusSum, comms[0],
                              nullptr),
              chorusSuccess);
    for (int v : out) EXPECT_EQ(v, 3);
  });
  std::thread late([&] {
    sumCalls(1, comms[1], n, 3);
    warm.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    std::vector<int> in(64, 2), out(64);
    lateEntered = true;
    EXPECT_EQ(chorusAllReduce(in.data(), out.data(), in.size(), chorusInt32, chorusSum, comms[1],
                              nullptr),
              chorusSuccess);
  });
  while (warm.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the owner's 4th call waits
  chorusTestPlanRecord rec{};
  ASSERT_EQ(chorusTestLastPlan(comms[0], &rec), chorusSuccess);  // lockExec: revokes, waits
  EXPECT_TRUE(lateEntered.load()) << "took the lock while the owner's call ran";
  EXPECT_EQ(rec.seq, 4u);
  owner.join();
  late.join();
  int owned = 0;
  EXPECT_EQ(biasState(comms[0], &owned), 2);
  for (chorusComm_t c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

// The owner's call (on the bias, outside the mutex and activeCalls) waits for a peer that
// never comes; chorusCommAbort from another thread must end it and free the communicator
// only after it has returned.
TEST(ExecBias, AbortFromAnotherThreadEndsTheOwnersCall) {
  const int n = 2;
  auto comms = initThreadRanks(n, 60);
  std::atomic<int> warm{0};
  std::atomic<int> result{-1};
  std::thread owner([&] {
    sumCalls(0, comms[0], n, 3);
    expectOwnBias(comms[0]);
    warm.fetch_add(1);
    std::vector<int> in(64, 1), out(64);
    result = chorusAllReduce(in.data(), out.data(), in.size(), chorusInt32, chorusSum, comms[0],
                             nullptr);
  });
  std::thread other([&] {
    sumCalls(1, comms[1], n, 3);
    warm.fetch_add(1);
  });
  other.join();
  while (warm.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = Clock::now();
  EXPECT_EQ(chorusCommAbort(comms[0]), chorusSuccess);
  EXPECT_NE(result.load(), -1) << "abort returned before the call it ended";
  owner.join();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  EXPECT_EQ(result.load(), chorusAborted);
  EXPECT_EQ(chorusCommDestroy(comms[1]), chorusSuccess);
}

}  // namespace
