// The cost model as pure functions (no processes): which algorithm it picks for a
// communicator shape, how CHORUS_ALGO / CHORUS_PROTO restrict it, the tuning file, and that
// the precomputed thresholds agree with the model everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <utility>

#include "src/comm/comm.h"
#include "src/tuning/tuning.h"

namespace {

using chorus::Algo;
using chorus::Coll;
using chorus::ModelParams;
using chorus::ModelShape;

constexpr unsigned kAll = 7;  // the default set: recursive doubling is opt-in
constexpr unsigned D = 1u << static_cast<int>(Algo::Direct);
constexpr unsigned R = 1u << static_cast<int>(Algo::Ring);
constexpr unsigned T = 1u << static_cast<int>(Algo::Tree);
constexpr unsigned RD = 1u << static_cast<int>(Algo::Doubling);
constexpr unsigned RH = 1u << static_cast<int>(Algo::Halving);
constexpr unsigned LL = 1u << static_cast<int>(chorus::Proto::LL);
constexpr unsigned SIMPLE = 1u << static_cast<int>(chorus::Proto::Simple);

ModelShape shmShape(int n, int ncpus = 2) {
  ModelShape s;
  s.nranks = n;
  s.nhosts = 1;
  s.maxLocalRanks = n;
  s.ncpus = ncpus;
  return s;
}

// Four ranks crowding 2 CPUs on one host, with 512 KiB slots and board buffers, the LL path
// to 16 KiB and single copy from 8 KiB: the knobs the crowded-host plan tests start from.
chorus::PlanKnobs crowdedFourRanks() {
  chorus::PlanKnobs k;
  k.nranks = 4;
  k.slotBytes = 512 << 10;
  k.boardBytes = 512 << 10;
  k.allShm = true;
  k.llBytes = 16 << 10;
  k.singleCopyBytes = 8 << 10;
  k.crowded = true;
  return k;
}

ModelShape tcpHosts(int hosts, int perHost) {
  ModelShape s;
  s.nranks = hosts * perHost;
  s.nhosts = hosts;
  s.maxLocalRanks = perHost;
  s.ncpus = 2;
  s.tcpHops = true;
  s.allTcp = perHost == 1;
  return s;
}

Algo best(const ModelShape& s, size_t bytes, unsigned am = kAll, unsigned pm = 3,
          Coll c = Coll::AllReduce) {
  return chorus::bestAlgo(ModelParams{}, s, c, bytes, am, pm);
}

TEST(TuningParse, AlgoSpec) {
  EXPECT_EQ(chorus::parseAlgoMask(""), kAll);
  EXPECT_EQ(chorus::parseAlgoMask("ring"), R);
  EXPECT_EQ(chorus::parseAlgoMask("TREE"), T);
  EXPECT_EQ(chorus::parseAlgoMask("direct"), D);
  EXPECT_EQ(chorus::parseAlgoMask("ring,tree"), R | T);
  EXPECT_EQ(chorus::parseAlgoMask(" ring , direct "), R | D);
  EXPECT_EQ(chorus::parseAlgoMask("^tree"), D | R);
  EXPECT_EQ(chorus::parseAlgoMask("^tree,direct"), R);
  EXPECT_EQ(chorus::parseAlgoMask("^Ring"), D | T);
  EXPECT_EQ(chorus::parseAlgoMask("doubling"), RD);  // opt-in: only when named
  EXPECT_EQ(chorus::parseAlgoMask("direct,Doubling"), D | RD);
  std::string bad;
  EXPECT_EQ(chorus::parseAlgoMask("bogus", &bad), kAll);  // nothing known: no restriction
  EXPECT_EQ(bad, "bogus");
  bad.clear();
  EXPECT_EQ(chorus::parseAlgoMask("ring,nvls", &bad), R);
  EXPECT_EQ(bad, "nvls");
}

TEST(TuningParse, ProtoSpec) {
  EXPECT_EQ(chorus::parseProtoMask(""), LL | SIMPLE);
  EXPECT_EQ(chorus::parseProtoMask("LL"), LL);
  EXPECT_EQ(chorus::parseProtoMask("Simple"), SIMPLE);
  EXPECT_EQ(chorus::parseProtoMask("^LL"), SIMPLE);
  EXPECT_EQ(chorus::parseProtoMask("^simple"), LL);
}

TEST(TuningModel, ShmPicksDirectForTinyAndRingForLarge) {
  // np 2 and 4 on 2 cores (measured), 3 and 8 with a core each.
  for (auto nc : {std::pair<int, int>{2, 2}, {4, 2}, {3, 4}, {8, 8}}) {
    const int n = nc.first;
    const ModelShape s = shmShape(n, nc.second);
    EXPECT_EQ(best(s, 8), Algo::Direct) << n;
    EXPECT_EQ(best(s, 1024), Algo::Direct) << n;
    EXPECT_EQ(best(s, 64 << 20), Algo::Ring) << n;
    EXPECT_EQ(best(s, 256 << 20), Algo::Ring) << n;
    // Never direct beyond what the LL path carries.
    EXPECT_NE(best(s, s.llBytes + 1), Algo::Direct) << n;
  }
}

TEST(TuningModel, CrowdedCoresPickDirectOverTreeUpToTheLlLimit) {
  // np 8 on 2 CPUs (measured, 8 B-4 KiB: direct 30-50 us, tree 145-275, ring 145-165):
  // every step that waits for one peer waits for its turn on a core. The model used to
  // pick the tree up to 3.5 KiB and the ring above.
  const ModelShape s = shmShape(8, 2);
  for (size_t b : {size_t{8}, size_t{512}, size_t{4096}, size_t{16} << 10})
    EXPECT_EQ(best(s, b), Algo::Direct) << b;
  EXPECT_EQ(best(s, 64 << 10), Algo::Ring);
  EXPECT_EQ(best(s, 1 << 20), Algo::Ring);
  // Recursive doubling only when named, and only where the LL path carries the message.
  EXPECT_EQ(best(s, 8, RD), Algo::Doubling);
  EXPECT_NE(best(s, 1 << 20, RD), Algo::Doubling);
  EXPECT_NE(best(shmShape(8, 8), 8), Algo::Doubling);
  EXPECT_GT(chorus::predictUs(ModelParams{}, s, Coll::AllReduce, Algo::Doubling, 8),
            chorus::predictUs(ModelParams{}, s, Coll::AllReduce, Algo::Direct, 8));
}

TEST(TuningModel, TcpPicksDirectForTinyAndRingForLarge) {
  for (int hosts : {2, 4}) {
    for (int per : {1, 2}) {
      const ModelShape s = tcpHosts(hosts, per);
      EXPECT_EQ(best(s, 8), Algo::Direct) << hosts << "x" << per;
      EXPECT_EQ(best(s, 256 << 20), Algo::Ring) << hosts << "x" << per;
    }
  }
}

TEST(TuningModel, TcpTreeCorrectionFollowsTheMeasurement) {
  // docs/PERF.md "Tuning over tcp after the second pass", 2 namespaced hosts: the ring beat
  // the tree at every size from 32 KiB (the tree took 1.37-1.85x its time), so the
  // corrected model never picks the tree there; the factors were fitted so that it does not.
  const ModelShape tcp = tcpHosts(2, 1);
  for (size_t b = size_t{32} << 10; b <= size_t{256} << 20; b *= 2)
    EXPECT_EQ(best(tcp, b), Algo::Ring) << b;
  // Only every-hop-tcp communicators are corrected: shared memory keeps the ring.
  EXPECT_EQ(best(shmShape(2), 256 << 10), Algo::Ring);
  // Factor 1 everywhere gives back the plain model, which prefers the ring there.
  ModelParams plain;
  for (double& f : plain.tcpTreeCorrection) f = 1.0;
  EXPECT_EQ(chorus::bestAlgo(plain, tcp, Coll::AllReduce, 256 << 10, kAll, 3), Algo::Ring);
  // The factor scales the tree's time and nothing else, interpolated between powers of two.
  const ModelParams p;
  const double raw = chorus::predictUs(plain, tcp, Coll::AllReduce, Algo::Tree, 128 << 10);
  EXPECT_NEAR(chorus::predictUs(p, tcp, Coll::AllReduce, Algo::Tree, 128 << 10),
              raw * p.tcpTreeCorrection[3], 1e-9);
  EXPECT_DOUBLE_EQ(chorus::predictUs(p, tcp, Coll::AllReduce, Algo::Ring, 128 << 10),
                   chorus::predictUs(plain, tcp, Coll::AllReduce, Algo::Ring, 128 << 10));
  const size_t mid = static_cast<size_t>(std::ldexp(1.0, 17) * std::sqrt(2.0));  // 2^17.5
  const double rawMid = chorus::predictUs(plain, tcp, Coll::AllReduce, Algo::Tree, mid);
  EXPECT_NEAR(chorus::predictUs(p, tcp, Coll::AllReduce, Algo::Tree, mid) / rawMid,
              (p.tcpTreeCorrection[3] + p.tcpTreeCorrection[4]) / 2, 1e-4);
}

// Namespaced hosts of one machine: 4 x 1 and 2 x 2 on one kernel with 2 CPUs (docs/PERF.md
// "Ranks that share a kernel"; perf/data/tcp_crowd.csv).
ModelShape crowdedTcpHosts(int hosts, int perHost) {
  ModelShape s = tcpHosts(hosts, perHost);
  s.kernelRanksPerCpu = hosts * perHost / 2.0;
  return s;
}

TEST(TuningModel, SharedKernelPicksDoublingThenRingOrHalving) {
  // Measured there with one tcp socket per peer (perf/data/tcp_crowd.csv, docs/PERF.md
  // "third stop: tcp mid sizes" and "fourth stop: tcp crowd"): recursive doubling fastest up
  // to 4 KiB in both shapes; halving from 32 KiB in both, on 4 x 1 (every hop tcp) to 4 MiB
  // and the ring above, on 2 x 2 (shm inside the hosts: it keeps the larger halves inside
  // a host) at every larger size.
  const ModelShape s41 = crowdedTcpHosts(4, 1), s22 = crowdedTcpHosts(2, 2);
  for (const ModelShape& s : {s41, s22}) {
    ASSERT_TRUE(chorus::crowdedTcp(s));
    const unsigned def = chorus::defaultAlgos(s);
    EXPECT_EQ(def, kAll | RD | RH);
    for (size_t b : {size_t{8}, size_t{256}, size_t{4} << 10})
      EXPECT_EQ(best(s, b, def), Algo::Doubling) << s.nhosts << "x" << s.maxLocalRanks << " " << b;
    // "^halving" starts from the shape's defaults: doubling stays.
    const unsigned noHalving = chorus::parseAlgoMask("^halving", nullptr, def);
    EXPECT_EQ(noHalving, D | R | T | RD);
  }
  // 4 x 1 (every rank its host's only one: plain doubling, up to CHORUS_LL_THRESHOLD):
  // halving from 32 KiB to 4 MiB, the ring from 8 MiB. 2 x 2: doubling between the host
  // leaders up to kLeadersMaxBytes (measured 1.3-2.6x faster than halving at 32-128 KiB,
  // docs/PERF.md "fifth stop: leaders"), then halving at every size (also above 16 MiB,
  // times tcp_crowd_halving_large there).
  EXPECT_FALSE(chorus::leadersDoubling(s41));
  EXPECT_TRUE(chorus::leadersDoubling(s22));
  EXPECT_EQ(chorus::doublingMaxBytes(s41), s41.llBytes);
  EXPECT_EQ(chorus::doublingMaxBytes(s22), chorus::kLeadersMaxBytes);
  for (size_t b = size_t{32} << 10; b <= (size_t{4} << 20); b *= 2)
    EXPECT_EQ(best(s41, b, chorus::defaultAlgos(s41)), Algo::Halving) << b;
  for (size_t b = size_t{8} << 20; b <= (size_t{256} << 20); b *= 2)
    EXPECT_EQ(best(s41, b, chorus::defaultAlgos(s41)), Algo::Ring) << b;
  for (size_t b = size_t{32} << 10; b <= chorus::kLeadersMaxBytes; b *= 2)
    EXPECT_EQ(best(s22, b, chorus::defaultAlgos(s22)), Algo::Doubling) << b;
  for (size_t b = chorus::kLeadersMaxBytes * 2; b <= (size_t{256} << 20); b *= 2)
    EXPECT_EQ(best(s22, b, chorus::defaultAlgos(s22)), Algo::Halving) << b;
  EXPECT_LT(chorus::predictUs(ModelParams{}, s22, Coll::AllReduce, Algo::Doubling, 8), 20.0);
  EXPECT_LT(chorus::predictUs(ModelParams{}, s22, Coll::AllReduce, Algo::Doubling, 8),
            chorus::predictUs(ModelParams{}, s41, Coll::AllReduce, Algo::Doubling, 8));
  ModelParams one;
  one.tcpCrowdHalvingLarge = 1;
  EXPECT_NEAR(chorus::predictUs(ModelParams{}, s22, Coll::AllReduce, Algo::Halving, 64 << 20) /
                  chorus::predictUs(one, s22, Coll::AllReduce, Algo::Halving, 64 << 20),
              1.5, 1e-9);
  EXPECT_DOUBLE_EQ(chorus::predictUs(ModelParams{}, s22, Coll::AllReduce, Algo::Halving, 16 << 20),
                   chorus::predictUs(one, s22, Coll::AllReduce, Algo::Halving, 16 << 20));
  // Negative controls: the same shapes with a CPU per rank keep the plain choice (no
  // doubling in the defaults, direct then ring), and so does one crowded host without tcp.
  for (const ModelShape& s : {tcpHosts(4, 1), tcpHosts(2, 2), tcpHosts(2, 1)}) {
    EXPECT_FALSE(chorus::crowdedTcp(s));
    EXPECT_EQ(chorus::defaultAlgos(s), kAll);
    EXPECT_EQ(best(s, 8, chorus::defaultAlgos(s)), Algo::Direct);
  }
  EXPECT_FALSE(chorus::crowdedTcp(shmShape(8)));
  EXPECT_EQ(chorus::defaultAlgos(shmShape(8)), kAll);
}

TEST(TuningModel, SharedKernelTcpMovesWholeShares) {
  // One piece per rank's share (capped by the slot) where ranks crowd a kernel over tcp; a
  // quarter share elsewhere.
  const ModelShape s = crowdedTcpHosts(4, 1);
  EXPECT_EQ(chorus::piecesPerShare(s), 1);
  EXPECT_EQ(chorus::piecesPerShare(tcpHosts(4, 1)), 4);
  EXPECT_EQ(chorus::piecesPerShare(shmShape(8)), 4);
  EXPECT_EQ(chorus::pieceBytesFor(s, 256 << 10), size_t{64} << 10);
  EXPECT_EQ(chorus::pieceBytesFor(tcpHosts(4, 1), 256 << 10), size_t{16} << 10);
  // choosePlan follows the tables of the shape.
  const chorus::TuningTables crowded = chorus::buildTables(ModelParams{}, s, kAll | RD, 3);
  const chorus::TuningTables plain = chorus::buildTables(ModelParams{}, tcpHosts(4, 1), kAll, 3);
  const chorus::PlanKnobs k{4, size_t{512} << 10, size_t{8} << 20};
  EXPECT_EQ(chorus::choosePlan(&crowded, k, Coll::AllReduce, 1 << 20).pieceBytes,
            size_t{256} << 10);
  EXPECT_EQ(chorus::choosePlan(&plain, k, Coll::AllReduce, 1 << 20).pieceBytes, size_t{64} << 10);
  EXPECT_EQ(chorus::choosePlan(&crowded, k, Coll::AllReduce, 64 << 20).pieceBytes,
            size_t{512} << 10);  // the slot
}

TEST(TuningModel, SharedKernelTermsFollowTheirConstants) {
  const ModelShape s = crowdedTcpHosts(4, 1);  // 2 ranks per CPU: (c - 1) = 1
  ModelParams neutral;
  neutral.tcpCrowdPeerUs = 0;
  for (double& f : neutral.tcpCrowdRingCorrection) f = 1;
  const ModelParams p;
  EXPECT_NEAR(chorus::predictUs(p, s, Coll::AllReduce, Algo::Direct, 8) -
                  chorus::predictUs(neutral, s, Coll::AllReduce, Algo::Direct, 8),
              3 * p.tcpCrowdPeerUs, 1e-9);  // three peers over tcp
  EXPECT_NEAR(chorus::predictUs(p, s, Coll::AllReduce, Algo::Ring, 1 << 20) /
                  chorus::predictUs(neutral, s, Coll::AllReduce, Algo::Ring, 1 << 20),
              p.tcpCrowdRingCorrection[6], 1e-9);  // 1 MiB: the seventh factor
  // 2 x 2: only the two peers on the other host are over tcp.
  const ModelShape m = crowdedTcpHosts(2, 2);
  EXPECT_NEAR(chorus::predictUs(p, m, Coll::AllReduce, Algo::Direct, 8) -
                  chorus::predictUs(neutral, m, Coll::AllReduce, Algo::Direct, 8),
              2 * p.tcpCrowdPeerUs, 1e-9);
  // Without crowding the constants change nothing (2 x 1 is issue 17's acceptance-4 shape).
  for (const ModelShape& plain : {tcpHosts(4, 1), tcpHosts(2, 1), tcpHosts(2, 2)})
    for (Algo a : {Algo::Direct, Algo::Ring, Algo::Tree, Algo::Doubling})
      for (size_t b : {size_t{8}, size_t{4096}, size_t{1} << 20, size_t{64} << 20})
        EXPECT_DOUBLE_EQ(chorus::predictUs(p, plain, Coll::AllReduce, a, b),
                         chorus::predictUs(neutral, plain, Coll::AllReduce, a, b));
  // Both are tuning-file constants.
  ModelParams f;
  std::string err;
  ASSERT_TRUE(chorus::parseTuningText(
      "set tcp_crowd_peer_us 7\ntcp_crowd_ring_correction 1 1 1 1 1 1 2.5 1 1 -\n", &f, &err))
      << err;
  EXPECT_DOUBLE_EQ(f.tcpCrowdPeerUs, 7);
  EXPECT_DOUBLE_EQ(f.tcpCrowdRingCorrection[6], 2.5);
  EXPECT_DOUBLE_EQ(f.tcpCrowdRingCorrection[9], ModelParams{}.tcpCrowdRingCorrection[9]);
}

TEST(TuningModel, HalvingIsAnAllReduceAlgorithmWithItsOwnCorrection) {
  // Recursive halving + doubling: named, or in the defaults where ranks crowd a kernel over
  // tcp; all-reduce, and reduce-scatter / all-gather (SharedKernelTcpReduceScatterAndAll-
  // GatherHalve), not broadcast or reduce.
  EXPECT_EQ(chorus::parseAlgoMask("halving"), RH);
  EXPECT_EQ(chorus::parseAlgoMask("ring,HALVING"), R | RH);
  EXPECT_EQ(chorus::defaultAlgos(tcpHosts(4, 1)) & RH, 0u);
  EXPECT_EQ(chorus::defaultAlgos(shmShape(8)) & RH, 0u);
  const ModelShape s = crowdedTcpHosts(4, 1);
  EXPECT_NE(chorus::defaultAlgos(s) & RH, 0u);
  for (Coll c : {Coll::Broadcast, Coll::Reduce})
    EXPECT_LT(chorus::predictUs(ModelParams{}, s, c, Algo::Halving, 1 << 20), 0);
  EXPECT_GT(chorus::predictUs(ModelParams{}, s, Coll::AllReduce, Algo::Halving, 1 << 20), 0);
  // CHORUS_ALGO=halving for a broadcast falls back to what can run.
  EXPECT_EQ(best(s, 1 << 20, RH, 3, Coll::Broadcast), Algo::Ring);
  // The plain model: 2 log2(n) steps against the ring's 2 (n - 1), the ring's bytes.
  ModelParams neutral;
  for (double& f : neutral.tcpCrowdHalvingCorrection) f = 1;
  const ModelShape plain8 = tcpHosts(8, 1);
  EXPECT_LT(chorus::predictUs(neutral, plain8, Coll::AllReduce, Algo::Halving, 64 << 10),
            chorus::predictUs(neutral, plain8, Coll::AllReduce, Algo::Ring, 64 << 10));
  // Its correction applies where crowded only, times the extra ranks per CPU.
  ModelParams p = neutral;
  for (double& f : p.tcpCrowdHalvingCorrection) f = 1.5;
  EXPECT_NEAR(chorus::predictUs(p, s, Coll::AllReduce, Algo::Halving, 1 << 20) /
                  chorus::predictUs(neutral, s, Coll::AllReduce, Algo::Halving, 1 << 20),
              1.5, 1e-9);
  EXPECT_DOUBLE_EQ(
      chorus::predictUs(p, tcpHosts(4, 1), Coll::AllReduce, Algo::Halving, 1 << 20),
      chorus::predictUs(neutral, tcpHosts(4, 1), Coll::AllReduce, Algo::Halving, 1 << 20));
  // A tuning-file constant.
  ModelParams f;
  std::string err;
  ASSERT_TRUE(
      chorus::parseTuningText("tcp_crowd_halving_correction 1 1 1 1 1 1 3 1 1 -\n", &f, &err))
      << err;
  EXPECT_DOUBLE_EQ(f.tcpCrowdHalvingCorrection[6], 3);
  EXPECT_FALSE(chorus::parseTuningText("tcp_crowd_halving_correction 1 1\n", &f, &err));
  // Crowded: a whole slot per message; elsewhere the usual pieces.
  const chorus::PlanKnobs k{4, size_t{512} << 10, size_t{8} << 20};
  const chorus::TuningTables crowded = chorus::buildTables(ModelParams{}, s, RH, 3);
  const chorus::TuningTables uncrowded = chorus::buildTables(ModelParams{}, tcpHosts(4, 1), RH, 3);
  const chorus::Plan pc = chorus::choosePlan(&crowded, k, Coll::AllReduce, 1 << 20);
  EXPECT_EQ(pc.algo, Algo::Halving);
  EXPECT_EQ(pc.pieceBytes, size_t{512} << 10);
  const chorus::Plan pu = chorus::choosePlan(&uncrowded, k, Coll::AllReduce, 1 << 20);
  EXPECT_EQ(pu.algo, Algo::Halving);
  EXPECT_EQ(pu.pieceBytes, size_t{64} << 10);
}

TEST(TuningModel, TcpCostsMoreThanShm) {
  const ModelParams p;
  for (size_t b : {size_t{8}, size_t{1} << 20, size_t{64} << 20})
    for (Algo a : {Algo::Direct, Algo::Ring, Algo::Tree}) {
      const double shm = chorus::predictUs(p, shmShape(2), Coll::AllReduce, a, b);
      const double tcp = chorus::predictUs(p, tcpHosts(2, 1), Coll::AllReduce, a, b);
      if (shm < 0) continue;
      EXPECT_GT(tcp, shm) << chorus::algoName(a) << " " << b;
    }
}

TEST(TuningModel, TimesGrowWithSize) {
  const ModelParams p;
  for (const ModelShape& s : {shmShape(2), shmShape(4), tcpHosts(2, 1), tcpHosts(2, 2)})
    for (Algo a : {Algo::Direct, Algo::Ring, Algo::Tree}) {
      double last = 0;
      for (size_t b = 8; b <= (size_t{1} << 30); b *= 2) {
        const double t = chorus::predictUs(p, s, Coll::AllReduce, a, b);
        if (t < 0) break;
        EXPECT_GE(t, last) << chorus::algoName(a) << " " << b;
        last = t;
      }
    }
}

TEST(TuningModel, AlgoRestriction) {
  const ModelShape s = shmShape(4);
  EXPECT_EQ(best(s, 8, R), Algo::Ring);
  EXPECT_EQ(best(s, 8, T), Algo::Tree);
  EXPECT_EQ(best(s, 256 << 20, T), Algo::Tree);
  EXPECT_EQ(best(s, 8, D | R), Algo::Direct);
  EXPECT_EQ(best(s, 256 << 20, kAll & ~R), Algo::Tree);  // ^ring
  EXPECT_NE(best(s, 8, kAll & ~D), Algo::Direct);        // ^direct
  // direct cannot run 256 MiB: the model's best of the rest, not a failure.
  EXPECT_EQ(best(s, 256 << 20, D), Algo::Ring);
  // broadcast has no tree: a tree-only restriction falls back to the model.
  EXPECT_EQ(best(s, 8, T, 3, Coll::Broadcast), Algo::Direct);
  EXPECT_EQ(best(s, 64 << 20, T, 3, Coll::Broadcast), Algo::Ring);
  // Collectives with a single algorithm keep it.
  EXPECT_EQ(best(s, 8, T, 3, Coll::ReduceScatter), Algo::Ring);
  EXPECT_EQ(best(s, 8, R, 3, Coll::AllToAll), Algo::Direct);
}

TEST(TuningModel, ProtoRestriction) {
  const ModelShape s = shmShape(2);
  EXPECT_NE(best(s, 8, kAll, SIMPLE), Algo::Direct);
  EXPECT_EQ(best(s, 8, kAll, LL), Algo::Direct);
  EXPECT_NE(best(s, 64 << 20, kAll, LL), Algo::Direct);  // LL cannot carry it
}

TEST(TuningModel, LegacyTreeThreshold) {
  ModelShape s = shmShape(4);
  s.treeBytes = 1 << 20;
  EXPECT_EQ(best(s, 512 << 10), Algo::Tree);
  EXPECT_EQ(best(s, 256 << 20), Algo::Ring);
}

TEST(TuningTables, AgreeWithTheModelEverywhere) {
  const ModelParams p;
  std::mt19937_64 rng(42);
  for (const ModelShape& s :
       {shmShape(2), shmShape(4), shmShape(8), tcpHosts(2, 1), tcpHosts(2, 2), tcpHosts(3, 3)}) {
    for (unsigned am : {kAll, R | T, kAll & ~T, D}) {
      const chorus::TuningTables t = chorus::buildTables(p, s, am, 3);
      for (Coll c : {Coll::AllReduce, Coll::Broadcast, Coll::AllGather, Coll::Reduce}) {
        const auto& segs = t.segs[static_cast<int>(c)];
        ASSERT_FALSE(segs.empty());
        for (size_t k = 1; k < segs.size(); ++k) {
          EXPECT_LT(segs[k - 1].upTo, segs[k].upTo);
          EXPECT_TRUE(segs[k - 1].algo != segs[k].algo || segs[k - 1].fallback != segs[k].fallback);
          // Exact switch points.
          EXPECT_EQ(chorus::bestAlgo(p, s, c, segs[k - 1].upTo, am, 3), segs[k - 1].algo);
          EXPECT_EQ(chorus::bestAlgo(p, s, c, segs[k - 1].upTo + 1, am, 3), segs[k].algo);
        }
        for (int i = 0; i < 2000; ++i) {
          const size_t b = rng() >> (20 + rng() % 40);
          bool fb = false;
          EXPECT_EQ(t.pick(c, b), chorus::bestAlgo(p, s, c, b, am, 3, &fb)) << b;
          EXPECT_EQ(t.segment(c, b).fallback, fb) << b;
        }
      }
    }
  }
}

TEST(TuningFile, Parses) {
  ModelParams p;
  std::string err;
  ASSERT_TRUE(
      chorus::parseTuningText("# measured\n"
                              "shm 0.5 9.0\n"
                              "tcp 30 -   # keep the bandwidth\n"
                              "tcp_leaders 9 -\n"
                              "set simple_step_us 2.5\n"
                              "all_reduce tree simple 3 4\n"
                              "all_reduce direct LL off\n"
                              "tcp_tree_correction 1 1 1 0.5 - 1 1 1 1 1\n",
                              &p, &err))
      << err;
  EXPECT_DOUBLE_EQ(p.tcpTreeCorrection[3], 0.5);
  EXPECT_DOUBLE_EQ(p.tcpTreeCorrection[4], ModelParams{}.tcpTreeCorrection[4]);  // "-" keeps
  EXPECT_DOUBLE_EQ(p.tcpTreeCorrection[9], 1.0);
  EXPECT_DOUBLE_EQ(p.shm.latUs, 0.5);
  EXPECT_DOUBLE_EQ(p.shm.bwGBps, 9.0);
  EXPECT_DOUBLE_EQ(p.tcp.latUs, 30);
  EXPECT_DOUBLE_EQ(p.tcp.bwGBps, ModelParams{}.tcp.bwGBps);
  EXPECT_DOUBLE_EQ(p.tcpLeaders.latUs, 9);
  EXPECT_DOUBLE_EQ(p.tcpLeaders.bwGBps, ModelParams{}.tcpLeaders.bwGBps);
  EXPECT_DOUBLE_EQ(p.simpleStepUs, 2.5);
  ASSERT_EQ(p.overrides.size(), 2u);
  // "off" rules direct out; the override sets tree's hop cost.
  EXPECT_LT(chorus::predictUs(p, shmShape(2), Coll::AllReduce, Algo::Direct, 8), 0);
  EXPECT_NE(chorus::bestAlgo(p, shmShape(2), Coll::AllReduce, 8, kAll, 3), Algo::Direct);
  const double tree = chorus::predictUs(p, shmShape(2), Coll::AllReduce, Algo::Tree, 1000);
  EXPECT_NEAR(tree, 2 * 3 + (2 * ModelParams{}.treeBwFactor * 1000 + 1000) / 4e3, 1e-9);
}

TEST(TuningFile, RejectsMalformedLinesAndKeepsTheParams) {
  for (const char* text :
       {"shm 1\n", "udp 1 2\n", "shm x 2\n", "shm 1 0\n", "set nope 1\n", "all_reduce ring LL\n",
        "all_reduce mesh simple 1 2\n", "shm 1 -2\n", "tcp_tree_correction 1 1\n",
        "tcp_tree_correction 1 1 1 1 1 1 1 1 1 0\n"}) {
    ModelParams p;
    std::string err;
    EXPECT_FALSE(chorus::parseTuningText(text, &p, &err)) << text;
    EXPECT_NE(err.find("line 1"), std::string::npos) << err;
    EXPECT_DOUBLE_EQ(p.shm.latUs, ModelParams{}.shm.latUs);
  }
}

TEST(TuningFormat, PrintsEveryCollectiveAndTheChoice) {
  const std::string s = chorus::formatPredictions(ModelParams{}, shmShape(4), kAll, 3);
  for (const char* want : {"all_reduce     direct", "all_reduce     ring", "all_reduce     tree",
                           "broadcast", "all_gather", "all_reduce choice: direct <=", "256M"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
}

// A communicator that was never connected (no processes), n ranks on one host of 2 CPUs,
// with the default slot, FIFO, LL and streaming-store sizes: what commChoosePlan reads.
void fakeComm(chorusComm* comm, int n) {
  comm->rank = 0;
  comm->nranks = n;
  comm->ncpus = 2;
  comm->peers.assign(static_cast<size_t>(n), chorus::PeerInfo{7, 0, 0, -1, 0});
  comm->tuning.slotBytes = 512 << 10;
  comm->tuning.fifoDepth = 8;
  comm->tuning.llBytes = 16 << 10;
  comm->tuning.treeBytes = 0;
  comm->tuning.ntBytes = 8 << 20;
}

// commChoosePlan on a fakeComm: the shape comes from the peer table, the restriction from
// comm->tuning; the tables are the comm's.
TEST(ChoosePlan, FakeComm) {
  auto plan = [](int n, const char* algo, const char* proto, size_t bytes) {
    chorusComm comm;
    fakeComm(&comm, n);
    comm.tuning.algo = algo;
    comm.tuning.proto = proto;
    return chorus::commChoosePlan(&comm, Coll::AllReduce, bytes);
  };
  EXPECT_EQ(plan(2, "", "", 8).algo, Algo::Direct);
  EXPECT_EQ(plan(2, "", "", 8).proto, chorus::Proto::LL);
  EXPECT_EQ(plan(2, "", "", 256 << 20).algo, Algo::Ring);
  EXPECT_EQ(plan(2, "", "", 256 << 20).proto, chorus::Proto::Simple);
  EXPECT_TRUE(plan(2, "", "", 256 << 20).streaming);
  EXPECT_EQ(plan(2, "", "", 256 << 20).pieceBytes, size_t{512} << 10);
  // Two ranks, ring: one piece per rank's half (no pipeline to fill), up to a slot.
  EXPECT_EQ(plan(2, "ring", "", 256 << 10).pieceBytes, size_t{128} << 10);
  EXPECT_EQ(plan(2, "ring", "", 1 << 20).pieceBytes, size_t{512} << 10);
  EXPECT_EQ(plan(2, "ring", "", (256 << 10) + 4).pieceBytes, (size_t{128} << 10) + 64);
  // More ranks: still several pieces per share, so the ring pipelines.
  EXPECT_EQ(plan(4, "ring", "", 1 << 20).pieceBytes, size_t{64} << 10);
  EXPECT_EQ(plan(4, "tree", "", 8).algo, Algo::Tree);
  EXPECT_EQ(plan(4, "^direct", "", 8).algo == Algo::Direct, false);
  EXPECT_EQ(plan(4, "direct", "", 256 << 20).algo, Algo::Ring);
  EXPECT_EQ(plan(4, "", "simple", 8).proto, chorus::Proto::Simple);
}

// The same-host rules of choosePlan, over tables of one host of 4 ranks: each runs only
// where the restriction allows it, and a restriction that cannot run a call says so.
TEST(ChoosePlan, SameHostRulesFollowTheRestriction) {
  const size_t K = 1024;
  chorus::PlanKnobs k;
  k.nranks = 4;
  k.slotBytes = 512 * K;
  k.ntBytes = 8 << 20;
  k.allShm = true;
  k.llBytes = 16 * K;
  k.singleCopyBytes = 8 * K;
  k.cma = true;
  auto plan = [&](unsigned am, unsigned pm, Coll c, size_t bytes, bool inPlace = false) {
    const chorus::TuningTables t = chorus::buildTables(ModelParams{}, shmShape(4), am, pm);
    return chorus::choosePlan(&t, k, c, bytes, chorus::PlanCall{inPlace, 0});
  };
  using chorus::Proto;
  using chorus::Route;
  // Reduce-scatter up to the LL threshold: direct/LL by default and where direct is named
  // (the model itself has no direct reduce-scatter: no fallback), the ring where it is not.
  EXPECT_EQ(plan(kAll, 3, Coll::ReduceScatter, 4 * K).algo, Algo::Direct);
  EXPECT_EQ(plan(kAll, 3, Coll::ReduceScatter, 4 * K).proto, Proto::LL);
  EXPECT_FALSE(plan(D, 3, Coll::ReduceScatter, 4 * K).fallback);
  EXPECT_EQ(plan(R, 3, Coll::ReduceScatter, 4 * K).algo, Algo::Ring);
  EXPECT_EQ(plan(kAll, SIMPLE, Coll::ReduceScatter, 4 * K).algo, Algo::Ring);
  EXPECT_TRUE(plan(D, 3, Coll::ReduceScatter, 64 * K).fallback);  // too large for LL
  // All-to-all: LL up to the threshold unless Simple is forced; Simple above; a ring
  // restriction cannot run it at all.
  EXPECT_EQ(plan(kAll, 3, Coll::AllToAll, 4 * K).proto, Proto::LL);
  EXPECT_EQ(plan(kAll, SIMPLE, Coll::AllToAll, 4 * K).proto, Proto::Simple);
  EXPECT_FALSE(plan(kAll, SIMPLE, Coll::AllToAll, 4 * K).fallback);
  EXPECT_EQ(plan(kAll, 3, Coll::AllToAll, 64 * K).proto, Proto::Simple);
  EXPECT_TRUE(plan(kAll, LL, Coll::AllToAll, 64 * K).fallback);
  EXPECT_TRUE(plan(R, 3, Coll::AllToAll, 4 * K).fallback);
  // Gather and scatter likewise: each block in one LL message up to the threshold, unless
  // Simple is forced; Simple on the FIFOs above (with single copy from its threshold).
  for (Coll c : {Coll::Gather, Coll::Scatter}) {
    EXPECT_EQ(plan(kAll, 3, c, 512).proto, Proto::LL);
    EXPECT_EQ(plan(kAll, 3, c, 512).algo, Algo::Direct);
    EXPECT_EQ(plan(kAll, 3, c, 512).route, Route::Fifo);
    EXPECT_FALSE(plan(kAll, LL, c, 1 * K).fallback);
    EXPECT_EQ(plan(kAll, SIMPLE, c, 1 * K).proto, Proto::Simple);
    EXPECT_FALSE(plan(kAll, SIMPLE, c, 1 * K).fallback);
    EXPECT_EQ(plan(kAll, 3, c, 16 * K + 4).proto, Proto::Simple);
    EXPECT_TRUE(plan(kAll, LL, c, 64 * K).fallback);
  }
  // Gather up to the LL threshold; scatter up to 1 KiB (measured slower on LL above).
  EXPECT_EQ(plan(kAll, 3, Coll::Gather, 16 * K).proto, Proto::LL);
  EXPECT_EQ(plan(kAll, 3, Coll::Scatter, 1 * K).proto, Proto::LL);
  EXPECT_EQ(plan(kAll, 3, Coll::Scatter, 2 * K).proto, Proto::Simple);
  EXPECT_TRUE(plan(kAll, LL, Coll::Scatter, 2 * K).fallback);
  // Single copy from CHORUS_SINGLE_COPY_THRESHOLD (all-reduce from 64 KiB), where direct on
  // slots is allowed; never for an in-place all-to-all.
  EXPECT_EQ(plan(kAll, 3, Coll::AllGather, 1 << 20).route, Route::SingleCopy);
  EXPECT_TRUE(plan(kAll, 3, Coll::AllGather, 1 << 20).cma);
  EXPECT_EQ(plan(kAll, 3, Coll::AllGather, 4 * K).route, Route::Fifo);
  EXPECT_EQ(plan(R, 3, Coll::AllGather, 1 << 20).route, Route::Fifo);
  EXPECT_EQ(plan(R, 3, Coll::AllGather, 1 << 20).algo, Algo::Ring);
  EXPECT_EQ(plan(T, 3, Coll::AllReduce, 1 << 20).route, Route::Fifo);
  EXPECT_EQ(plan(T, 3, Coll::AllReduce, 1 << 20).algo, Algo::Tree);
  EXPECT_EQ(plan(kAll, 3, Coll::AllReduce, 32 * K).route, Route::Fifo);
  EXPECT_EQ(plan(kAll, 3, Coll::AllReduce, 64 * K).route, Route::SingleCopy);
  EXPECT_EQ(plan(kAll, 3, Coll::AllToAll, 1 << 20, true).route, Route::Fifo);
  EXPECT_EQ(plan(kAll, 3, Coll::AllToAll, 1 << 20, false).route, Route::SingleCopy);
  // A forced algorithm that cannot run a call: the default plan, flagged.
  EXPECT_TRUE(plan(T, 3, Coll::Broadcast, 1 << 20).fallback);
  EXPECT_EQ(plan(T, 3, Coll::Broadcast, 1 << 20).route, Route::SingleCopy);  // as by default
  EXPECT_FALSE(plan(kAll, 3, Coll::Broadcast, 1 << 20).fallback);
  k.allShm = false;  // not one host: none of the same-host rules
  EXPECT_EQ(plan(kAll, 3, Coll::ReduceScatter, 4 * K).algo, Algo::Ring);
  EXPECT_EQ(plan(kAll, 3, Coll::AllToAll, 4 * K).proto, Proto::Simple);
  EXPECT_EQ(plan(kAll, 3, Coll::Gather, 512).proto, Proto::Simple);
  EXPECT_EQ(plan(kAll, 3, Coll::Scatter, 512).proto, Proto::Simple);
  EXPECT_EQ(plan(kAll, 3, Coll::AllGather, 1 << 20).route, Route::Fifo);
}

// Ranks outnumbering their CPUs on one host (more than two): all-reduce above the LL
// threshold up to 512 KiB takes the ordered exchange (the reproducible mode's rank-order plan,
// whatever the reduction and the mode), where the restriction allows direct; above, where a
// share is at most a quarter slot and there are no boards, direct on the FIFOs, one piece per
// share; otherwise (larger, not crowded, two ranks, not one host, ring named) the tables'
// choice as before.
TEST(ChoosePlan, CrowdedSameHostAllReduceTakesTheOrderedExchange) {
  const size_t K = 1024;
  chorus::PlanKnobs k;
  k.nranks = 4;
  k.slotBytes = 512 * K;
  k.allShm = true;
  k.llBytes = 16 * K;
  k.singleCopyBytes = 8 * K;
  k.crowded = true;
  auto plan = [&](unsigned am, size_t bytes, Coll c = Coll::AllReduce, bool orderMatters = true) {
    const chorus::TuningTables t = chorus::buildTables(ModelParams{}, shmShape(k.nranks), am, 3);
    chorus::PlanCall call;
    call.orderMatters = orderMatters;
    return chorus::choosePlan(&t, k, c, bytes, call);
  };
  using chorus::Proto;
  using chorus::Route;
  for (size_t b : {16 * K + 64, 100 * K + 8, 256 * K, 512 * K}) {
    const chorus::Plan p = plan(kAll, b);
    EXPECT_TRUE(p.ordered) << b;
    EXPECT_EQ(p.algo, Algo::Direct) << b;
    EXPECT_EQ(p.proto, Proto::Simple) << b;
    EXPECT_EQ(p.route, Route::Fifo) << b;  // not single copy
    EXPECT_FALSE(p.board) << b;
    EXPECT_FALSE(p.fallback) << b;
    EXPECT_EQ(p.pieceBytes, 64 * K) << b;  // the mode's crowded rounds: 256 KiB over 4 ranks
    // Integers, min and max (the order does not matter to them) take it too.
    EXPECT_TRUE(plan(kAll, b, Coll::AllReduce, false).ordered) << b;
  }
  EXPECT_FALSE(plan(kAll, 16 * K).ordered);  // LL-sized: direct/LL as before
  EXPECT_EQ(plan(kAll, 16 * K).proto, Proto::LL);
  EXPECT_FALSE(plan(kAll, 512 * K + 64).ordered);        // above 512 KiB: shares above a quarter
  EXPECT_EQ(plan(kAll, 512 * K + 64).algo, Algo::Ring);  // slot, the tables' choice
  EXPECT_EQ(plan(kAll, 64 << 20).pieceBytes, 512 * K);   // never above a slot
  EXPECT_FALSE(plan(R, 256 * K).ordered);                // ring named: the ring
  EXPECT_EQ(plan(R, 256 * K).algo, Algo::Ring);
  for (Coll c : {Coll::AllGather, Coll::Broadcast, Coll::ReduceScatter, Coll::Reduce})
    EXPECT_FALSE(plan(kAll, 256 * K, c).ordered) << static_cast<int>(c);  // not this rule
  k.slotBytes = 4096 * K;  // above 512 KiB with no boards: direct on the FIFOs while a share
  EXPECT_FALSE(plan(kAll, 1024 * K).ordered);  // is at most a quarter slot
  EXPECT_EQ(plan(kAll, 1024 * K).algo, Algo::Direct);
  EXPECT_EQ(plan(kAll, 1024 * K).proto, Proto::Simple);
  EXPECT_EQ(plan(kAll, 1024 * K).pieceBytes, 256 * K);           // one piece per share
  EXPECT_EQ(plan(kAll, 1000 * K + 8).pieceBytes, 250 * K + 64);  // rounded up to a line
  EXPECT_TRUE(plan(kAll, 512 * K).ordered);  // the exchange's bound does not follow the slot
  k.slotBytes = 512 * K;
  k.crowded = false;
  EXPECT_FALSE(plan(kAll, 256 * K).ordered);
  EXPECT_EQ(plan(kAll, 256 * K).algo, Algo::Ring);
  k.crowded = true;
  k.allShm = false;
  EXPECT_FALSE(plan(kAll, 256 * K).ordered);
  EXPECT_EQ(plan(kAll, 256 * K).algo, Algo::Ring);
  k.allShm = true;
  k.nranks = 2;
  EXPECT_FALSE(plan(kAll, 256 * K).ordered);
  EXPECT_EQ(plan(kAll, 256 * K).pieceBytes, 256 * K);  // two ranks: their own rule (below)
  EXPECT_EQ(plan(kAll, 1 << 20).algo, Algo::Ring);
}

// Two ranks on shared memory: all-reduce above the LL path and below 512 KiB runs direct on
// the FIFOs, each rank sending its whole input in one piece (up to a slot) and reducing both
// (allreduce.cc, allReduceTwoRanks); LL-sized calls stay on LL; from 512 KiB, over tcp, or
// with the ring named: the ring.
TEST(ChoosePlan, TwoRanksAllReduceOnSharedMemoryRunsDirectBelow512K) {
  const size_t K = 1024;
  chorus::PlanKnobs k;
  k.nranks = 2;
  k.slotBytes = 512 * K;
  k.allShm = true;
  k.llBytes = 16 * K;
  auto plan = [&](unsigned am, size_t bytes, Coll c = Coll::AllReduce) {
    const chorus::TuningTables t = chorus::buildTables(ModelParams{}, shmShape(k.nranks), am, 3);
    return chorus::choosePlan(&t, k, c, bytes);
  };
  using chorus::Proto;
  for (size_t bytes : {32 * K, 100 * K + 4, 256 * K, 512 * K - 4}) {
    const chorus::Plan p = plan(kAll, bytes);
    EXPECT_EQ(p.algo, Algo::Direct) << bytes;
    EXPECT_EQ(p.proto, Proto::Simple) << bytes;
    EXPECT_FALSE(p.fallback) << bytes;
    EXPECT_EQ(p.pieceBytes, (bytes + 63) & ~size_t{63}) << bytes;  // the whole call
  }
  EXPECT_EQ(plan(kAll, 16 * K).proto, Proto::LL);
  EXPECT_EQ(plan(kAll, 512 * K).algo, Algo::Ring);
  EXPECT_EQ(plan(R, 64 * K).algo, Algo::Ring);
  EXPECT_EQ(plan(kAll, 64 * K, Coll::ReduceScatter).algo, Algo::Ring);
  k.slotBytes = 64 * K;
  EXPECT_EQ(plan(kAll, 256 * K).pieceBytes, 64 * K);  // never above a slot
  k.slotBytes = 512 * K;
  k.allShm = false;
  EXPECT_EQ(plan(kAll, 64 * K).algo, Algo::Ring);
}

// The same, where the transport has shared boards (transports/board.h): all-reduce above
// the LL threshold takes the ordered exchange up to 256 KiB (and one board buffer), and runs
// on the boards above, in one piece where it fits one buffer and in two where it needs
// two; all-gather above the tables'
// direct/LL runs on the boards while a rank's block fits two board buffers; larger, the
// ring. Not crowded, two ranks, not one host, no boards, or the ring named: as before.
TEST(ChoosePlan, CrowdedSameHostUsesTheBoards) {
  const size_t K = 1024;
  chorus::PlanKnobs k = crowdedFourRanks();
  auto plan = [&](unsigned am, size_t bytes, Coll c) {
    const chorus::TuningTables t = chorus::buildTables(ModelParams{}, shmShape(k.nranks), am, 3);
    return chorus::choosePlan(&t, k, c, bytes);
  };
  using chorus::Proto;
  using chorus::Route;
  const Coll AR = Coll::AllReduce, AG = Coll::AllGather;
  for (size_t b : {32 * K, 256 * K}) {  // up to 256 KiB: the ordered exchange
    EXPECT_FALSE(plan(kAll, b, AR).board) << b;
    EXPECT_TRUE(plan(kAll, b, AR).ordered) << b;
  }
  for (size_t b : {256 * K + 64, 384 * K, 512 * K}) {  // one board buffer: the boards, one piece
    EXPECT_TRUE(plan(kAll, b, AR).board) << b;
    EXPECT_FALSE(plan(kAll, b, AR).ordered) << b;
    EXPECT_EQ(plan(kAll, b, AR).pieceBytes, b) << b;
  }
  for (size_t b : {512 * K + 64, 600 * K, 1024 * K}) {  // two: the boards, two pieces
    const chorus::Plan p = plan(kAll, b, AR);
    EXPECT_TRUE(p.board) << b;
    EXPECT_FALSE(p.ordered) << b;
    EXPECT_EQ(p.algo, Algo::Direct) << b;
    EXPECT_EQ(p.proto, Proto::Simple) << b;
    EXPECT_EQ(p.route, Route::Fifo) << b;  // not single copy
    EXPECT_FALSE(p.fallback) << b;
  }
  EXPECT_EQ(plan(kAll, 1024 * K, AR).pieceBytes, 512 * K);  // two pieces
  EXPECT_EQ(plan(kAll, 600 * K, AR).pieceBytes, 300 * K);   // two equal pieces
  EXPECT_FALSE(plan(kAll, 2048 * K, AR).board);             // four pieces: the ring
  EXPECT_EQ(plan(kAll, 2048 * K, AR).algo, Algo::Ring);
  EXPECT_FALSE(plan(kAll, 16 * K, AR).board);  // LL-sized: direct/LL as before
  EXPECT_FALSE(plan(kAll, 16 * K, AR).ordered);
  EXPECT_EQ(plan(kAll, 16 * K, AR).proto, Proto::LL);
  EXPECT_FALSE(plan(R, 1024 * K, AR).board);  // ring named: the ring
  EXPECT_FALSE(plan(R, 256 * K, AR).ordered);
  k.slotBytes = k.boardBytes = 8 * K;  // small board buffers: the exchange up to one
  k.llBytes = 1 * K;
  EXPECT_TRUE(plan(kAll, 8 * K, AR).ordered);
  EXPECT_TRUE(plan(kAll, 12 * K, AR).board);
  EXPECT_EQ(plan(kAll, 12 * K, AR).pieceBytes, 6 * K);
  k.llBytes = 16 * K;
  k.slotBytes = k.boardBytes = 512 * K;
  // All-gather: blocks (a quarter of the result at np 4) of up to two buffers.
  EXPECT_TRUE(plan(kAll, 32 * K, AG).board);
  EXPECT_EQ(plan(kAll, 32 * K, AG).pieceBytes, 8 * K);
  EXPECT_EQ(plan(kAll, 32 * K, AG).route, Route::Fifo);  // not single copy
  EXPECT_TRUE(plan(kAll, 4 << 20, AG).board);            // 1 MiB blocks: two pieces
  EXPECT_EQ(plan(kAll, 4 << 20, AG).pieceBytes, 512 * K);
  EXPECT_FALSE(plan(kAll, 8 << 20, AG).board);  // 2 MiB blocks: the ring
  EXPECT_FALSE(plan(kAll, 1 * K, AG).board);    // the tables' direct/LL stays
  EXPECT_EQ(plan(kAll, 1 * K, AG).proto, Proto::LL);
  // Where the restriction leaves direct out, or not this rule's collectives: no board.
  EXPECT_FALSE(plan(R, 256 * K, AG).board);
  for (Coll c : {Coll::ReduceScatter, Coll::AllToAll, Coll::Reduce})
    EXPECT_FALSE(plan(kAll, 256 * K, c).board);
  // Broadcast: above 64 KiB up to a board buffer, in one piece; the chain elsewhere.
  const Coll BC = Coll::Broadcast;
  for (size_t b : {64 * K + 4, 256 * K, 512 * K}) {
    const chorus::Plan p = plan(kAll, b, BC);
    EXPECT_TRUE(p.board) << b;
    EXPECT_EQ(p.algo, Algo::Direct) << b;
    EXPECT_EQ(p.proto, Proto::Simple) << b;
    EXPECT_EQ(p.route, Route::Fifo) << b;  // not single copy
    EXPECT_EQ(p.pieceBytes, 512 * K) << b;
  }
  for (size_t b : {32 * K, 64 * K, 512 * K + 4, 2048 * K})
    EXPECT_FALSE(plan(kAll, b, BC).board) << b;
  EXPECT_EQ(plan(kAll, 1 * K, BC).proto, Proto::LL);  // the tables' direct/LL stays
  EXPECT_FALSE(plan(R, 256 * K, BC).board);           // ring named: the chain
  k.crowded = false;
  EXPECT_FALSE(plan(kAll, 1024 * K, AR).board);
  EXPECT_FALSE(plan(kAll, 256 * K, AG).board);
  EXPECT_FALSE(plan(kAll, 256 * K, BC).board);
  k.crowded = true;
  k.boardBytes = 0;  // no boards: the ordered exchange or the FIFOs, and the ring
  EXPECT_FALSE(plan(kAll, 1024 * K, AR).board);
  EXPECT_FALSE(plan(kAll, 256 * K, AG).board);
  EXPECT_FALSE(plan(kAll, 256 * K, BC).board);
  k.boardBytes = 512 * K;
  k.nranks = 2;
  EXPECT_FALSE(plan(kAll, 1024 * K, AR).board);
  EXPECT_FALSE(plan(kAll, 256 * K, AG).board);
  EXPECT_FALSE(plan(kAll, 256 * K, BC).board);
}

// Four ranks crowding one host, with pair cells for every pair rank ^ 2^k: the all-reduce
// above 64 KiB and up to 4 MiB runs halving and doubling on the cells
// (src/algorithms/pair_halving.cc), half a piece up to a cell, never single copy; 64 KiB
// and below the ordered exchange as before, 8 MiB the ring. Halving named (CHORUS_ALGO=
// halving): on the cells at every size above the LL path, crowded or not, at np 8 too. No
// cells, not crowded, eight ranks, the ring or direct named, or another collective: as before.
TEST(ChoosePlan, CrowdedPowerOfTwoTakesHalvingOnPairCells) {
  const size_t K = 1024;
  chorus::PlanKnobs k = crowdedFourRanks();
  k.pairCellBytes = 512 * K;
  auto plan = [&](unsigned am, size_t bytes, Coll c = Coll::AllReduce) {
    const chorus::TuningTables t = chorus::buildTables(ModelParams{}, shmShape(k.nranks), am, 3);
    return chorus::choosePlan(&t, k, c, bytes);
  };
  const unsigned H = 1u << static_cast<int>(Algo::Halving);
  for (size_t b : {64 * K + 64, 128 * K, 1000 * K, 1024 * K, 2048 * K + 64, 4096 * K}) {
    const chorus::Plan p = plan(kAll, b);
    EXPECT_TRUE(p.pairCells) << b;
    EXPECT_EQ(p.algo, Algo::Halving) << b;
    EXPECT_EQ(p.proto, chorus::Proto::Simple) << b;
    EXPECT_EQ(p.route, chorus::Route::Fifo) << b;  // not single copy
    EXPECT_FALSE(p.board || p.ordered || p.fallback) << b;
    EXPECT_EQ(p.pieceBytes, std::min(512 * K, ((b + 1) / 2 + 63) & ~size_t{63})) << b;
  }
  EXPECT_TRUE(plan(kAll, 64 * K).ordered);  // the ordered exchange keeps 64 KiB
  EXPECT_FALSE(plan(kAll, 64 * K).pairCells);
  EXPECT_FALSE(plan(kAll, 8192 * K).pairCells);  // the ring above 4 MiB
  EXPECT_EQ(plan(kAll, 8192 * K).algo, Algo::Ring);
  EXPECT_FALSE(plan(R, 1024 * K).pairCells);  // the ring named
  EXPECT_FALSE(plan(D, 1024 * K).pairCells);  // direct named: the boards
  EXPECT_TRUE(plan(D, 1024 * K).board);
  EXPECT_TRUE(plan(H, 32 * K).pairCells);  // halving named: on the cells, every size
  EXPECT_TRUE(plan(H, 64 << 20).pairCells);
  EXPECT_EQ(plan(H, 64 << 20).pieceBytes, 512 * K);
  EXPECT_FALSE(plan(H, 16 * K).pairCells);  // not above the LL path
  for (Coll c : {Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce})
    EXPECT_FALSE(plan(kAll, 1024 * K, c).pairCells);
  k.crowded = false;
  EXPECT_FALSE(plan(kAll, 1024 * K).pairCells);
  EXPECT_TRUE(plan(H, 1024 * K).pairCells);
  k.crowded = true;
  k.nranks = 8;  // measured no faster at np 8: not chosen there; named, on the cells
  EXPECT_FALSE(plan(kAll, 1024 * K).pairCells);
  EXPECT_TRUE(plan(H, 1024 * K).pairCells);
  k.nranks = 4;
  k.pairCellBytes = 0;  // no cells: the boards as before
  EXPECT_FALSE(plan(kAll, 1024 * K).pairCells);
  EXPECT_TRUE(plan(kAll, 1024 * K).board);
  EXPECT_FALSE(plan(H, 1024 * K).pairCells);
}

// The same four crowded ranks in reproducible mode: where the default runs halving on the
// pair cells (64 KiB < size <= 4 MiB, no restriction or halving named), the rank-order
// schedule on the same cells (ordered and pairCells, src/algorithms/ordered_pairs.cc), with
// the halving's pieces and store policy; elsewhere the ordered exchange as before. An op whose
// order does not matter keeps the default's plan (the halving).
TEST(OrderedPlan, CrowdedFourRanksTakeTheRankOrderOnPairCells) {
  const size_t K = 1024;
  chorus::PlanKnobs k = crowdedFourRanks();
  k.pairCellBytes = 512 * K;
  k.reproducible = true;
  auto plan = [&](unsigned am, size_t bytes, bool inPlace = false) {
    const chorus::TuningTables t = chorus::buildTables(ModelParams{}, shmShape(k.nranks), am, 3);
    chorus::PlanCall call;
    call.inPlace = inPlace;
    return chorus::choosePlan(&t, k, Coll::AllReduce, bytes, call);
  };
  const unsigned H = 1u << static_cast<int>(Algo::Halving);
  for (size_t b : {64 * K + 64, 128 * K, 1000 * K, 2048 * K + 64, 4096 * K})
    for (bool inPlace : {false, true}) {
      const chorus::Plan p = plan(kAll, b, inPlace);
      EXPECT_TRUE(p.ordered && p.pairCells) << b;
      EXPECT_EQ(p.algo, Algo::Halving) << b;
      EXPECT_EQ(p.proto, chorus::Proto::Simple) << b;
      EXPECT_FALSE(p.board || p.fallback || p.chain || p.viaLeaders) << b;
      EXPECT_EQ(p.route, chorus::Route::Fifo) << b;
      k.reproducible = false;  // the default's halving: the same pieces and stores
      const chorus::Plan d = plan(kAll, b, inPlace);
      k.reproducible = true;
      EXPECT_TRUE(d.pairCells && !d.ordered) << b;
      EXPECT_EQ(p.pieceBytes, d.pieceBytes) << b;
      EXPECT_EQ(p.streaming, d.streaming) << b;
    }
  EXPECT_TRUE(plan(H, 1024 * K).pairCells && plan(H, 1024 * K).ordered);  // halving named
  for (size_t b : {64 * K, 8192 * K}) {  // the ordered exchange, as the default's plan there
    EXPECT_TRUE(plan(kAll, b).ordered) << b;
    EXPECT_FALSE(plan(kAll, b).pairCells) << b;
    EXPECT_EQ(plan(kAll, b).algo, Algo::Direct) << b;
  }
  EXPECT_FALSE(plan(R, 1024 * K).pairCells);  // the ring named: the ordered exchange
  EXPECT_FALSE(plan(D, 1024 * K).pairCells);  // direct named: the same
  EXPECT_TRUE(plan(D, 1024 * K).ordered);
  chorus::PlanCall orderFree;  // integer sums, min, max: the default's halving
  orderFree.orderMatters = false;
  {
    const chorus::TuningTables t = chorus::buildTables(ModelParams{}, shmShape(4), kAll, 3);
    const chorus::Plan p = chorus::choosePlan(&t, k, Coll::AllReduce, 1024 * K, orderFree);
    EXPECT_TRUE(p.pairCells && !p.ordered);
  }
  k.crowded = false;
  EXPECT_FALSE(plan(kAll, 1024 * K).pairCells);
  EXPECT_TRUE(plan(kAll, 1024 * K).ordered);
  k.crowded = true;
  k.nranks = 8;  // four ranks only
  EXPECT_FALSE(plan(kAll, 1024 * K).pairCells);
  k.nranks = 4;
  k.pairCellBytes = 0;  // no cells
  EXPECT_FALSE(plan(kAll, 1024 * K).pairCells);
  EXPECT_TRUE(plan(kAll, 1024 * K).ordered);
}

TEST(ChoosePlan, TwoRanksOverTcpCutHalvesIntoPieces) {
  // Over a socket the next piece travels while this one is reduced: a quarter of a half,
  // at least CHORUS_TCP_PIECE_MIN, at most a slot; 0 keeps the one piece of shared memory.
  auto piece = [](size_t pieceMin, uint64_t host1, size_t bytes) {
    chorusComm comm;
    fakeComm(&comm, 2);
    comm.peers[1].hostHash = host1;  // another host: the hop is tcp
    comm.tuning.tcpPieceMin = pieceMin;
    comm.tuning.algo = "ring";
    return chorus::commChoosePlan(&comm, Coll::AllReduce, bytes).pieceBytes;
  };
  const size_t K = 1024;
  EXPECT_EQ(piece(128 * K, 8, 256 * K), 128 * K);     // the half is the minimum: one piece
  EXPECT_EQ(piece(128 * K, 8, 1 << 20), 128 * K);     // four pieces of the 512 KiB half
  EXPECT_EQ(piece(128 * K, 8, 4 << 20), 512 * K);     // a quarter of 2 MiB
  EXPECT_EQ(piece(128 * K, 8, 256u << 20), 512 * K);  // never above a slot
  EXPECT_EQ(piece(64 * K, 8, 256 * K), 64 * K);       // another minimum
  EXPECT_EQ(piece(0, 8, 1 << 20), 512 * K);           // 0: one piece per half
  EXPECT_EQ(piece(128 * K, 7, 1 << 20), 512 * K);     // same host (shared memory): one piece
}

TEST(ChoosePlan, TwoRanksAllGatherOnSharedMemorySendEachBlockWhole) {
  // Both ranks write their block, then read the peer's: pieces overlap nothing where
  // shared memory joins the pair, so one piece per block, up to a slot. Elsewhere (here:
  // the test's comm without peerMem.allShm) the general rule, a quarter of a share.
  auto piece = [](bool allShm, size_t bytes) {
    chorusComm comm;
    fakeComm(&comm, 2);
    comm.peerMem.allShm = allShm;
    comm.tuning.algo = "ring";
    return chorus::commChoosePlan(&comm, Coll::AllGather, bytes).pieceBytes;
  };
  const size_t K = 1024;
  EXPECT_EQ(piece(true, 512 * K), 256 * K);         // a 256 KiB block in one piece
  EXPECT_EQ(piece(true, 2 * K + 128), 1 * K + 64);  // rounded up to a cache line
  EXPECT_EQ(piece(true, 4 << 20), 512 * K);         // never above a slot
  EXPECT_EQ(piece(false, 512 * K), 64 * K);         // the general rule: a quarter of a share
}

TEST(ChoosePlan, ARepeatedCallTakesTheSamePlanAsAFreshChoice) {
  // commChoosePlan keeps its last plan for the same collective and size: every call of a
  // sequence must get what a communicator that never chose before gets, including calls
  // right after another collective or size (a key without the collective or the size would
  // hand the previous call's plan on; the sequence has such neighbours, checked below).
  auto same = [](const chorus::Plan& a, const chorus::Plan& b) {
    return a.algo == b.algo && a.proto == b.proto && a.pieceBytes == b.pieceBytes &&
           a.streaming == b.streaming;
  };
  const size_t K = 1024;
  const std::pair<Coll, size_t> calls[] = {
      {Coll::AllGather, 512 * K}, {Coll::AllGather, 512 * K},  {Coll::AllReduce, 8},
      {Coll::AllReduce, 8},       {Coll::AllReduce, 16 << 20}, {Coll::AllGather, 512 * K},
      {Coll::AllGather, 2 * K},   {Coll::AllReduce, 16 << 20}};
  chorusComm reused;
  fakeComm(&reused, 2);
  bool neighboursDiffer = false;
  for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); ++i) {
    chorusComm fresh;
    fakeComm(&fresh, 2);
    const chorus::Plan want = chorus::commChoosePlan(&fresh, calls[i].first, calls[i].second);
    const chorus::Plan got = chorus::commChoosePlan(&reused, calls[i].first, calls[i].second);
    EXPECT_TRUE(same(got, want)) << "call " << i << ": " << chorus::algoName(got.algo) << "/"
                                 << got.pieceBytes << " B, want " << chorus::algoName(want.algo)
                                 << "/" << want.pieceBytes << " B";
    if (i > 0) {
      chorusComm prev;
      fakeComm(&prev, 2);
      neighboursDiffer |=
          !same(want, chorus::commChoosePlan(&prev, calls[i - 1].first, calls[i - 1].second));
    }
  }
  EXPECT_TRUE(neighboursDiffer) << "the sequence never changes plan: it tests nothing";
}

TEST(TuningModel, SharedKernelTcpReduceScatterAndAllGatherHalve) {
  // Recursive halving (reduce-scatter) and doubling (all-gather), in rank order, for a
  // power of two of ranks only, over tcp up to kLeadersMaxBytes. Measured with the ring and
  // halving forced against Open MPI (docs/PERF.md "Reduce-scatter and all-gather over
  // crowded tcp"): 0.4-0.7x the ring's time up to 64 KiB on 4 x 1, 2 x 2 and 4 x 2; from
  // 256 KiB 1.1-1.5x on 4 x 2, and the all-gather 1.2-1.3x on 4 x 1 at 4-64 MiB.
  const ModelShape s41 = crowdedTcpHosts(4, 1), s42 = crowdedTcpHosts(4, 2),
                   s22 = crowdedTcpHosts(2, 2);
  for (Coll c : {Coll::ReduceScatter, Coll::AllGather}) {
    for (const ModelShape& s : {s41, s42, s22}) {
      for (size_t b = 256; b <= chorus::kLeadersMaxBytes; b *= 2)
        EXPECT_EQ(best(s, b, chorus::defaultAlgos(s), 3, c), Algo::Halving) << s.nranks << " " << b;
      EXPECT_FALSE(chorus::algoAvailable(s, c, Algo::Halving, chorus::kLeadersMaxBytes + 1));
      for (size_t b = chorus::kLeadersMaxBytes * 2; b <= (size_t{256} << 20); b *= 4)
        EXPECT_EQ(best(s, b, chorus::defaultAlgos(s), 3, c), Algo::Ring) << s.nranks << " " << b;
    }
    // One host (forced only): any size.
    EXPECT_TRUE(chorus::algoAvailable(shmShape(4), c, Algo::Halving, size_t{1} << 30));
    // Not a power of two: the ring, whatever is asked.
    ModelShape s3 = crowdedTcpHosts(3, 1);
    EXPECT_FALSE(chorus::algoAvailable(s3, c, Algo::Halving, 1024));
    EXPECT_EQ(best(s3, 1024, RH, 3, c), c == Coll::AllGather ? Algo::Direct : Algo::Ring);
    EXPECT_TRUE(chorus::algoAvailable(s41, c, Algo::Halving, 1024));
    // Negative controls: one host, or a CPU per rank, keep the plain choice (halving is a
    // default candidate only where ranks crowd a kernel over tcp).
    for (const ModelShape& s : {shmShape(4), shmShape(8), tcpHosts(4, 1), tcpHosts(2, 2)})
      for (size_t b = 256; b <= (size_t{16} << 20); b *= 4)
        EXPECT_NE(best(s, b, chorus::defaultAlgos(s), 3, c), Algo::Halving) << b;
  }
}

// Four ranks on two hosts in reproducible mode, shared memory not joining every pair.
chorus::PlanKnobs reproducibleAcrossHosts() {
  const size_t K = 1024;
  chorus::PlanKnobs k;
  k.nranks = 4;
  k.slotBytes = 512 * K;
  k.allShm = false;
  k.llBytes = 64 * K;
  k.reproducible = true;
  return k;
}

}  // namespace

// Reproducible all-reduce across hosts (orderedPlan, shared memory not joining every pair):
// below 64 KiB the host leaders swap; at 64 KiB the leaders' rails where the hosts hold
// equal, contiguous runs of ranks (railsFit), the leaders' chain where they do not; above,
// the rails or the rank chain (a chain plan, not through the leaders), whatever the layout.
TEST(OrderedPlan, AcrossHostsThe64KiBCallTakesTheRailsWhereTheyFit) {
  const size_t K = 1024;
  chorus::PlanKnobs k = reproducibleAcrossHosts();
  chorus::PlanCall call;
  call.orderMatters = true;
  auto plan = [&](size_t bytes, bool railsFit) {
    k.railsFit = railsFit;
    chorus::Plan p;
    EXPECT_TRUE(chorus::orderedPlan(nullptr, k, Coll::AllReduce, bytes, call, &p)) << bytes;
    return p;
  };
  for (bool fit : {false, true}) {
    const chorus::Plan swap = plan(32 * K, fit);  // the leaders' swap
    EXPECT_TRUE(swap.viaLeaders) << fit;
    EXPECT_FALSE(swap.chain) << fit;
    const chorus::Plan above = plan(128 * K, fit);  // rails or rank chain (orderedRun decides)
    EXPECT_FALSE(above.viaLeaders) << fit;
    EXPECT_TRUE(above.chain) << fit;
  }
  const chorus::Plan leaders = plan(64 * K, false);  // the leaders' chain
  EXPECT_TRUE(leaders.viaLeaders);
  EXPECT_TRUE(leaders.chain);
  const chorus::Plan rails = plan(64 * K, true);  // the rails
  EXPECT_FALSE(rails.viaLeaders);
  EXPECT_TRUE(rails.chain);
  EXPECT_EQ(rails.proto, chorus::Proto::Simple);
}

// Where a host's ranks share CPUs (hostCpusShared), the 64 KiB call stays on the leaders'
// chain though the layout fits the rails; 128 KiB takes the rails (a chain plan, not
// through the leaders) either way.
TEST(OrderedPlan, AcrossHostsThe64KiBCallKeepsTheLeadersChainWhereAHostsRanksShareCpus) {
  const size_t K = 1024;
  chorus::PlanKnobs k = reproducibleAcrossHosts();
  k.railsFit = true;
  chorus::PlanCall call;
  call.orderMatters = true;
  auto plan = [&](size_t bytes, bool shared) {
    k.hostCpusShared = shared;
    chorus::Plan p;
    EXPECT_TRUE(chorus::orderedPlan(nullptr, k, Coll::AllReduce, bytes, call, &p)) << bytes;
    return p;
  };
  const chorus::Plan leaders = plan(64 * K, true);  // the leaders' chain
  EXPECT_TRUE(leaders.viaLeaders);
  EXPECT_TRUE(leaders.chain);
  EXPECT_EQ(leaders.proto, chorus::Proto::LL);
  const chorus::Plan rails = plan(64 * K, false);  // the rails
  EXPECT_FALSE(rails.viaLeaders);
  EXPECT_TRUE(rails.chain);
  for (bool shared : {false, true}) {
    const chorus::Plan above = plan(128 * K, shared);
    EXPECT_FALSE(above.viaLeaders) << shared;
    EXPECT_TRUE(above.chain) << shared;
    EXPECT_EQ(above.proto, chorus::Proto::Simple) << shared;
  }
}

// The schedules a reproducible all-reduce across hosts may choose among
// (orderedAllReduceWays, src/tuning/ordered_chooser.h): the same list for every size of a
// power-of-two bucket, whichever schedule orderedPlan picked there, and that one always in
// it, with the same plan (the chooser's `rails` at 128 KiB is orderedPlan's rails, and so
// on); none outside 16 KiB - 4 MiB, where the layout does not fit the rails, on shared
// memory alone, or under a CHORUS_ALGO / CHORUS_PROTO restriction.
TEST(OrderedPlan, AcrossHostsTheWaysAreOnePerBucketAndHoldThePlansOwn) {
  const size_t K = 1024;
  chorus::PlanKnobs k = reproducibleAcrossHosts();
  chorus::PlanCall call;
  call.orderMatters = true;
  for (bool shared : {false, true}) {
    k.railsFit = true;
    k.railsWidth = 2;
    k.hostCpusShared = shared;
    for (size_t lo = 16 * K; lo < 4096 * K; lo *= 2) {
      std::vector<chorus::OrderedWay> first;
      for (size_t bytes : {lo, lo + 64, lo + lo / 3, 2 * lo - 64}) {
        chorus::Plan base;
        ASSERT_TRUE(chorus::orderedPlan(nullptr, k, Coll::AllReduce, bytes, call, &base));
        chorus::OrderedWay ways[static_cast<int>(chorus::OrderedWay::Count)];
        const int n = chorus::orderedAllReduceWays(nullptr, k, bytes, base, ways);
        ASSERT_GE(n, 3) << bytes;
        std::vector<chorus::OrderedWay> these(ways, ways + n);
        if (first.empty()) first = these;
        EXPECT_EQ(these, first) << bytes << " B: not the bucket's list";
        int same = 0;
        for (int i = 0; i < n; ++i) {
          EXPECT_NE(ways[i], chorus::OrderedWay::Plan);
          const chorus::Plan w = chorus::orderedWayPlan(k, bytes, base, ways[i]);
          EXPECT_TRUE(w.ordered);
          if (w.viaLeaders == base.viaLeaders && w.chain == base.chain && w.proto == base.proto &&
              w.pieceBytes == base.pieceBytes)
            ++same;
        }
        EXPECT_GE(same, 1) << bytes << " B (shared " << shared << "): orderedPlan's own "
                           << chorus::planText(base) << " is not among the ways";
      }
    }
    chorus::Plan base;
    chorus::OrderedWay ways[static_cast<int>(chorus::OrderedWay::Count)];
    for (size_t bytes : {size_t{8 * K}, 16 * K - 4, 4096 * K, 64 * 1024 * K}) {
      ASSERT_TRUE(chorus::orderedPlan(nullptr, k, Coll::AllReduce, bytes, call, &base));
      EXPECT_EQ(chorus::orderedAllReduceWays(nullptr, k, bytes, base, ways), 1) << bytes;
    }
  }
  chorus::Plan base;
  chorus::OrderedWay ways[static_cast<int>(chorus::OrderedWay::Count)];
  k.railsFit = false;
  k.railsWidth = 0;
  ASSERT_TRUE(chorus::orderedPlan(nullptr, k, Coll::AllReduce, 256 * K, call, &base));
  EXPECT_EQ(chorus::orderedAllReduceWays(nullptr, k, 256 * K, base, ways), 1);
  k.railsFit = true;
  k.railsWidth = 2;
  k.allShm = true;
  ASSERT_TRUE(chorus::orderedPlan(nullptr, k, Coll::AllReduce, 256 * K, call, &base));
  EXPECT_EQ(chorus::orderedAllReduceWays(nullptr, k, 256 * K, base, ways), 1);
  EXPECT_EQ(chorus::orderedWayParse("auto"), chorus::kOrderedWayAuto);
  EXPECT_EQ(chorus::orderedWayParse("random"), chorus::kOrderedWayRandom);
  EXPECT_EQ(chorus::orderedWayParse("chain8"), static_cast<int>(chorus::OrderedWay::LeadersChain8));
  EXPECT_EQ(chorus::orderedWayParse("plan"), static_cast<int>(chorus::OrderedWay::Plan));
  EXPECT_EQ(chorus::orderedWayParse("ring"), -3);
}
