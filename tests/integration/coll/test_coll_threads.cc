// test_coll_threads.cc — every collective with ranks as threads of one process
// (chorusCommInitAll + one std::thread per rank), checked by coll_check.
//
// Coverage, per nranks in {1, 2, 3, 4, 5, 8} (one test per (nranks, collective), the
// communicators of a test are reused by all its cases):
//   * reducing collectives (all_reduce, reduce, reduce_scatter): all 10 types (the 7 of the
//     acceptance matrix plus uint8/uint32/uint64) x 6 ops (sum, prod, max, min, avg,
//     premulsum with scalar 2) x sizes {0, 1, 7, 1023} x {out-of-place, in-place}; reduce
//     rotates the root with the case index (every root for every (type, op)).
//     100003 elements: every type once, op rotating.
//     1 Mi + 3 (BigMode::Subset, rotation 0): 7 cases per (collective, nranks), one per
//     acceptance type, op = ops[(typeIndex + k) % 6] with k the index of nranks in
//     {1,2,3,4,5,8}, so across the six rank counts each (type, op) pair runs once at
//     1 Mi + 3 here, in-place for int32/float16/float32 and out-of-place for the others;
//     the process suite (rotation 1) runs each pair once more with the other in-place
//     choice. Plus NaN propagation: float types x 6 ops at 1023 elements.
//   * broadcast, scatter, gather: all 10 types x {0, 1, 7, 1023} x {out, in-place} x every
//     root; all_gather, all_to_all: all types x sizes x {out, in-place}; 100003: every type
//     once. 1 Mi + 3: two cases per (collective, nranks) (types (2k)%7 out-of-place and
//     (2k+1)%7 in-place; the process suite swaps them).
//   * send_recv: all types x sizes x {ring in a group, ring without a group (n >= 2),
//     pairwise with every peer + self in one group, self only, two messages to the same
//     peer in one group}; 100003: every type once; 1 Mi + 3: ring and pairwise.
//   * barrier: 3 timed barriers (one rank enters 150 ms late; the others must wait) + 20.
//   Set COLL_BIG=none|subset|all to change the 1 Mi + 3 coverage (default subset; "all"
//   runs every (type, op, in-place) at 1 Mi + 3 and is much slower).
//   meson also runs (tests/integration/coll/meson.build): the all_reduce/broadcast/
//   all_gather tests with CHORUS_ALGO=ring and all_reduce with CHORUS_ALGO=tree (the
//   default tuning sends small messages direct/LL and never picks the tree); the whole
//   matrix (without 1 Mi + 3) with 4 KiB FIFO slots; and, for nranks = 2, the reducing
//   collectives with COLL_BIG=all: every (type, op, in-place) at 1 Mi + 3.
// Plus, per nranks: one thread driving all n communicators inside one
// chorusGroupStart/End (every collective), chorusCommSplit, and host streams.
#include <gtest/gtest.h>

#include <chorus.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/integration/coll/coll_check.h"

using namespace collcheck;

namespace {

const std::vector<int> kNranks = {1, 2, 3, 4, 5, 8};

// n communicators from chorusCommInitAll, destroyed at the end of the test.
class Comms {
 public:
  explicit Comms(int n) : comms_(size_t(n), nullptr) {
    res_ = chorusCommInitAll(comms_.data(), n, nullptr);
  }
  ~Comms() {
    if (res_ != chorusSuccess) return;
    for (chorusComm_t c : comms_)
      if (c) {
        chorusResult_t r = chorusCommDestroy(c);
        EXPECT_EQ(r, chorusSuccess) << "chorusCommDestroy: " << chorusGetLastError(c);
      }
  }
  chorusResult_t result() const { return res_; }
  chorusComm_t operator[](int i) const { return comms_[size_t(i)]; }
  int size() const { return int(comms_.size()); }

 private:
  std::vector<chorusComm_t> comms_;
  chorusResult_t res_;
};

#define ASSERT_COMMS(comms)                                                                        \
  ASSERT_EQ((comms).result(), chorusSuccess)                                                       \
      << "chorusCommInitAll(" << (comms).size() << "): " << chorusGetErrorString((comms).result()) \
      << " / " << chorusGetLastError(nullptr)

// Runs fn(rank) on one thread per rank and joins them.
void onRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> th;
  th.reserve(size_t(n));
  for (int r = 0; r < n; ++r) th.emplace_back(fn, r);
  for (auto& t : th) t.join();
}

BigMode bigModeFromEnv() {
  const char* e = std::getenv("COLL_BIG");
  if (!e || !*e || std::strcmp(e, "subset") == 0) return BigMode::Subset;
  if (std::strcmp(e, "none") == 0) return BigMode::None;
  if (std::strcmp(e, "all") == 0) return BigMode::All;
  ADD_FAILURE() << "COLL_BIG must be none, subset or all, not '" << e << "'";
  return BigMode::Subset;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// The checker's own float conversions (no library involved): if these are wrong, every
// float16/bfloat16 failure below is suspect.
// ---------------------------------------------------------------------------------------

TEST(CollCheckSelfTest, HalfConversions) {
  EXPECT_EQ(doubleToHalf(0.0), 0x0000);
  EXPECT_EQ(doubleToHalf(-0.0), 0x8000);
  EXPECT_EQ(doubleToHalf(1.0), 0x3C00);
  EXPECT_EQ(doubleToHalf(-2.0), 0xC000);
  EXPECT_EQ(doubleToHalf(65504.0), 0x7BFF);
  EXPECT_EQ(doubleToHalf(65519.99), 0x7BFF);
  EXPECT_EQ(doubleToHalf(65520.0), 0x7C00);  // ties to even -> overflow to inf
  EXPECT_EQ(doubleToHalf(1e9), 0x7C00);
  EXPECT_EQ(doubleToHalf(-HUGE_VAL), 0xFC00);
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -24)), 0x0001);            // smallest subnormal
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -25)), 0x0000);            // tie -> even (0)
  EXPECT_EQ(doubleToHalf(std::ldexp(3.0, -25)), 0x0002);            // 1.5 ulp -> 2 (even)
  EXPECT_EQ(doubleToHalf(std::ldexp(3.0, -26)), 0x0001);            // 0.75 ulp -> 1
  EXPECT_EQ(doubleToHalf(std::ldexp(1023.0, -24)), 0x03FF);         // largest subnormal
  EXPECT_EQ(doubleToHalf(std::ldexp(1.0, -14)), 0x0400);            // smallest normal
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(1.0, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(doubleToHalf(1.0 + 3 * std::ldexp(1.0, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(doubleToHalf(1.0 + std::ldexp(1.0, -11) + 1e-12), 0x3C01);
  EXPECT_EQ(doubleToHalf(2047.0 + 0.5), 0x6800);  // 2048: carry into next binade
  EXPECT_EQ(doubleToHalf(1.0 / 3.0), 0x3555);
  const uint16_t nanh = doubleToHalf(std::nan(""));
  EXPECT_EQ(nanh & 0x7C00, 0x7C00);
  EXPECT_NE(nanh & 0x03FF, 0);
  for (uint32_t h = 0; h < 0x10000; ++h) {  // round trip of every finite half
    const double d = halfToDouble(uint16_t(h));
    if (std::isnan(d)) continue;
    ASSERT_EQ(doubleToHalf(d), h) << std::hex << h;
  }
  EXPECT_EQ(halfToDouble(0x3555), 0.333251953125);
  EXPECT_EQ(halfToDouble(0x0001), std::ldexp(1.0, -24));
}

TEST(CollCheckSelfTest, Bf16Conversions) {
  EXPECT_EQ(doubleToBf16(1.0), 0x3F80);
  EXPECT_EQ(doubleToBf16(3.0), 0x4040);
  EXPECT_EQ(doubleToBf16(-0.5), 0xBF00);
  EXPECT_EQ(doubleToBf16(256.0), 0x4380);
  EXPECT_EQ(doubleToBf16(257.0), 0x4380);  // tie -> even
  EXPECT_EQ(doubleToBf16(259.0), 0x4382);  // tie -> even (up)
  EXPECT_EQ(doubleToBf16(1.0 / 3.0), 0x3EAB);
  EXPECT_EQ(doubleToBf16(3.4e38), 0x7F80);  // above max bf16 (3.3895e38) rounds to inf
  EXPECT_EQ(doubleToBf16(std::ldexp(1.0, -133)), 0x0001);  // smallest subnormal
  // Must round from double directly, not double -> float -> bf16 (double rounding):
  // 1 + 2^-8 + 2^-30 is just above the bf16 tie, so it rounds up; through float the 2^-30
  // is lost, 1 + 2^-8 is an exact tie and would round to even (1.0).
  EXPECT_EQ(doubleToBf16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30)), 0x3F81);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const double d = bf16ToDouble(uint16_t(h));
    if (std::isnan(d)) continue;
    ASSERT_EQ(doubleToBf16(d), h) << std::hex << h;
  }
}

TEST(CollCheckSelfTest, CaseListsAreNonEmptyAndCoverTheBigSubset) {
  // In each suite (rotation 0: threads, 1: processes), over the six rank counts, every
  // (matrix type, op) pair appears exactly once at 1 Mi + 3; the two suites together run it
  // once in-place and once out-of-place.
  for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter}) {
    std::vector<int> seen(kMatrixTypes.size() * kAllOps.size() * 2, 0);
    for (int rot : {0, 1}) {
      std::vector<int> once(kMatrixTypes.size() * kAllOps.size(), 0);
      for (int n : kNranks) {
        MatrixOptions o;
        o.rotation = rot;
        for (const Case& c : buildCases(coll, n, o)) {
          if (c.count != kBigCount) continue;
          const size_t ti = size_t(std::find(kMatrixTypes.begin(), kMatrixTypes.end(), c.type) -
                                   kMatrixTypes.begin());
          ASSERT_LT(ti, kMatrixTypes.size());
          once[ti * kAllOps.size() + size_t(c.op)]++;
          seen[(ti * kAllOps.size() + size_t(c.op)) * 2 + (c.inplace ? 1 : 0)]++;
        }
      }
      for (size_t i = 0; i < once.size(); ++i)
        EXPECT_EQ(once[i], 1) << collName(coll) << " rotation " << rot << " "
                              << typeName(kMatrixTypes[i / 6]) << " " << opName(kAllOps[i % 6]);
    }
    for (size_t i = 0; i < seen.size(); ++i)
      EXPECT_EQ(seen[i], 1) << collName(coll) << " " << typeName(kMatrixTypes[i / 12]) << " "
                            << opName(kAllOps[(i / 2) % 6])
                            << (i % 2 ? " in-place" : " out-of-place");
  }
  for (Coll coll : {Coll::Broadcast, Coll::AllGather, Coll::AllToAll, Coll::Scatter, Coll::Gather,
                    Coll::SendRecv}) {
    for (int rot : {0, 1}) {
      std::vector<int> seen(kMatrixTypes.size(), 0);
      MatrixOptions o;
      o.rotation = rot;
      for (int n : kNranks)
        for (const Case& c : buildCases(coll, n, o))
          if (c.count == kBigCount)
            seen[size_t(std::find(kMatrixTypes.begin(), kMatrixTypes.end(), c.type) -
                        kMatrixTypes.begin())]++;
      for (size_t i = 0; i < seen.size(); ++i)
        EXPECT_GE(seen[i], 1) << collName(coll) << " rotation " << rot << " never runs "
                              << typeName(kMatrixTypes[i]) << " at 1 Mi + 3";
    }
  }
  for (Coll coll : kAllColls)
    for (int n : kNranks) EXPECT_FALSE(buildCases(coll, n, MatrixOptions{}).empty());
}

// ---------------------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------------------

class CollThreads : public ::testing::TestWithParam<std::tuple<int, Coll>> {};

TEST_P(CollThreads, Matrix) {
  const int n = std::get<0>(GetParam());
  const Coll coll = std::get<1>(GetParam());
  MatrixOptions opts;
  opts.big = bigModeFromEnv();
  const std::vector<Case> cases = buildCases(coll, n, opts);
  ASSERT_FALSE(cases.empty());

  Comms comms(n);
  ASSERT_COMMS(comms);
  for (int r = 0; r < n; ++r) {
    int cnt = -1, rk = -1;
    ASSERT_EQ(chorusCommCount(comms[r], &cnt), chorusSuccess);
    ASSERT_EQ(chorusCommUserRank(comms[r], &rk), chorusSuccess);
    ASSERT_EQ(cnt, n);
    ASSERT_EQ(rk, r) << "chorusCommInitAll: comms[i] must be rank i";
  }

  std::vector<RunStats> stats(static_cast<size_t>(n));
  onRanks(n, [&](int r) { stats[size_t(r)] = runCases(cases, comms[r], 20); });

  size_t failed = 0;
  double slowest = 0;
  for (int r = 0; r < n; ++r) {
    const RunStats& st = stats[size_t(r)];
    failed += st.failed;
    slowest = std::max(slowest, st.seconds);
    for (const std::string& m : st.messages) ADD_FAILURE() << m;
    EXPECT_FALSE(st.stopped) << "rank " << r << " stopped at a call error";
    EXPECT_EQ(st.cases, st.stopped ? st.cases : cases.size());
  }
  EXPECT_EQ(failed, 0u) << failed << " failing (case, rank) pairs out of " << cases.size()
                        << " cases x " << n << " ranks";
  std::printf("[ coverage ] %s nranks=%d: %zu cases in %.2f s\n", collName(coll), n, cases.size(),
              slowest);
}

std::string paramName(const ::testing::TestParamInfo<std::tuple<int, Coll>>& info) {
  return "np" + std::to_string(std::get<0>(info.param)) + "_" + collName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(All, CollThreads,
                         ::testing::Combine(::testing::ValuesIn(kNranks),
                                            ::testing::ValuesIn(kAllColls)),
                         paramName);

// ---------------------------------------------------------------------------------------
// Per-nranks extras
// ---------------------------------------------------------------------------------------

class CollThreadsN : public ::testing::TestWithParam<int> {};

// One thread drives all n communicators: every rank's call is recorded between one
// chorusGroupStart/End and runs at the outermost End.
TEST_P(CollThreadsN, SingleThreadGroup) {
  const int n = GetParam();
  Comms comms(n);
  ASSERT_COMMS(comms);
  std::vector<std::vector<Case>> batches;  // each batch: cases launched in one group, per comm
  uint32_t seed = 1;
  for (Coll coll : kAllColls) {
    for (chorusDataType_t t : {chorusFloat32, chorusInt8, chorusBfloat16})
      for (size_t count : {size_t(0), size_t(1023)})
        for (bool ip : {false, true}) {
          Case c;
          c.coll = coll;
          c.type = t;
          c.count = count;
          c.inplace = ip;
          c.root = n - 1;
          c.seed = seed++;
          if (coll == Coll::Barrier && (t != chorusFloat32 || count || ip)) continue;
          if (coll == Coll::SendRecv) {
            if (ip) continue;
            for (int v = 0; v < int(P2P::kCount); ++v) {
              if (P2P(v) == P2P::RingUngrouped && n == 1) continue;
              c.p2p = P2P(v);
              c.seed = seed++;
              batches.push_back({c});
            }
            continue;
          }
          if (isReducing(coll)) {
            for (Op op : {Op::Sum, Op::Avg, Op::PreMulSum}) {
              c.op = op;
              c.seed = seed++;
              batches.push_back({c});
            }
            continue;
          }
          batches.push_back({c});
        }
  }
  // Several collectives per communicator inside one group.
  {
    Case a;
    a.coll = Coll::AllReduce;
    a.type = chorusFloat32;
    a.op = Op::Sum;
    a.count = 4099;
    a.seed = seed++;
    Case b;
    b.coll = Coll::AllGather;
    b.type = chorusInt32;
    b.count = 33;
    b.seed = seed++;
    Case c;
    c.coll = Coll::Broadcast;
    c.type = chorusInt8;
    c.count = 100;
    c.root = 0;
    c.seed = seed++;
    Case d;
    d.coll = Coll::SendRecv;
    d.type = chorusFloat64;
    d.count = 17;
    d.p2p = P2P::Pairwise;
    d.seed = seed++;
    batches.push_back({a, b, c, d});
  }

  size_t failures = 0;
  for (const auto& batch : batches) {
    std::vector<std::unique_ptr<CaseRun>> runs;
    bool setup = true;
    for (const Case& c : batch)
      for (int r = 0; r < n; ++r) {
        runs.emplace_back(new CaseRun(c, comms[r]));
        std::string e;
        if (!runs.back()->prepare(&e)) {
          ADD_FAILURE() << e;
          setup = false;
        }
      }
    ASSERT_TRUE(setup);
    ASSERT_EQ(chorusGroupStart(), chorusSuccess) << chorusGetLastError(nullptr);
    std::vector<chorusResult_t> res;
    for (auto& run : runs) res.push_back(run->launch(nullptr));
    const chorusResult_t end = chorusGroupEnd();
    for (size_t i = 0; i < runs.size(); ++i)
      ASSERT_EQ(res[i], chorusSuccess)
          << runs[i]->header()
          << " recording the call inside a group: " << chorusGetErrorString(res[i]) << " / "
          << chorusGetLastError(comms[runs[i]->rank()]);
    ASSERT_EQ(end, chorusSuccess) << describe(batch[0])
                                  << ": chorusGroupEnd: " << chorusGetErrorString(end) << " / "
                                  << chorusGetLastError(nullptr);
    for (auto& run : runs) {
      std::string e;
      if (!run->verify(&e)) {
        if (++failures <= 20) ADD_FAILURE() << "(one thread, one group) " << e;
      }
    }
  }
  EXPECT_EQ(failures, 0u);
}

TEST_P(CollThreadsN, Split) {
  const int n = GetParam();
  Comms comms(n);
  ASSERT_COMMS(comms);
  std::vector<std::string> errs(static_cast<size_t>(n));
  std::vector<int> ok(static_cast<size_t>(n), 0);
  onRanks(n, [&](int r) { ok[size_t(r)] = runSplitCheck(comms[r], &errs[size_t(r)]); });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(ok[size_t(r)]) << errs[size_t(r)];
}

TEST_P(CollThreadsN, HostStream) {
  const int n = GetParam();
  Comms comms(n);
  ASSERT_COMMS(comms);
  std::vector<std::string> errs(static_cast<size_t>(n));
  std::vector<int> ok(static_cast<size_t>(n), 0);
  onRanks(n, [&](int r) { ok[size_t(r)] = runStreamCheck(comms[r], &errs[size_t(r)]); });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(ok[size_t(r)]) << errs[size_t(r)];
}

// A thread-rank barrier must not let anybody out before everybody is in.
TEST_P(CollThreadsN, BarrierOrdersThreads) {
  const int n = GetParam();
  Comms comms(n);
  ASSERT_COMMS(comms);
  constexpr int kRounds = 50;
  std::vector<std::atomic<int>> arrived(kRounds);
  for (auto& a : arrived) a = 0;
  std::atomic<int> violations{0}, errors{0};
  onRanks(n, [&](int r) {
    for (int k = 0; k < kRounds; ++k) {
      if ((k + r) % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      arrived[size_t(k)].fetch_add(1);
      chorusResult_t res = chorusBarrier(comms[r], nullptr);
      if (res != chorusSuccess) {
        errors++;
        return;
      }
      if (arrived[size_t(k)].load() != n) violations++;
    }
  });
  EXPECT_EQ(errors.load(), 0) << "chorusBarrier returned an error";
  EXPECT_EQ(violations.load(), 0) << "a rank left a barrier before every rank had entered it";
}

// chorusRecvAnySource: rank 0 takes kMsgs messages from every other rank in whatever order
// they arrive; each must come from the rank it reports, in that sender's order, intact.
TEST_P(CollThreadsN, RecvAnySource) {
  const int n = GetParam();
  Comms comms(n);
  ASSERT_COMMS(comms);
  if (n == 1) {  // nobody to receive from: refused, not a wait until the deadline
    float x = 0;
    int from = 0;
    EXPECT_EQ(chorusRecvAnySource(&x, 1, chorusFloat32, &from, comms[0], nullptr),
              chorusInvalidUsage);
    return;
  }
  constexpr int kMsgs = 20;
  constexpr size_t kCount = 3000;
  auto value = [](int from, int msg, size_t i) {
    return float(from * 100000 + msg * 1000) + float(i % 997);
  };
  std::vector<std::string> errs(static_cast<size_t>(n));
  onRanks(n, [&](int r) {
    std::string& e = errs[size_t(r)];
    std::vector<float> buf(kCount);
    if (r != 0) {
      for (int m = 0; m < kMsgs; ++m) {
        for (size_t i = 0; i < kCount; ++i) buf[i] = value(r, m, i);
        if (chorusSend(buf.data(), kCount, chorusFloat32, 0, comms[r], nullptr) != chorusSuccess) {
          e = std::string("send: ") + chorusGetLastError(comms[r]);
          return;
        }
      }
      return;
    }
    std::vector<int> next(static_cast<size_t>(n), 0);
    for (int k = 0; k < kMsgs * (n - 1); ++k) {
      int from = -1;
      if (chorusRecvAnySource(buf.data(), kCount, chorusFloat32, &from, comms[0], nullptr) !=
          chorusSuccess) {
        e = std::string("receive ") + std::to_string(k) + ": " + chorusGetLastError(comms[0]);
        return;
      }
      if (from < 1 || from >= n) {
        e = "receive " + std::to_string(k) + " reported peer " + std::to_string(from);
        return;
      }
      const int m = next[size_t(from)]++;
      for (size_t i = 0; i < kCount; ++i)
        if (buf[i] != value(from, m, i)) {
          e = "message " + std::to_string(m) + " from rank " + std::to_string(from) +
              " differs at element " + std::to_string(i);
          return;
        }
    }
    for (int p = 1; p < n; ++p)
      if (next[size_t(p)] != kMsgs)
        e = "rank " + std::to_string(p) + " delivered " + std::to_string(next[size_t(p)]) +
            " messages";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errs[size_t(r)], "") << "rank " << r;

  // Bad uses are refused before anything is sent or matched.
  float x = 0;
  int from = 0;
  EXPECT_EQ(chorusRecvAnySource(&x, 1, chorusFloat32, nullptr, comms[0], nullptr),
            chorusInvalidArgument);
  EXPECT_EQ(chorusRecvAnySource(&x, 0, chorusFloat32, &from, comms[0], nullptr),
            chorusInvalidArgument);
  EXPECT_NE(std::string(chorusGetLastError(comms[0])).find("count is 0"), std::string::npos);
  ASSERT_EQ(chorusGroupStart(), chorusSuccess);
  EXPECT_EQ(chorusRecvAnySource(&x, 1, chorusFloat32, &from, comms[0], nullptr),
            chorusInvalidUsage);
  EXPECT_NE(std::string(chorusGetLastError(comms[0])).find("chorusGroupStart"), std::string::npos);
  ASSERT_EQ(chorusGroupEnd(), chorusSuccess);
}

std::string nName(const ::testing::TestParamInfo<int>& info) {
  return "np" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(All, CollThreadsN, ::testing::ValuesIn(kNranks), nName);

// Own main: a --gtest_filter that selects nothing must fail, not pass as an empty run.
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (::testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    std::fprintf(stderr, "test_coll_threads: the filter selected no test\n");
    return 1;
  }
  return rc;
}
