// test_standin_coll.cc — whole collectives through the rdma transport, over the STAND-IN
// verbs (in-memory queue pairs between thread ranks; see transports/rdma/verbs_standin.h).
//
// This binary links standin_registry.cc as its transport table, so every pair of thread
// ranks connects through RdmaTransport (the same code libchorus runs over libibverbs):
//   * Matrix/np{2,3,4}: every collective (coll_check's cases: all types and ops, sizes
//     0/1/7/1023 and 100003 elements, in/out-of-place, every root; plus 4 Mi + 3 float32
//     all-reduce and all-to-all) against an independent reference. The port's largest
//     write is 64 KiB, so each 512 KiB slot goes in 8 chunked writes.
//   * RegCache*: the same with a registration cache bound of 1 byte, and with a device
//     that refuses registrations past 4 per rank: send buffers are deregistered and
//     registered again while results stay exact.
//   * ErrorCompletion*: one write completes with "transport retry counter exceeded"; the
//     rank that posted it returns chorusRemoteError naming the peer, promptly; ranks still
//     waiting are aborted as an application would, and nothing hangs.
#include <gtest/gtest.h>

#include <chorus.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/coll/coll_check.h"
#include "transports/rdma/verbs_standin.h"

using namespace collcheck;
namespace standin = chorus::rdma::standin;

namespace {

class Env : public ::testing::Environment {
 public:
  void SetUp() override {
    standin::Config c;
    c.maxMsgBytes = 64 << 10;
    standin::Fabric::instance().configure(c);
  }
};
const ::testing::Environment* const kEnv = ::testing::AddGlobalTestEnvironment(new Env);

std::vector<chorusComm_t> initComms(int n) {
  std::vector<chorusComm_t> comms(size_t(n), nullptr);
  const chorusResult_t r = chorusCommInitAll(comms.data(), n, nullptr);
  EXPECT_EQ(r, chorusSuccess) << chorusGetLastError(nullptr);
  if (r != chorusSuccess) comms.clear();
  return comms;
}

void destroyComms(std::vector<chorusComm_t>& comms) {
  for (chorusComm_t c : comms)
    if (c) {
      EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
    }
  comms.clear();
}

// Runs each collective's cases on every rank (one thread each); returns failure text.
std::string runColls(const std::vector<chorusComm_t>& comms, const std::vector<Coll>& colls,
                     const MatrixOptions& opts) {
  const int n = int(comms.size());
  std::string out;
  for (Coll coll : colls) {
    const std::vector<Case> cases = buildCases(coll, n, opts);
    std::vector<RunStats> stats(static_cast<size_t>(n));
    std::vector<std::thread> th;
    for (int r = 0; r < n; ++r)
      th.emplace_back([&, r] { stats[size_t(r)] = runCases(cases, comms[size_t(r)], 3); });
    for (auto& t : th) t.join();
    for (int r = 0; r < n; ++r) {
      const RunStats& s = stats[size_t(r)];
      if (s.cases == 0 && !cases.empty()) out += std::string(collName(coll)) + ": no case ran\n";
      if (s.failed || s.stopped)
        for (const std::string& m : s.messages) out += m + "\n";
    }
  }
  return out;
}

MatrixOptions smallAndMid() {
  MatrixOptions o;
  o.big = BigMode::None;
  return o;
}

class Matrix : public ::testing::TestWithParam<int> {};

TEST_P(Matrix, EveryCollective) {
  const int n = GetParam();
  const standin::Stats before = standin::Fabric::instance().stats();
  std::vector<chorusComm_t> comms = initComms(n);
  ASSERT_EQ(int(comms.size()), n);
  // One receive FIFO registered per ordered pair: every pair went through the rdma transport.
  EXPECT_EQ(standin::Fabric::instance().stats().remoteRegs - before.remoteRegs,
            uint64_t(n * (n - 1)));
  EXPECT_EQ(runColls(comms, kAllColls, smallAndMid()), "");
  // Large messages: many slots, each in chunked writes, credits cycling many times.
  MatrixOptions big;
  big.types = {chorusFloat32};
  big.ops = {Op::Sum};
  big.sizes = {(size_t(4) << 20) + 3};
  big.midSizes = {};
  big.big = BigMode::None;
  big.nanCases = false;
  EXPECT_EQ(runColls(comms, {Coll::AllReduce, Coll::AllToAll}, big), "");
  const standin::Stats after = standin::Fabric::instance().stats();
  EXPECT_GT(after.writes, before.writes);
  EXPECT_GT(after.bytes - before.bytes, uint64_t(16) << 20);
  EXPECT_EQ(after.errorCompletions, before.errorCompletions);
  destroyComms(comms);
}

INSTANTIATE_TEST_SUITE_P(Standin, Matrix, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "np" + std::to_string(i.param);
                         });

// A registration cache bound of 1 byte: each staging buffer registration evicts every
// idle one first, so buffers are deregistered and registered again all the time.
TEST(RegCache, EvictionUnderByteBound) {
  standin::TransportKnobs k;
  k.regCacheBytes = 1;
  standin::Fabric::instance().setKnobs(k);
  const standin::Stats before = standin::Fabric::instance().stats();
  std::vector<chorusComm_t> comms = initComms(4);
  ASSERT_EQ(comms.size(), 4u);
  MatrixOptions o = smallAndMid();
  o.types = {chorusFloat32, chorusInt8, chorusFloat16};
  EXPECT_EQ(runColls(comms, {Coll::AllToAll, Coll::AllReduce, Coll::SendRecv}, o), "");
  const standin::Stats after = standin::Fabric::instance().stats();
  EXPECT_GT(after.localDeregs - before.localDeregs, 10u) << "no eviction happened";
  EXPECT_GT(after.localRegs - before.localRegs, after.localDeregs - before.localDeregs - 1);
  destroyComms(comms);
  standin::Fabric::instance().setKnobs({});
}

// The device refuses a 5th registration per rank (3 receive FIFOs + 1 send buffer fit):
// the cache answers ENOMEM by evicting an idle buffer and registering again.
TEST(RegCache, EvictionWhenTheDeviceRefuses) {
  standin::Config c = standin::Fabric::instance().config();
  const standin::Config saved = c;
  c.maxMrs = 4;
  standin::Fabric::instance().configure(c);
  const standin::Stats before = standin::Fabric::instance().stats();
  std::vector<chorusComm_t> comms = initComms(4);
  ASSERT_EQ(comms.size(), 4u);
  MatrixOptions o = smallAndMid();
  o.types = {chorusFloat64, chorusUint8};
  EXPECT_EQ(runColls(comms, {Coll::AllToAll, Coll::AllGather}, o), "");
  const standin::Stats after = standin::Fabric::instance().stats();
  EXPECT_GT(after.refusedRegs, before.refusedRegs);
  EXPECT_GT(after.localDeregs, before.localDeregs);
  destroyComms(comms);
  standin::Fabric::instance().configure(saved);
}

// One write fails with IBV_WC_RETRY_EXC_ERR (12) after `afterWrites` good ones.
void errorCompletion(int n, uint64_t afterWrites) {
  std::vector<chorusComm_t> comms = initComms(n);
  ASSERT_EQ(int(comms.size()), n);
  const size_t count = 64 << 10;  // 256 KiB of float32 per call
  struct Rank {
    std::mutex mu;
    bool done = false, aborted = false;
    chorusResult_t res = chorusSuccess;
    std::string msg;
    int calls = 0;
    std::chrono::steady_clock::time_point end;
  };
  std::vector<Rank> ranks(static_cast<size_t>(n));
  standin::Fabric::instance().injectWriteError(afterWrites, 12);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      Rank& me = ranks[size_t(r)];
      std::vector<float> in(count), out(count);
      chorusResult_t res = chorusSuccess;
      std::string msg;
      int it = 0;
      for (; it < 200 && res == chorusSuccess; ++it) {
        for (size_t i = 0; i < count; ++i) in[i] = float((r + 1) * (i % 7 + it % 3));
        res = chorusAllReduce(in.data(), out.data(), count, chorusFloat32, chorusSum,
                              comms[size_t(r)], nullptr);
        if (res != chorusSuccess) {
          msg = chorusGetLastError(nullptr);  // this thread's detail: never the comm
          break;
        }
        for (size_t i = 0; i < count; ++i)
          if (out[i] != float(n * (n + 1) / 2 * (i % 7 + it % 3))) {
            res = chorusInternalError;
            msg = "wrong result at call " + std::to_string(it) + " element " + std::to_string(i);
            break;
          }
      }
      std::lock_guard<std::mutex> lock(me.mu);
      me.done = true;
      me.res = res;
      me.msg = msg;
      me.calls = it;
      me.end = std::chrono::steady_clock::now();
    });
  // Watchdog: once one rank has failed, give the others 3 s to notice on their own, then
  // abort those still waiting (what an application does after an error).
  const auto start = std::chrono::steady_clock::now();
  auto firstError = std::chrono::steady_clock::time_point::max();
  for (;;) {
    int done = 0;
    for (Rank& rk : ranks) {
      std::lock_guard<std::mutex> lock(rk.mu);
      if (rk.done) {
        ++done;
        if (rk.res != chorusSuccess && rk.end < firstError) firstError = rk.end;
      }
    }
    if (done == n) break;
    const auto now = std::chrono::steady_clock::now();
    // Hung: say so, then abort every rank so the threads end and the test reports (an
    // ASSERT here would leave them running and std::terminate the binary).
    const bool hung = now - start > std::chrono::seconds(25);
    if (hung && firstError == std::chrono::steady_clock::time_point::max()) {
      ADD_FAILURE() << "ranks hang: none failed in 25 s (a lost write must fail some wait)";
      firstError = now - std::chrono::seconds(4);
    }
    if (firstError != std::chrono::steady_clock::time_point::max() &&
        now - firstError > std::chrono::seconds(3)) {
      for (int r = 0; r < n; ++r) {
        Rank& rk = ranks[size_t(r)];
        std::lock_guard<std::mutex> lock(rk.mu);  // the rank cannot finish mid-abort
        if (!rk.done && !rk.aborted) {
          chorusCommAbort(comms[size_t(r)]);
          rk.aborted = true;
          comms[size_t(r)] = nullptr;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& t : th) t.join();
  int remote = 0;
  for (int r = 0; r < n; ++r) {
    const Rank& rk = ranks[size_t(r)];
    EXPECT_NE(rk.res, chorusInternalError) << "rank " << r << ": " << rk.msg;
    if (rk.aborted) continue;
    EXPECT_NE(rk.res, chorusSuccess) << "rank " << r << " finished all calls";
    if (rk.res != chorusRemoteError) continue;
    // Names another rank, and says what the completion said.
    bool namesPeer = false;
    for (int p = 0; p < n; ++p)
      if (p != r && rk.msg.find("rank " + std::to_string(p) + " (standin0") != std::string::npos)
        namesPeer = true;
    EXPECT_TRUE(namesPeer) << rk.msg;
    if (rk.msg.find("transport retry counter exceeded") != std::string::npos) ++remote;
    std::printf("rank %d after %d calls: %s\n", r, rk.calls, rk.msg.c_str());
  }
  EXPECT_GE(remote, 1) << "no rank reported the error completion";
  EXPECT_GE(standin::Fabric::instance().stats().errorCompletions, 1u);
  destroyComms(comms);
}

TEST(ErrorCompletion, TwoRanks) { errorCompletion(2, 300); }
TEST(ErrorCompletion, ThreeRanks) { errorCompletion(3, 500); }

}  // namespace
