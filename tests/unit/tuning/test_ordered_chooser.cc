// The rank-order schedule chooser (src/tuning/ordered_chooser.h) against made-up call
// times, with several ranks' choosers side by side as orderedRunChosen drives them (rank
// 0 decides and records; every rank applies the Decision and advances): every rank takes
// the same way at every call, whatever the other ranks' own figures; the size settles on
// the fastest way, tries the others rarely once settled (a bounded share of calls), follows
// a change of the fastest way, and keeps sizes apart.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <vector>

#include "src/tuning/ordered_chooser.h"

namespace {

using chorus::OrderedWayChooser;

struct Calls {
  std::vector<int> ways;  // rank 0's way at each call
  int syncs = 0;
};

// `ranks` choosers; `calls` calls of `bytes` over `nways` ways, the time of a call from
// cost(call, way) (ns) with +-5% noise on rank 0; the other ranks record their own
// (random) figures, which must not matter.
Calls drive(std::vector<OrderedWayChooser>& ch, size_t bytes, int nways, int calls,
            const std::function<double(int, int)>& cost, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(0.95, 1.05), junk(1e3, 1e6);
  Calls run;
  for (int c = 0; c < calls; ++c) {
    const bool due = ch[0].syncDue(bytes);
    for (size_t r = 1; r < ch.size(); ++r) EXPECT_EQ(ch[r].syncDue(bytes), due) << c;
    if (due) {
      ++run.syncs;
      const OrderedWayChooser::Decision d = ch[0].decide(bytes, nways);
      EXPECT_LT(d.best, static_cast<uint32_t>(nways));
      EXPECT_LT(d.tryWay, static_cast<uint32_t>(nways));
      if (nways > 1) {
        EXPECT_NE(d.best, d.tryWay);
      }
      for (OrderedWayChooser& x : ch) x.apply(bytes, d, nways);
    }
    const int w = ch[0].way(bytes);
    for (size_t r = 1; r < ch.size(); ++r) EXPECT_EQ(ch[r].way(bytes), w) << "call " << c;
    run.ways.push_back(w);
    ch[0].record(bytes, w, cost(c, w) * noise(rng));
    for (size_t r = 1; r < ch.size(); ++r) ch[r].record(bytes, w, junk(rng));
    for (OrderedWayChooser& x : ch) x.advance(bytes, nways);
  }
  return run;
}

}  // namespace

TEST(OrderedWayChooser, EveryRankTakesTheDecidersWayAndSettlesOnTheFastest) {
  std::vector<OrderedWayChooser> ch(4);
  const double cost[5] = {300e3, 180e3, 100e3, 250e3, 400e3};  // way 2 the fastest
  const Calls run = drive(ch, 256 << 10, 5, 3000, [&](int, int w) { return cost[w]; });
  // The first calls try each way, kBlock calls each, in order.
  const int k = static_cast<int>(OrderedWayChooser::kBlock);
  for (int c = 0; c < 5 * k; ++c) EXPECT_EQ(run.ways[static_cast<size_t>(c)], c / k) << c;
  int other = 0;
  for (size_t c = 5 * k; c < run.ways.size(); ++c) other += run.ways[c] != 2;
  // Settled: a try of kBlock calls per interval (32, 64, ... up to 512 calls).
  EXPECT_LT(other, 45 * k) << "tries of the slower ways in about 3000 calls";
  EXPECT_EQ(run.ways.back(), 2);
  EXPECT_TRUE(ch[3].decided(256 << 10));
  EXPECT_FALSE(ch[3].decided(64 << 10)) << "another size learns on its own";
}

TEST(OrderedWayChooser, FollowsAChangeOfTheFastestWay) {
  std::vector<OrderedWayChooser> ch(2);
  // Way 0 the fastest for 1000 calls, then way 2 by far.
  auto cost = [](int c, int w) {
    if (c < 1000) return w == 0 ? 100e3 : 200e3;
    return w == 2 ? 50e3 : 200e3;
  };
  const Calls run = drive(ch, 64 << 10, 3, 3000, cost);
  EXPECT_EQ(run.ways[999], 0);
  EXPECT_EQ(run.ways.back(), 2);
  // Found within the longest interval and a round of tries (2 other ways).
  int firstAfter = -1;
  for (size_t c = 1000; c < run.ways.size(); ++c)
    if (run.ways[c] == 2 && run.ways[c + 1] == 2 && run.ways[c + 2] == 2) {
      firstAfter = static_cast<int>(c);
      break;
    }
  ASSERT_GE(firstAfter, 0);
  EXPECT_LT(firstAfter - 1000, 2 * static_cast<int>(OrderedWayChooser::kMaxInterval) + 10);
}

TEST(OrderedWayChooser, OneWayNeverSyncs) {
  std::vector<OrderedWayChooser> ch(2);
  const Calls run = drive(ch, 32 << 10, 1, 100, [](int, int) { return 1e3; });
  // One exploration block, then a Decision; then no tries (nothing to try).
  EXPECT_EQ(run.syncs, 1);
  for (int w : run.ways) EXPECT_EQ(w, 0);
}
