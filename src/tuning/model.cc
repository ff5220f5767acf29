// model.cc — the cost model: what can run, and how long it takes (pure functions).
//
// Time of one call = hops on the critical path x hop latency + bytes through the busiest
// rank / bandwidth (+ the pipeline's fill: one piece per further hop). Latency and
// bandwidth come per transport (shm, tcp) and protocol (LL: data and flag in one line;
// Simple: slots), scaled when ranks outnumber cores. The formulas per algorithm are in
// predictUs; docs/ARCHITECTURE.md ("Tuning") lists them with the constants.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "src/core/bits.h"
#include "src/tuning/tuning.h"

namespace chorus {

double ranksPerCore(const ModelShape& s) {
  return std::max({1.0, double(s.maxLocalRanks) / std::max(1, s.ncpus), s.kernelRanksPerCpu});
}

unsigned defaultAlgos(const ModelShape& s) {
  return kDefaultAlgos | (crowdedTcp(s) ? 1u << static_cast<int>(Algo::Doubling) |
                                              1u << static_cast<int>(Algo::Halving)
                                        : 0u);
}

size_t pieceBytesOf(int nranks, size_t slotBytes, int perShare, size_t bytes) {
  // Smaller pieces pipeline better (the receiver starts sooner), larger ones pay the
  // per-slot synchronization less often. Aim for a few pieces per rank's share, never
  // below 16 KiB nor above the slot.
  const size_t share = bytes / static_cast<size_t>(std::max(1, nranks));
  size_t piece = std::max<size_t>(share / static_cast<size_t>(std::max(1, perShare)), 16 << 10);
  piece = std::min(piece, slotBytes);
  piece &= ~static_cast<size_t>(63);
  return std::max<size_t>(piece, 64);
}

int piecesPerShare(const ModelShape& s) { return crowdedTcp(s) ? 1 : 4; }

size_t pieceBytesFor(const ModelShape& s, size_t bytes) {
  return pieceBytesOf(s.nranks, s.slotBytes, piecesPerShare(s), bytes);
}

size_t doublingMaxBytes(const ModelShape& s) {
  return leadersDoubling(s) ? std::max(s.llBytes, kLeadersMaxBytes) : s.llBytes;
}

namespace {
// Reduce-scatter by halving and all-gather by doubling run in rank order, for a power of two
// of ranks. Over tcp (the only place they are a default candidate, crowdedTcp) they pay up
// to kLeadersMaxBytes, the bound of the other small-message algorithms there: measured on 4
// x 1, 2 x 2 and 4 x 2 namespaced hosts (docs/PERF.md#perf-rs-ag-crowded-tcp), 0.4-0.7x the ring's
// time up to 64 KiB; from 256 KiB 1.1-1.5x on 4 x 2 (the first exchanges pair ranks on different
// hosts, every rank of a host at once, where the ring has one stream per host on tcp) and 1.2-1.3x
// for the all-gather on 4 x 1 at 4-64 MiB.
bool halvingGathers(const ModelShape& s, size_t bytes) {
  return halvingFits(s.nranks) && (!s.tcpHops || bytes <= kLeadersMaxBytes);
}
}  // namespace

bool algoAvailable(const ModelShape& s, Coll coll, Algo a, size_t bytes) {
  switch (coll) {
    case Coll::AllReduce:
      if (a == Algo::Doubling) return bytes <= doublingMaxBytes(s);
      return a != Algo::Direct || bytes <= s.llBytes;
    case Coll::Broadcast: return a == Algo::Ring || (a == Algo::Direct && bytes <= s.llBytes);
    case Coll::AllGather:
      return a == Algo::Ring || (a == Algo::Direct && bytes <= s.llBytes) ||
             (a == Algo::Halving && halvingGathers(s, bytes));
    case Coll::Reduce: return a == Algo::Ring;
    case Coll::ReduceScatter:
      return a == Algo::Ring || (a == Algo::Halving && halvingGathers(s, bytes));
    default: return a == Algo::Direct;
  }
}

namespace {

struct Hop {
  double lat;  // µs
  double bw;   // bytes per µs
};

const ModelParams::Override* findOverride(const ModelParams& p, Coll c, Algo a, Proto pr) {
  for (const auto& o : p.overrides)
    if (o.coll == static_cast<int>(c) && o.algo == static_cast<int>(a) &&
        o.proto == static_cast<int>(pr))
      return &o;
  return nullptr;
}

// A hop of `lat` µs and `bw` GB/s where ranks share a core: each waits for the others to
// be scheduled, and (Simple) gets a share of the core's copy rate.
Hop sharingCores(const ModelParams& p, const ModelShape& s, Proto pr, double lat, double bw) {
  const double perCore = ranksPerCore(s);
  if (perCore > 1) {
    lat = lat * (1 + p.osLatFactor * (perCore - 1));
    if (pr == Proto::Simple) bw = bw / (1 + p.osBwFactor * (perCore - 1));
  }
  return {lat, bw * 1e3};
}

// The cost of one hop for this algorithm on this communicator.
Hop hopCost(const ModelParams& p, const ModelShape& s, Coll c, Algo a) {
  const Proto pr = protoOf(a);
  const int n = std::max(1, s.nranks);
  double lat, bw;
  if (const ModelParams::Override* o = findOverride(p, c, a, pr)) {
    lat = o->cost.latUs;
    bw = o->cost.bwGBps;
  } else {
    if (s.allTcp) {
      lat = p.tcp.latUs;
    } else if (s.tcpHops) {
      // A direct exchange waits for its slowest peer; a ring or a tree crosses each host
      // boundary about once per lap.
      const double f = a == Algo::Direct ? 1.0 : std::min(1.0, double(s.nhosts) / n);
      lat = f * p.tcp.latUs + (1 - f) * p.shm.latUs;
    } else {
      lat = p.shm.latUs;
    }
    bw = s.tcpHops || s.allTcp ? std::min(p.tcp.bwGBps, p.shm.bwGBps) : p.shm.bwGBps;
    if (pr == Proto::Simple) lat += p.simpleStepUs;
    if (pr == Proto::LL) bw *= p.llBwFactor;
  }
  return sharingCores(p, s, pr, lat, bw);
}

// A size correction (ModelParams::tcpTreeCorrection, tcpCrowdRingCorrection) at `bytes`,
// interpolated in log2(bytes).
double correctionAt(const double* f, size_t bytes) {
  const double x = std::log2(std::max<double>(1.0, static_cast<double>(bytes))) - 14.0;
  const int last = ModelParams::kTcpTreeBuckets - 1;
  if (x <= 0) return f[0];
  if (x >= last) return f[last];
  const int i = static_cast<int>(x);
  const double t = x - i;
  return f[i] * (1 - t) + f[i + 1] * t;
}

}  // namespace

double predictUs(const ModelParams& p, const ModelShape& s, Coll coll, Algo a, size_t bytes) {
  if (!algoAvailable(s, coll, a, bytes)) return -1;
  if (const ModelParams::Override* o = findOverride(p, coll, a, protoOf(a)))
    if (o->off) return -1;
  const int n = std::max(1, s.nranks);
  if (n == 1) return 0;
  const Hop h = hopCost(p, s, coll, a);
  const double S = static_cast<double>(bytes);
  const double piece = static_cast<double>(pieceBytesFor(s, bytes));
  const double share = std::ceil(S / n);
  // A direct exchange waits for every peer; when ranks share cores, for each to be
  // scheduled as well.
  const double perCore = ranksPerCore(s);
  // Over tcp on a crowded kernel, each peer's message also waits for its turn on a CPU
  // (ModelParams::tcpCrowdPeerUs), those on the same host excepted.
  const bool crowdTcp = crowdedTcp(s);
  const int remotePeers = s.allTcp ? n - 1 : n - std::max(1, s.maxLocalRanks);
  const double directLat = h.lat + p.llPeerUs * (n - 2) + p.osLatUs * (perCore - 1) * (n - 1) +
                           (crowdTcp ? p.tcpCrowdPeerUs * (perCore - 1) * remotePeers : 0.0);
  // All-reduce on crowded cores: every step that waits for one particular peer waits for
  // that peer's turn on its core. A direct exchange pays for that about twice in all (every
  // rank sends, then every rank reads what all sent: the osLatUs term above), so one
  // dependent step costs half of it. Measured, np 8 on 2 CPUs, 8 B-4 KiB: direct 30-50 us,
  // recursive doubling (3 steps) 50-85, tree 145-275, ring (14 steps) 145-165.
  const double crowdStep = 0.5 * p.osLatUs * (perCore - 1) * (n - 1);
  switch (coll) {
    case Coll::AllReduce:
      if (a == Algo::Direct) return directLat + (n - 1) * S / h.bw;
      if (a == Algo::Doubling) {
        // log2(pow2) swaps of the whole vector, two more hops when n is not a power of two,
        // each waiting for one peer. On crowded cores each step waits as long as a whole
        // direct exchange and its copies share the core (measured, np 4 and 8 on 2 CPUs:
        // 1.5-5x slower than direct, even at best no faster), so there it never wins. Only
        // considered when CHORUS_ALGO names it (kDefaultAlgos).
        if (leadersDoubling(s) && !findOverride(p, coll, a, Proto::LL)) {
          // One leader per host: a shm hop in and one out, then the leaders' rounds over
          // tcp at ModelParams::tcpLeaders (measured, crowding included).
          const int rounds = floorLog2(static_cast<uint64_t>(s.nhosts));
          const int steps = rounds + (s.nhosts > (1 << rounds) ? 2 : 0);
          const Hop shm = sharingCores(p, s, Proto::LL, p.shm.latUs, p.shm.bwGBps * p.llBwFactor);
          return 2 * (shm.lat + S / shm.bw) +
                 steps * (p.tcpLeaders.latUs + S / (p.tcpLeaders.bwGBps * 1e3));
        }
        const int rounds = floorLog2(static_cast<uint64_t>(n));
        const int steps = rounds + (n > (1 << rounds) ? 2 : 0);
        return steps * (h.lat + p.llPeerUs + 2 * crowdStep + perCore * S / h.bw);
      }
      if (a == Algo::Halving) {
        // Recursive halving then doubling: 2 log2(pow2) pairwise exchanges moving the
        // ring's bytes, two more whole-vector hops when n is not a power of two.
        // With shm inside hosts of L ranks (a power of two, positions of a host adjacent)
        // the first log2(L) exchanges stay inside a host and move S (1 - 1/L) each way at
        // shm cost; only the rest, S/L (1 - L/n), cross tcp.
        const int rounds = floorLog2(static_cast<uint64_t>(n));
        const int pow2 = 1 << rounds;
        const bool odd = n > pow2;
        const int L = s.maxLocalRanks;
        double t;
        if (s.tcpHops && !s.allTcp && !odd && L > 1 && (L & (L - 1)) == 0 && n % L == 0 &&
            !findOverride(p, coll, a, Proto::Simple)) {
          const int inside = floorLog2(static_cast<uint64_t>(L));  // L is a power of two
          // Simple hops as hopCost prices them, one over shm and one over tcp.
          const Hop shm =
              sharingCores(p, s, Proto::Simple, p.shm.latUs + p.simpleStepUs, p.shm.bwGBps);
          const Hop tcp = sharingCores(p, s, Proto::Simple, p.tcp.latUs + p.simpleStepUs,
                                       std::min(p.tcp.bwGBps, p.shm.bwGBps));
          t = 2 * inside * (shm.lat + crowdStep) + 2 * (rounds - inside) * (tcp.lat + crowdStep) +
              2.0 * (1 - 1.0 / L) * S / shm.bw + 2.0 * (1.0 / L - 1.0 / n) * S / tcp.bw;
        } else {
          t = (2 * rounds + (odd ? 2 : 0)) * (h.lat + crowdStep) +
              (2.0 * (pow2 - 1) / pow2 + (odd ? 2.0 : 0.0)) * S / h.bw;
        }
        if (!crowdTcp) return t;
        t *= 1 + (correctionAt(p.tcpCrowdHalvingCorrection, bytes) - 1) * (perCore - 1);
        return bytes > (size_t{16} << 20) ? t * p.tcpCrowdHalvingLarge : t;
      }
      if (a == Algo::Ring) {
        const int steps = 2 * (n - 1);
        // Every rank works on its pieces at once: no pipeline fill to pay.
        const double t = steps * (h.lat + crowdStep) + 2.0 * (n - 1) / n * S / h.bw;
        return crowdTcp
                   ? t * (1 + (correctionAt(p.tcpCrowdRingCorrection, bytes) - 1) * (perCore - 1))
                   : t;
      } else {
        const int depth = floorLog2(static_cast<uint64_t>(n));
        const int k = std::min(2, n - 1) + 1;  // a node's children + its parent
        const double t = 2 * depth * h.lat +
                         (k * p.treeBwFactor * S + (2 * depth - 1) * std::min(piece, S)) / h.bw;
        // Crowded: the two trees go up and down one after the other, 4 x depth waits.
        // (The tcp correction was fitted on hosts with a CPU per rank: not where crowded.)
        return (s.allTcp && !crowdTcp ? t * correctionAt(p.tcpTreeCorrection, bytes) : t) +
               4 * depth * crowdStep;
      }
    case Coll::Broadcast:
    case Coll::Reduce:
      if (a == Algo::Direct) return directLat + (n - 1) * S / h.bw;
      return (n - 1) * h.lat + (S + (n - 2) * std::min(piece, S)) / h.bw;
    case Coll::AllGather:
    case Coll::ReduceScatter:
      if (a == Algo::Direct) return directLat + 2.0 * (n - 1) / n * S / h.bw;
      if (a == Algo::Halving) {
        // log2(n) pairwise exchanges (halves down, or doublings up) moving the ring's bytes.
        const int steps = floorLog2(static_cast<uint64_t>(n));
        return steps * (h.lat + crowdStep) + (n - 1.0) / n * S / h.bw;
      }
      // Each of the ring's n-1 steps waits for one peer, as the all-reduce's ring does.
      return (n - 1) * (h.lat + (crowdTcp ? crowdStep : 0.0)) +
             ((n - 1.0) / n * S + (n - 2) * std::min(piece, share)) / h.bw;
    case Coll::Barrier: return 2 * directLat;
    default:  // scatter, gather, all-to-all, send, recv: n-1 exchanges of a share
      return (n - 1) * (h.lat + share / h.bw);
  }
}

}  // namespace chorus
