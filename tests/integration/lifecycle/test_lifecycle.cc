// Communicator lifecycle and failure behaviour, ranks as threads: non-blocking init, a
// config timeout that turns a missing peer into chorusTimeout naming it, abort from another
// thread, mismatched calls detected rather than corrupting memory, self-send rules,
// split + destroy, and no segment left in /dev/shm.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "chorus.h"
#include "tests/integration/lifecycle/thread_ranks.h"

namespace {

using Clock = std::chrono::steady_clock;

// This process's segments in /dev/shm: the shm transport names each after the process that
// made it ("chorus-...-p<pid>"), and the ranks here are all threads of this process. Every
// "chorus" name also counted those of other jobs (a test meson runs beside this one, another
// user of the machine), which may make or unlink theirs between two counts.
int countChorusShm() {
  const std::string ours = "-p" + std::to_string(getpid());
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.find("chorus") != std::string::npos && name.size() > ours.size() &&
          name.compare(name.size() - ours.size(), ours.size(), ours) == 0)
        ++n;
    }
    closedir(d);
  }
  return n;
}

TEST(Lifecycle, NonBlockingInitReportsProgressThenSuccess) {
  chorusUniqueId id;
  ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  const int n = 3;
  std::vector<chorusComm_t> comms(n, nullptr);
  onRanks(comms, [&](int r, chorusComm_t&) {
    chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    chorusComm_t c = nullptr;
    EXPECT_EQ(chorusCommInitRankConfig(&c, n, id, r, &cfg), chorusInProgress);
    ASSERT_NE(c, nullptr);
    chorusResult_t st = chorusInProgress;
    auto until = Clock::now() + std::chrono::seconds(30);
    while (st == chorusInProgress && Clock::now() < until) {
      ASSERT_EQ(chorusCommGetAsyncError(c, &st), chorusSuccess);
      std::this_thread::yield();
    }
    EXPECT_EQ(st, chorusSuccess);
    comms[static_cast<size_t>(r)] = c;
  });
  onRanks(comms, [&](int r, chorusComm_t c) {
    int v = r + 1, out = 0;
    EXPECT_EQ(chorusAllReduce(&v, &out, 1, chorusInt32, chorusSum, c, nullptr), chorusSuccess);
    EXPECT_EQ(out, 6);
    EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
  });
}

TEST(Lifecycle, AMissingPeerIsATimeoutThatNamesIt) {
  auto comms = initThreadRanks(2, 1);
  std::vector<float> buf(1000, 1.0f);
  auto t0 = Clock::now();
  // Rank 1 never calls: rank 0 must give up after ~1 s and say whom it waited for.
  chorusResult_t r = chorusAllReduce(buf.data(), buf.data(), buf.size(), chorusFloat32, chorusSum,
                                     comms[0], nullptr);
  auto secs = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r, chorusTimeout);
  EXPECT_LT(secs, 10.0);
  std::string detail = chorusGetLastError(comms[0]);
  EXPECT_NE(detail.find("all_reduce"), std::string::npos) << detail;
  EXPECT_NE(detail.find("rank 1"), std::string::npos) << detail;
  for (auto c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

TEST(Lifecycle, AbortFromAnotherThreadUnblocksACollective) {
  auto comms = initThreadRanks(2, 120);
  std::atomic<chorusResult_t> result{chorusSuccess};
  std::vector<float> buf(1 << 20, 1.0f);
  std::thread blocked([&] {
    result = chorusAllReduce(buf.data(), buf.data(), buf.size(), chorusFloat32, chorusSum, comms[0],
                             nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto t0 = Clock::now();
  EXPECT_EQ(chorusCommAbort(comms[0]), chorusSuccess);
  blocked.join();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
  EXPECT_EQ(result.load(), chorusAborted);
  EXPECT_EQ(chorusCommDestroy(comms[1]), chorusSuccess);
}

TEST(Lifecycle, MismatchedCountsAreReportedNotCorrupted) {
  auto comms = initThreadRanks(2, 5);
  // Sizes above the LL threshold so the ring's piece sizes disagree.
  std::vector<float> a(1 << 20, 1.0f), b(1 << 19, 1.0f);
  std::vector<float> guard(16, 7.0f);
  std::vector<chorusResult_t> res(2);
  onRanks(comms, [&](int r, chorusComm_t c) {
    auto& v = r == 0 ? a : b;
    res[static_cast<size_t>(r)] =
        chorusAllReduce(v.data(), v.data(), v.size(), chorusFloat32, chorusSum, c, nullptr);
  });
  EXPECT_TRUE(res[0] != chorusSuccess || res[1] != chorusSuccess);
  bool named = false;
  for (int r = 0; r < 2; ++r) {
    std::string d = chorusGetLastError(comms[static_cast<size_t>(r)]);
    if (d.find("different collectives") != std::string::npos) named = true;
  }
  EXPECT_TRUE(named);
  for (float g : guard) EXPECT_EQ(g, 7.0f);
  for (auto c : comms) chorusCommDestroy(c);
}

TEST(Lifecycle, SelfSendNeedsAGroupAndAMatchingReceive) {
  std::vector<chorusComm_t> comms(1);
  ASSERT_EQ(chorusCommInitAll(comms.data(), 1, nullptr), chorusSuccess);
  int x = 5, y = 0;
  EXPECT_EQ(chorusSend(&x, 1, chorusInt32, 0, comms[0], nullptr), chorusInvalidUsage);
  EXPECT_NE(std::string(chorusGetLastError(comms[0])).find("itself"), std::string::npos);
  ASSERT_EQ(chorusGroupStart(), chorusSuccess);
  EXPECT_EQ(chorusSend(&x, 1, chorusInt32, 0, comms[0], nullptr), chorusSuccess);
  EXPECT_EQ(chorusRecv(&y, 1, chorusInt32, 0, comms[0], nullptr), chorusSuccess);
  EXPECT_EQ(chorusGroupEnd(), chorusSuccess);
  EXPECT_EQ(y, 5);
  EXPECT_EQ(chorusGroupEnd(), chorusInvalidUsage);  // unbalanced
  chorusCommDestroy(comms[0]);
}

TEST(Lifecycle, SplitThenDestroyLeavesNothingBehind) {
  const int before = countChorusShm();
  const int n = 4;
  std::vector<chorusComm_t> comms(n);
  ASSERT_EQ(chorusCommInitAll(comms.data(), n, nullptr), chorusSuccess);
  EXPECT_EQ(countChorusShm(), before);  // names unlinked once everyone mapped them
  std::vector<chorusComm_t> subs(n, nullptr);
  onRanks(comms, [&](int r, chorusComm_t c) {
    int color = r == 3 ? CHORUS_SPLIT_NOCOLOR : r % 2;
    EXPECT_EQ(chorusCommSplit(c, color, -r, &subs[static_cast<size_t>(r)], nullptr), chorusSuccess);
  });
  EXPECT_EQ(subs[3], nullptr);
  int size = 0, rank = -1;
  ASSERT_EQ(chorusCommCount(subs[0], &size), chorusSuccess);
  EXPECT_EQ(size, 2);  // ranks 0 and 2
  ASSERT_EQ(chorusCommUserRank(subs[0], &rank), chorusSuccess);
  EXPECT_EQ(rank, 1);  // key -0 > key -2: rank 2 comes first
  onRanks(subs, [&](int r, chorusComm_t c) {
    if (!c) return;
    int v = r, out = -1;
    EXPECT_EQ(chorusAllReduce(&v, &out, 1, chorusInt32, chorusMax, c, nullptr), chorusSuccess);
    EXPECT_EQ(out, r % 2 == 0 ? 2 : 1);
  });
  for (auto c : subs) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
  for (auto c : comms) EXPECT_EQ(chorusCommFinalize(c), chorusSuccess);
  for (auto c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
  EXPECT_EQ(countChorusShm(), before);
}

TEST(Lifecycle, FinalizeWaitsForWorkQueuedOnStreams) {
  const int n = 3;
  std::vector<chorusComm_t> comms(n);
  ASSERT_EQ(chorusCommInitAll(comms.data(), n, nullptr), chorusSuccess);
  std::vector<std::vector<int>> out(n, std::vector<int>(1 << 16, -1));
  std::vector<std::vector<int>> in(n);
  std::vector<chorusStream_t> streams(n);
  onRanks(comms, [&](int r, chorusComm_t c) {
    in[static_cast<size_t>(r)].assign(1 << 16, r + 1);
    ASSERT_EQ(chorusStreamCreate(&streams[static_cast<size_t>(r)]), chorusSuccess);
    for (int k = 0; k < 4; ++k)
      ASSERT_EQ(
          chorusAllReduce(in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(),
                          1 << 16, chorusInt32, chorusSum, c, streams[static_cast<size_t>(r)]),
          chorusSuccess);
    // No stream synchronize: finalize must wait for the queued work itself.
    EXPECT_EQ(chorusCommFinalize(c), chorusSuccess);
    for (int v : out[static_cast<size_t>(r)]) ASSERT_EQ(v, 6);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(chorusStreamDestroy(streams[static_cast<size_t>(r)]), chorusSuccess);
    EXPECT_EQ(chorusCommDestroy(comms[static_cast<size_t>(r)]), chorusSuccess);
  }
}

}  // namespace
