// test_plan_strict.cc — a forced algorithm that cannot run a call: with CHORUS_ALGO_STRICT=1
// the call fails on every rank with chorusInvalidUsage and a message naming the restriction,
// and the communicator goes on working; without it the default plan runs the call and the
// plan says it fell back (src/api/test_hooks.h). Three thread ranks; run with
// CHORUS_ALGO=tree (the tree runs all-reduce only).
#include <chorus.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "src/api/test_hooks.h"

namespace {

constexpr int kRanks = 3;

bool strict() {
  const char* s = std::getenv("CHORUS_ALGO_STRICT");
  return s != nullptr && std::string(s) == "1";
}

template <class F>
void onEveryRank(std::vector<chorusComm_t>& comms, F f) {
  std::vector<std::thread> th;
  for (int r = 0; r < kRanks; ++r) th.emplace_back([&, r] { f(r, comms[static_cast<size_t>(r)]); });
  for (auto& t : th) t.join();
}

TEST(PlanStrict, ForcedTreeRunsTreeAndFailsOrFallsBackElsewhere) {
  const char* algo = std::getenv("CHORUS_ALGO");
  ASSERT_TRUE(algo != nullptr && std::string(algo) == "tree") << "run with CHORUS_ALGO=tree";
  std::vector<chorusComm_t> comms(kRanks);
  ASSERT_EQ(chorusCommInitAll(comms.data(), kRanks, nullptr), chorusSuccess);
  const size_t count = 4096;
  onEveryRank(comms, [&](int r, chorusComm_t c) {
    std::vector<float> in(count, float(r + 1)), out(count, 0);
    // All-reduce: the tree runs it, strict or not.
    ASSERT_EQ(chorusAllReduce(in.data(), out.data(), count, chorusFloat32, chorusSum, c, nullptr),
              chorusSuccess);
    EXPECT_EQ(out[count - 1], 6.0f);
    chorusTestPlanRecord rec{};
    ASSERT_EQ(chorusTestLastPlan(c, &rec), chorusSuccess);
    EXPECT_STREQ(rec.ranAlgo, "tree");
    EXPECT_EQ(rec.planFallback, 0);
    // Broadcast has no tree.
    std::vector<float> buf(count, r == 1 ? 7.0f : 0.0f);
    const chorusResult_t res =
        chorusBroadcast(buf.data(), buf.data(), count, chorusFloat32, 1, c, nullptr);
    ASSERT_EQ(chorusTestLastPlan(c, &rec), chorusSuccess);
    EXPECT_STREQ(rec.coll, "broadcast");
    EXPECT_EQ(rec.planFallback, 1);
    if (strict()) {
      EXPECT_EQ(res, chorusInvalidUsage);
      const std::string why = chorusGetLastError(c);
      EXPECT_NE(why.find("CHORUS_ALGO=tree"), std::string::npos) << why;
      EXPECT_NE(why.find("CHORUS_ALGO_STRICT"), std::string::npos) << why;
      EXPECT_EQ(rec.ran, 0) << "nothing may run a call that failed its plan";
    } else {
      EXPECT_EQ(res, chorusSuccess);
      EXPECT_EQ(buf[0], 7.0f);
      EXPECT_EQ(rec.ran, 1);
    }
    // The communicator still works: the ranks failed (or ran) the call alike.
    ASSERT_EQ(chorusAllReduce(in.data(), out.data(), count, chorusFloat32, chorusSum, c, nullptr),
              chorusSuccess);
    EXPECT_EQ(out[0], 6.0f);
  });
  for (chorusComm_t c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

}  // namespace
