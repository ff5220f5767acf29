// tables.cc — from a communicator's shape to its tables: the model's best algorithm per
// collective and size, reduced to exact switch sizes once per communicator.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "src/core/debug.h"
#include "src/tuning/tuning.h"

namespace chorus {

Algo bestAlgo(const ModelParams& p, const ModelShape& s, Coll coll, size_t bytes, unsigned algoMask,
              unsigned protoMask, bool* fallback) {
  // Try the user's restriction; if it leaves nothing runnable at this size (CHORUS_ALGO=direct
  // for 256 MiB), keep only the protocol restriction, then nothing.
  const unsigned masks[3][2] = {
      {algoMask, protoMask}, {kDefaultAlgos, protoMask}, {kDefaultAlgos, ~0u}};
  if (fallback) *fallback = false;
  for (const auto& m : masks) {
    double best = std::numeric_limits<double>::infinity();
    int pick = -1;
    for (int i = 0; i < kNumAlgos; ++i) {
      const Algo a = static_cast<Algo>(i);
      if (!(m[0] & (1u << i)) || !(m[1] & (1u << static_cast<int>(protoOf(a))))) continue;
      double t = predictUs(p, s, coll, a, bytes);
      if (t < 0) continue;
      // CHORUS_TREE_THRESHOLD (legacy): below it, tree beats ring whatever the model says.
      if (coll == Coll::AllReduce && s.treeBytes && bytes <= s.treeBytes && a == Algo::Tree) t = 0;
      if (t < best) best = t, pick = i;
    }
    if (pick >= 0) return static_cast<Algo>(pick);
    if (fallback) *fallback = true;
  }
  for (int i = 0; i < kNumAlgos; ++i)  // everything "off": whatever can run
    if (algoAvailable(s, coll, static_cast<Algo>(i), bytes)) return static_cast<Algo>(i);
  return Algo::Ring;
}

TuningTables buildTables(const ModelParams& p, const ModelShape& s, unsigned algoMask,
                         unsigned protoMask) {
  TuningTables t;
  t.piecesPerShare = piecesPerShare(s);
  t.sharedMemoryOnly = !s.tcpHops && !s.allTcp;
  t.algoMask = algoMask;
  t.protoMask = protoMask;
  for (int c = 0; c < kNumColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    // A choice is the algorithm and whether the restriction had to be dropped for it.
    auto best = [&](size_t b) {
      bool fb = false;
      const Algo a = bestAlgo(p, s, coll, b, algoMask, protoMask, &fb);
      return std::make_pair(a, fb);
    };
    std::vector<Segment>& v = t.segs[c];
    // Scan sizes 1 B .. 2^44 B at 8 points per doubling; where the choice changes between
    // two points, find the exact switch by bisection.
    size_t prev = 0;  // the largest size known to pick `cur`
    std::pair<Algo, bool> cur = best(0);
    for (int k = 0; k <= 44 * 8; ++k) {
      const size_t b = static_cast<size_t>(std::llround(std::pow(2.0, k / 8.0)));
      if (b <= prev) continue;
      while (best(b) != cur) {
        size_t lo = prev, hi = b;  // best(lo) == cur, best(hi) != cur
        while (hi - lo > 1) {
          const size_t mid = lo + (hi - lo) / 2;
          (best(mid) == cur ? lo : hi) = mid;
        }
        v.push_back({lo, cur.first, cur.second});
        cur = best(hi);
        prev = hi;
      }
      prev = b;
    }
    v.push_back({std::numeric_limits<size_t>::max(), cur.first, cur.second});
  }
  return t;
}

ModelShape shapeFrom(const ShapeInputs& in) {
  ModelShape s;
  const int n = in.nranks;
  s.nranks = n;
  std::vector<uint64_t> hosts = in.hostOfRank;
  std::sort(hosts.begin(), hosts.end());
  s.nhosts = 0;
  s.maxLocalRanks = 0;
  for (size_t i = 0; i < hosts.size();) {
    size_t j = i;
    while (j < hosts.size() && hosts[j] == hosts[i]) ++j;
    ++s.nhosts;
    s.maxLocalRanks = std::max(s.maxLocalRanks, static_cast<int>(j - i));
    i = j;
  }
  if (s.nhosts == 0) s.nhosts = 1, s.maxLocalRanks = n;
  s.ncpus = std::max(1, in.minCpus);
  s.kernelRanksPerCpu = std::max(1.0, in.kernelRanksPerCpu);
  bool shm = in.shmHops, other = in.otherHops;
  if (!shm && !other) {  // not connected (yet): infer
    other = s.nhosts > 1 || in.shmDisabled;
    shm = !in.shmDisabled && s.maxLocalRanks > 1;
  }
  s.tcpHops = other;
  s.allTcp = other && !shm;
  s.llBytes = in.llBytes;
  s.slotBytes = in.slotBytes ? in.slotBytes : s.slotBytes;
  s.treeBytes = in.treeBytes;
  return s;
}

TuningTables tablesFor(const ModelParams& p, const ModelShape& s, const std::string& algo,
                       const std::string& proto, bool announce) {
  std::string badA, badP;
  const unsigned am = parseAlgoMask(algo, &badA, defaultAlgos(s));
  const unsigned pm = parseProtoMask(proto, &badP);
  if (!badA.empty())
    CHORUS_WARN(kLogTuning, "CHORUS_ALGO=%s: unknown %s ignored (direct, ring, tree)", algo.c_str(),
                badA.c_str());
  if (!badP.empty())
    CHORUS_WARN(kLogTuning, "CHORUS_PROTO=%s: unknown %s ignored (LL, Simple)", proto.c_str(),
                badP.c_str());
  if (announce && logEnabled(LogLevel::Info, kLogTuning)) {
    CHORUS_INFO(kLogTuning,
                "cost model: %d ranks, %d hosts, <=%d ranks/host on %d cpus, %.2f ranks per "
                "cpu of the most crowded kernel, %s; shm %.2f us "
                "%.2f GB/s, tcp %.2f us %.2f GB/s; CHORUS_ALGO=%s CHORUS_PROTO=%s",
                s.nranks, s.nhosts, s.maxLocalRanks, s.ncpus, s.kernelRanksPerCpu,
                s.allTcp    ? "all hops tcp"
                : s.tcpHops ? "shm + tcp hops"
                            : "shm only",
                p.shm.latUs, p.shm.bwGBps, p.tcp.latUs, p.tcp.bwGBps, algo.c_str(), proto.c_str());
    std::stringstream ss(formatPredictions(p, s, am, pm));
    for (std::string line; std::getline(ss, line);) CHORUS_INFO(kLogTuning, "%s", line.c_str());
  }
  return buildTables(p, s, am, pm);
}

}  // namespace chorus
