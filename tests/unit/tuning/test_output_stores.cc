// test_output_stores.cc — the store policy of the user's output (src/tuning/output_stores.h)
// and choosePlan's use of it.
#include <gtest/gtest.h>

#include "src/tuning/output_stores.h"
#include "src/tuning/tuning.h"

namespace {

using chorus::Coll;
using chorus::streamingOutput;

constexpr size_t MiB = size_t{1} << 20;

TEST(OutputStores, ANumberDecidesEveryCall) {
  for (Coll c : {Coll::AllGather, Coll::AllToAll, Coll::AllReduce, Coll::Gather, Coll::Broadcast,
                 Coll::ReduceScatter}) {
    EXPECT_FALSE(streamingOutput(8 * MiB, 0, 2, c, 8 * MiB - 1, false));
    EXPECT_TRUE(streamingOutput(8 * MiB, 0, 2, c, 8 * MiB, false));
    EXPECT_TRUE(streamingOutput(8 * MiB, 0, 2, c, 8 * MiB, true));
    EXPECT_TRUE(streamingOutput(0, 0, 2, c, 1, false));  // CHORUS_NT_THRESHOLD=0: always
  }
}

// A 32 MiB last-level cache, two ranks: 16 MiB each.
TEST(OutputStores, TheCacheShareDecidesTheSymmetricCollectives) {
  const size_t share = 16 * MiB, nt = 8 * MiB;
  // All-gather: this rank's block in, the whole result out.
  EXPECT_FALSE(streamingOutput(nt, share, 2, Coll::AllGather, 8 * MiB, false));  // 12 MiB
  EXPECT_FALSE(streamingOutput(nt, share, 2, Coll::AllGather, 16 * MiB, true));  // 16 MiB
  EXPECT_TRUE(streamingOutput(nt, share, 2, Coll::AllGather, 16 * MiB, false));  // 24 MiB
  EXPECT_TRUE(streamingOutput(nt, share, 2, Coll::AllGather, 16 * MiB + 64, true));
  // All-to-all and all-reduce: input and output as large as the result.
  for (Coll c : {Coll::AllToAll, Coll::AllReduce}) {
    EXPECT_FALSE(streamingOutput(nt, share, 2, c, 8 * MiB, false));
    EXPECT_TRUE(streamingOutput(nt, share, 2, c, 8 * MiB + 64, false));
    EXPECT_FALSE(streamingOutput(nt, share, 2, c, 16 * MiB, true));
    EXPECT_TRUE(streamingOutput(nt, share, 2, c, 16 * MiB + 64, true));
  }
  // Gather: the root's output.
  EXPECT_FALSE(streamingOutput(nt, share, 2, Coll::Gather, 16 * MiB - 1, false));
  EXPECT_TRUE(streamingOutput(nt, share, 2, Coll::Gather, 16 * MiB, true));
  // The others keep the fixed threshold.
  for (Coll c : {Coll::Broadcast, Coll::Scatter, Coll::Reduce, Coll::ReduceScatter}) {
    EXPECT_FALSE(streamingOutput(nt, share, 2, c, 8 * MiB - 1, false));
    EXPECT_TRUE(streamingOutput(nt, share, 2, c, 8 * MiB, true));
  }
  // More ranks on the same cache: smaller shares (here 8 MiB each).
  EXPECT_FALSE(streamingOutput(nt, 8 * MiB, 4, Coll::AllReduce, 8 * MiB, true));
  EXPECT_TRUE(streamingOutput(nt, 8 * MiB, 4, Coll::AllReduce, 8 * MiB, false));
  EXPECT_TRUE(streamingOutput(nt, 8 * MiB, 4, Coll::AllGather, 8 * MiB, false));  // 10 MiB
}

// A broadcast root's own copy: ordinary stores up to the host's whole last-level cache.
TEST(OutputStores, BroadcastRootCopy) {
  using chorus::streamingRootCopy;
  EXPECT_FALSE(streamingRootCopy(8 * MiB, 16 * MiB, 2, 16 * MiB));
  EXPECT_FALSE(streamingRootCopy(8 * MiB, 16 * MiB, 2, 32 * MiB - 1));
  EXPECT_TRUE(streamingRootCopy(8 * MiB, 16 * MiB, 2, 32 * MiB));
  EXPECT_TRUE(streamingRootCopy(8 * MiB, 0, 2, 8 * MiB));  // a number, or between hosts
  EXPECT_FALSE(streamingRootCopy(8 * MiB, 0, 2, 8 * MiB - 1));
}

// choosePlan: the cache share only where shared memory joins every rank.
TEST(OutputStores, ChoosePlanUsesTheShareOnOneHostOnly) {
  chorus::PlanKnobs k;
  k.nranks = 2;
  k.slotBytes = 512 << 10;
  k.ntBytes = 8 * MiB;
  k.cacheShareBytes = 16 * MiB;
  k.llBytes = 16 << 10;
  k.allShm = true;
  chorus::ModelShape s;
  s.nranks = 2;
  s.maxLocalRanks = 2;
  s.ncpus = 2;
  const chorus::TuningTables t =
      chorus::buildTables(chorus::ModelParams{}, s, chorus::kDefaultAlgos, 3);
  EXPECT_FALSE(chorus::choosePlan(&t, k, Coll::AllGather, 8 * MiB).streaming);
  EXPECT_TRUE(chorus::choosePlan(&t, k, Coll::AllGather, 32 * MiB).streaming);
  EXPECT_TRUE(chorus::choosePlan(&t, k, Coll::Broadcast, 8 * MiB).streaming);
  EXPECT_FALSE(chorus::choosePlan(&t, k, Coll::Broadcast, 8 * MiB).rootCopyStreaming);
  EXPECT_TRUE(chorus::choosePlan(&t, k, Coll::Broadcast, 32 * MiB).rootCopyStreaming);
  k.allShm = false;  // calls between hosts: the fixed threshold
  EXPECT_TRUE(chorus::choosePlan(&t, k, Coll::AllGather, 8 * MiB).streaming);
  EXPECT_TRUE(chorus::choosePlan(&t, k, Coll::Broadcast, 8 * MiB).rootCopyStreaming);
}

}  // namespace
