// Unit tests of the trainer's torch-free pieces: the distributed sampler, the bucket plan,
// the IDX reader, the option parser and the parallel layout.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/bucket_plan.h"
#include "trainer/idx.h"
#include "trainer/layout.h"
#include "trainer/options.h"
#include "trainer/ps_plan.h"
#include "trainer/sampler.h"

namespace trainer {
namespace {

TEST(Sampler, ShardsCoverEverySampleAndArePaddedEvenly) {
  for (int world : {1, 2, 3, 4, 7}) {
    const int64_t n = 1001;
    std::multiset<int64_t> seen;
    size_t perRank = 0;
    for (int r = 0; r < world; ++r) {
      DistributedSampler s(n, r, world, true, 42);
      s.setEpoch(3);
      auto idx = s.indices();
      if (r == 0) perRank = idx.size();
      EXPECT_EQ(idx.size(), perRank) << "rank " << r;
      EXPECT_EQ(int64_t(idx.size()), (n + world - 1) / world);
      seen.insert(idx.begin(), idx.end());
    }
    std::set<int64_t> distinct(seen.begin(), seen.end());
    EXPECT_EQ(int64_t(distinct.size()), n) << "world " << world;
    EXPECT_EQ(*distinct.begin(), 0);
    EXPECT_EQ(*distinct.rbegin(), n - 1);
    EXPECT_EQ(int64_t(seen.size()) - n, int64_t(perRank) * world - n);  // the padding only
  }
}

TEST(Sampler, FirstBatchesOfAllRanksAreTheSingleRankBatch) {
  // The property the equivalence tests rely on: 2 ranks x 32 == 1 rank x 64, per step.
  const int64_t n = 3200;
  DistributedSampler one(n, 0, 1, true, 7);
  auto all = one.indices();
  std::vector<std::vector<int64_t>> ranks;
  for (int r = 0; r < 2; ++r) ranks.push_back(DistributedSampler(n, r, 2, true, 7).indices());
  for (int step = 0; step < 50; ++step) {
    std::multiset<int64_t> a(all.begin() + step * 64, all.begin() + (step + 1) * 64);
    std::multiset<int64_t> b;
    for (auto& idx : ranks) b.insert(idx.begin() + step * 32, idx.begin() + (step + 1) * 32);
    ASSERT_EQ(a, b) << "step " << step;
  }
}

TEST(Sampler, ReshufflesPerEpochAndNotWithoutShuffle) {
  DistributedSampler s(100, 0, 1, true, 1);
  auto e0 = s.indices();
  s.setEpoch(1);
  auto e1 = s.indices();
  EXPECT_NE(e0, e1);
  s.setEpoch(0);
  EXPECT_EQ(s.indices(), e0);  // deterministic: a resumed run gets the same order
  DistributedSampler plain(10, 1, 3, false, 1);
  EXPECT_EQ(plain.indices(), (std::vector<int64_t>{1, 4, 7, 0}));  // wraps to pad
  EXPECT_THROW(DistributedSampler(10, 3, 3, true, 1), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(0, 0, 1, true, 1), std::invalid_argument);
}

TEST(BucketPlan, ClosesBucketsAtTheirCaps) {
  // Sizes in ready order; first cap 10, then 25.
  auto plan = planBuckets({4, 4, 4, 30, 5, 5, 20, 1}, 10, 25);
  std::vector<std::vector<size_t>> want = {{0, 1, 2}, {3}, {4, 5, 6}, {7}};
  EXPECT_EQ(plan, want);
  EXPECT_EQ(planBuckets({}, 10, 25).size(), 0u);
  EXPECT_EQ(planBuckets({1, 1, 1}, 1 << 20, 1 << 20).size(), 1u);
}

std::string writeGz(const std::string& name, const std::vector<unsigned char>& bytes) {
  std::string path = ::testing::TempDir() + name;
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
  return path;
}

TEST(Idx, ReadsImagesAndRejectsBadFiles) {
  std::vector<unsigned char> images = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3};
  for (int i = 0; i < 12; ++i) images.push_back(static_cast<unsigned char>(i));
  IdxArray a = readIdx(writeGz("img.gz", images), 3);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(a.data.size(), 12u);
  EXPECT_EQ(a.data[11], 11);
  // --train-limit: only the first items are read, the same bytes as the whole file's.
  IdxArray first = readIdx(writeGz("img1.gz", images), 3, 1);
  EXPECT_EQ(first.dims, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(first.data, std::vector<uint8_t>(a.data.begin(), a.data.begin() + 6));
  EXPECT_EQ(readIdx(writeGz("img5.gz", images), 3, 5).dims, a.dims);         // a limit past the end
  EXPECT_THROW(readIdx(writeGz("img2.gz", images), 1), std::runtime_error);  // wrong rank
  images.resize(images.size() - 1);
  EXPECT_THROW(readIdx(writeGz("short.gz", images), 3), std::runtime_error);  // truncated
  std::vector<unsigned char> floats = {0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0};
  EXPECT_THROW(readIdx(writeGz("float.gz", floats), 1), std::runtime_error);  // not ubyte
  EXPECT_THROW(readIdx(::testing::TempDir() + "does-not-exist.gz", 1), std::runtime_error);
}

TEST(Options, ParsesAndRejects) {
  Options o;
  const char* ok[] = {"chorus-train", "--model",     "mlp", "--accum",       "4",
                      "--sync-bn",    "--bucket-mb", "0.5", "--dump-params", "d.%r"};
  ASSERT_TRUE(parseOptions(10, const_cast<char**>(ok), &o));
  EXPECT_EQ(o.model, "mlp");
  EXPECT_EQ(o.accum, 4);
  EXPECT_TRUE(o.syncBn);
  EXPECT_DOUBLE_EQ(o.bucketMb, 0.5);
  EXPECT_EQ(perRankPath(o.dumpParams, 3), "d.3");
  EXPECT_EQ(perRankPath("plain", 0), "plain");
  EXPECT_EQ(perRankPath("plain", 1), "");
  for (auto bad : std::vector<std::vector<const char*>>{{"x", "--model", "resnet"},
                                                        {"x", "--batch", "0"},
                                                        {"x", "--lr", "abc"},
                                                        {"x", "--epochs"},
                                                        {"x", "--frobnicate"}}) {
    Options p;
    EXPECT_THROW(parseOptions(int(bad.size()), const_cast<char**>(bad.data()), &p),
                 std::invalid_argument)
        << bad[1];
  }
}

TEST(Options, ParsesTheParallelLayout) {
  Options o;
  const char* ok[] = {"x",     "--pipeline-stages", "4", "--micro-batches", "8", "--schedule",
                      "gpipe", "--tensor-parallel", "2"};
  ASSERT_TRUE(parseOptions(9, const_cast<char**>(ok), &o));
  EXPECT_EQ(o.pipelineStages, 4);
  EXPECT_EQ(o.microBatches, 8);
  EXPECT_EQ(o.schedule, "gpipe");
  EXPECT_EQ(o.tensorParallel, 2);
  for (auto bad : std::vector<std::vector<const char*>>{{"x", "--schedule", "zigzag"},
                                                        {"x", "--pipeline-stages", "0"},
                                                        {"x", "--micro-batches", "3"},
                                                        {"x", "--tensor-parallel", "-1"}}) {
    Options p;
    EXPECT_THROW(parseOptions(int(bad.size()), const_cast<char**>(bad.data()), &p),
                 std::invalid_argument)
        << bad[1];
  }
}

TEST(Layout, CoordinatesCoverEveryCombinationOnce) {
  const int pp = 2, tp = 3, world = 12;
  std::set<std::vector<int>> seen;
  for (int r = 0; r < world; ++r) {
    Layout l = makeLayout(world, r, pp, tp);
    EXPECT_EQ(l.dp, 2);
    EXPECT_EQ((l.dpRank * pp + l.stage) * tp + l.tpRank, r);
    seen.insert({l.dpRank, l.stage, l.tpRank});
  }
  EXPECT_EQ(seen.size(), size_t(world));
  EXPECT_TRUE(makeLayout(4, 0, 1, 1).pureDataParallel());
  EXPECT_THROW(makeLayout(6, 0, 4, 1), std::invalid_argument);
  EXPECT_THROW(makeLayout(4, 0, 2, 3), std::invalid_argument);
}

TEST(Layout, SplitStagesMinimizesTheLargestStage) {
  // The MLP's layers by parameter count: 784x256+256, 256x128+128, 128x10+10.
  EXPECT_EQ(splitStages({200960, 32896, 1290}, 2), (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(splitStages({200960, 32896, 1290}, 3), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(splitStages({1, 1, 1, 1}, 2), (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(splitStages({5, 1, 1, 1, 1, 1}, 2), (std::vector<size_t>{0, 1, 6}));
  EXPECT_EQ(splitStages({7}, 1), (std::vector<size_t>{0, 1}));
  // Every stage gets a layer even when that is not cheapest.
  EXPECT_EQ(splitStages({0, 0, 100}, 3), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_THROW(splitStages({1, 2, 3}, 4), std::invalid_argument);
}

// The parameter-server plan: every element of every tensor on exactly one server, in
// buffer order; the big tensor split by rows over all servers, the small ones whole.
TEST(PsPlan, CoversEveryElementOnceAndSplitsLargeTensorsByRows) {
  const std::vector<PsTensor> mlp = {{"1.weight", 256, 784}, {"1.bias", 256, 1},
                                     {"3.weight", 128, 256}, {"3.bias", 128, 1},
                                     {"5.weight", 10, 128},  {"5.bias", 10, 1}};
  for (int k = 1; k <= 5; ++k) {
    PsPlan plan = makePsPlan(mlp, k);
    std::vector<std::vector<int>> seen(mlp.size());
    for (size_t t = 0; t < mlp.size(); ++t) seen[t].assign(size_t(mlp[t].rows), 0);
    std::vector<int64_t> next(size_t(k), 0);
    for (const PsShard& s : plan.shards) {
      for (int64_t r = s.rowBegin; r < s.rowEnd; ++r) ++seen[s.tensor][size_t(r)];
      EXPECT_EQ(s.count, (s.rowEnd - s.rowBegin) * mlp[s.tensor].rowSize);
      EXPECT_EQ(s.serverOffset, next[size_t(s.server)]) << "buffer order, k " << k;
      next[size_t(s.server)] += s.count;
    }
    for (const auto& rows : seen)
      for (int c : rows) EXPECT_EQ(c, 1) << "k " << k;
    for (int j = 0; j < k; ++j) EXPECT_EQ(next[size_t(j)], plan.serverElements[size_t(j)]);
    // 1.weight (200,704 of 235,146 elements) is split over all servers when k > 1.
    size_t pieces = 0;
    for (const PsShard& s : plan.shards) pieces += s.tensor == 0;
    EXPECT_EQ(pieces, size_t(k));
  }
  PsPlan two = makePsPlan(mlp, 2);
  EXPECT_EQ(two.serverElements[0], 133120);
  EXPECT_EQ(two.serverElements[1], 102026);
  EXPECT_THROW(makePsPlan(mlp, 0), std::invalid_argument);
}

TEST(Options, ParsesAndRejectsParameterServerFlags) {
  Options o;
  const char* ok[] = {"x", "--ps-servers", "2", "--ps-mode", "ssp", "--staleness", "3"};
  ASSERT_TRUE(parseOptions(7, const_cast<char**>(ok), &o));
  EXPECT_TRUE(o.ps);
  EXPECT_EQ(o.psServers, 2);
  EXPECT_EQ(o.psMode, "ssp");
  EXPECT_EQ(o.staleness, 3);
  for (auto bad : std::vector<std::vector<const char*>>{
           {"x", "--ps-servers", "0"},
           {"x", "--ps-mode", "gossip"},
           {"x", "--staleness", "-1"},
           {"x", "--ps-colocated", "--ps-mode", "async"},
           {"x", "--ps-colocated", "--ps-servers", "1"},
           {"x", "--model", "hashed"},
           {"x", "--ps-servers", "1", "--checkpoint", "c"},
           {"x", "--ps-servers", "1", "--pipeline-stages", "2"}}) {
    Options p;
    EXPECT_THROW(parseOptions(int(bad.size()), const_cast<char**>(bad.data()), &p),
                 std::invalid_argument)
        << bad[1];
  }
}

}  // namespace
}  // namespace trainer
