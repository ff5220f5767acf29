// test_cache_pieces.cc — a same-host broadcast's pieces from the core's L2
// (src/tuning/cache_pieces.h) and choosePlan's use of them.
#include <gtest/gtest.h>

#include "src/tuning/cache_pieces.h"
#include "src/tuning/tuning.h"

namespace {

using chorus::broadcastPieceCap;
using chorus::Coll;

constexpr size_t KiB = size_t{1} << 10, MiB = size_t{1} << 20;

TEST(CachePieces, AQuarterOfTheL2) {
  EXPECT_EQ(broadcastPieceCap(1 * MiB), 256 * KiB);     // AMD Zen 4 / Zen 5, Xeon to Cascade Lake
  EXPECT_EQ(broadcastPieceCap(2 * MiB), 512 * KiB);     // Xeon from Sapphire Rapids
  EXPECT_EQ(broadcastPieceCap(1280 * KiB), 320 * KiB);  // Xeon Ice Lake
  EXPECT_EQ(broadcastPieceCap(1000003), 249984u);       // 64-byte aligned
  EXPECT_EQ(broadcastPieceCap(256 * KiB), 64 * KiB);    // the floor
  EXPECT_EQ(broadcastPieceCap(0), ~size_t{0});          // unknown: no cap
}

chorus::PlanKnobs twoRanksOneHost(size_t l2) {
  chorus::PlanKnobs k;
  k.nranks = 2;
  k.slotBytes = 512 * KiB;
  k.ntBytes = 8 * MiB;
  k.llBytes = 16 * KiB;
  k.allShm = true;
  k.l2Bytes = l2;
  return k;
}

chorus::TuningTables tables(int nranks) {
  chorus::ModelShape s;
  s.nranks = nranks;
  s.maxLocalRanks = nranks;
  s.ncpus = nranks;
  return chorus::buildTables(chorus::ModelParams{}, s, chorus::kDefaultAlgos, 3);
}

TEST(CachePieces, TwoRanksOnOneHostBroadcastInL2SizedPieces) {
  const chorus::TuningTables t = tables(2);
  chorus::PlanKnobs k = twoRanksOneHost(1 * MiB);
  const chorus::Plan p = chorus::choosePlan(&t, k, Coll::Broadcast, 4 * MiB);
  ASSERT_EQ(p.algo, chorus::Algo::Ring);
  EXPECT_EQ(p.pieceBytes, 256 * KiB);
  EXPECT_EQ(chorus::choosePlan(&t, k, Coll::Broadcast, 128 * MiB).pieceBytes, 256 * KiB);
  // Smaller calls already run in smaller pieces (a quarter of the share).
  EXPECT_EQ(chorus::choosePlan(&t, k, Coll::Broadcast, 1 * MiB).pieceBytes, 128 * KiB);
  // A 2 MiB L2 keeps the slot-sized pieces; so does an unknown one.
  k.l2Bytes = 2 * MiB;
  EXPECT_EQ(chorus::choosePlan(&t, k, Coll::Broadcast, 4 * MiB).pieceBytes, 512 * KiB);
  k.l2Bytes = 0;
  EXPECT_EQ(chorus::choosePlan(&t, k, Coll::Broadcast, 4 * MiB).pieceBytes, 512 * KiB);
}

TEST(CachePieces, OnlyTheTwoRankSameHostBroadcast) {
  chorus::PlanKnobs k = twoRanksOneHost(1 * MiB);
  const chorus::TuningTables t2 = tables(2);
  // Other collectives keep their pieces.
  EXPECT_EQ(chorus::choosePlan(&t2, k, Coll::Gather, 4 * MiB).pieceBytes, 512 * KiB);
  EXPECT_EQ(chorus::choosePlan(&t2, k, Coll::Scatter, 4 * MiB).pieceBytes, 512 * KiB);
  // Between hosts.
  k.allShm = false;
  EXPECT_EQ(chorus::choosePlan(&t2, k, Coll::Broadcast, 4 * MiB).pieceBytes, 512 * KiB);
  // Longer chains (not measured).
  k = twoRanksOneHost(1 * MiB);
  k.nranks = 4;
  const chorus::TuningTables t4 = tables(4);
  const chorus::Plan p = chorus::choosePlan(&t4, k, Coll::Broadcast, 8 * MiB);
  if (p.algo == chorus::Algo::Ring) EXPECT_EQ(p.pieceBytes, 512 * KiB);
}

}  // namespace
