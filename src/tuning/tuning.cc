// tuning.cc — the cost model and the tables choosePlan reads (pure functions: the
// communicator keeps its tables, src/comm/plan.cc).
//
// Time of one call = hops on the critical path x hop latency + bytes through the busiest
// rank / bandwidth (+ the pipeline's fill: one piece per further hop). Latency and
// bandwidth come per transport (shm, tcp) and protocol (LL: data and flag in one line;
// Simple: slots), scaled when ranks outnumber cores. The formulas per algorithm are in
// predictUs; docs/ARCHITECTURE.md ("Tuning") lists them with the constants.
#include "src/tuning/tuning.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "src/core/debug.h"

namespace chorus {

const char* algoName(Algo a) {
  switch (a) {
    case Algo::Direct: return "direct";
    case Algo::Ring: return "ring";
    case Algo::Tree: return "tree";
    case Algo::Doubling: return "doubling";
    case Algo::Halving: return "halving";
  }
  return "?";
}

const char* protoName(Proto p) { return p == Proto::LL ? "LL" : "Simple"; }

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "", "a,b", "^a,b" over `names` (lower case) -> bit mask of allowed entries.
// `all`: what "" (and an exclusion list) starts from.
unsigned parseMask(const std::string& specIn, const char* const* names, int count, unsigned all,
                   std::string* bad) {
  std::string spec = lower(specIn);
  spec.erase(std::remove_if(spec.begin(), spec.end(),
                            [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
             spec.end());
  if (spec.empty()) return all;
  const bool exclude = spec[0] == '^';
  if (exclude) spec.erase(0, 1);
  unsigned named = 0;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    int found = -1;
    for (int i = 0; i < count; ++i)
      if (item == names[i]) found = i;
    if (found < 0) {
      if (bad) *bad += (bad->empty() ? "" : ",") + item;
      continue;
    }
    named |= 1u << found;
  }
  if (exclude) return all & ~named;
  return named ? named : all;  // nothing recognized: no restriction
}

const char* const kAlgoNames[] = {"direct", "ring", "tree", "doubling", "halving"};
const char* const kProtoNames[] = {"ll", "simple"};

int indexOf(const std::string& s, const char* const* names, int count) {
  const std::string l = lower(s);
  for (int i = 0; i < count; ++i)
    if (l == names[i]) return i;
  return -1;
}

// A collective by the name collName gives it (src/core/coll.cc), case-insensitive.
int collIndex(const std::string& s) {
  const std::string l = lower(s);
  for (int i = 0; i < kNumColls; ++i)
    if (l == collName(static_cast<Coll>(i))) return i;
  return -1;
}

}  // namespace

unsigned parseAlgoMask(const std::string& spec, std::string* bad, unsigned all) {
  return parseMask(spec, kAlgoNames, kNumAlgos, all, bad);
}

double ranksPerCore(const ModelShape& s) {
  return std::max({1.0, double(s.maxLocalRanks) / std::max(1, s.ncpus), s.kernelRanksPerCpu});
}

unsigned defaultAlgos(const ModelShape& s) {
  return kDefaultAlgos | (crowdedTcp(s) ? 1u << static_cast<int>(Algo::Doubling) |
                                              1u << static_cast<int>(Algo::Halving)
                                        : 0u);
}

unsigned parseProtoMask(const std::string& spec, std::string* bad) {
  return parseMask(spec, kProtoNames, kNumProtos, (1u << kNumProtos) - 1, bad);
}

// ---------------------------------------------------------------------------------------
// Tuning file
// ---------------------------------------------------------------------------------------

namespace {

struct NamedConst {
  const char* name;
  double ModelParams::*field;
};
const NamedConst kConsts[] = {
    {"simple_step_us", &ModelParams::simpleStepUs},
    {"ll_bw_factor", &ModelParams::llBwFactor},
    {"ll_peer_us", &ModelParams::llPeerUs},
    {"tree_bw_factor", &ModelParams::treeBwFactor},
    {"os_lat_factor", &ModelParams::osLatFactor},
    {"os_lat_us", &ModelParams::osLatUs},
    {"os_bw_factor", &ModelParams::osBwFactor},
    {"tcp_crowd_peer_us", &ModelParams::tcpCrowdPeerUs},
    {"tcp_crowd_halving_large", &ModelParams::tcpCrowdHalvingLarge},
};

bool number(const std::string& s, double* v) {
  if (s == "-") return true;  // keep
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !std::isfinite(d) || d < 0) return false;
  *v = d;
  return true;
}

}  // namespace

bool parseTuningText(const std::string& text, ModelParams* out, std::string* err) {
  ModelParams p = *out;
  std::stringstream in(text);
  std::string line;
  int lineno = 0;
  auto fail = [&](const std::string& why) {
    if (err) *err = "line " + std::to_string(lineno) + ": " + why + " (\"" + line + "\")";
    return false;
  };
  while (std::getline(in, line)) {
    ++lineno;
    std::string body = line.substr(0, line.find('#'));
    std::stringstream ls(body);
    std::vector<std::string> w;
    for (std::string x; ls >> x;) w.push_back(x);
    if (w.empty()) continue;
    const std::string key = lower(w[0]);
    if (key == "shm" || key == "tcp" || key == "tcp_leaders") {
      LinkCost& l = key == "shm" ? p.shm : key == "tcp" ? p.tcp : p.tcpLeaders;
      if (w.size() != 3 || !number(w[1], &l.latUs) || !number(w[2], &l.bwGBps) || l.bwGBps <= 0)
        return fail("expected: " + key + " LATENCY_US BANDWIDTH_GBPS");
      continue;
    }
    if (key == "tcp_tree_correction" || key == "tcp_crowd_ring_correction" ||
        key == "tcp_crowd_halving_correction") {
      double* f = key == "tcp_tree_correction"         ? p.tcpTreeCorrection
                  : key == "tcp_crowd_ring_correction" ? p.tcpCrowdRingCorrection
                                                       : p.tcpCrowdHalvingCorrection;
      if (w.size() != 1 + ModelParams::kTcpTreeBuckets)
        return fail("expected: " + key + " and " + std::to_string(ModelParams::kTcpTreeBuckets) +
                    " factors (16 KiB, 32 KiB, ..., 8 MiB)");
      for (int i = 0; i < ModelParams::kTcpTreeBuckets; ++i)
        if (!number(w[1 + i], &f[i]) || f[i] <= 0)
          return fail(key + ": factor " + std::to_string(i + 1) + " is not a positive number or -");
      continue;
    }
    if (key == "set") {
      if (w.size() != 3) return fail("expected: set NAME VALUE");
      bool ok = false;
      for (const NamedConst& c : kConsts)
        if (lower(w[1]) == c.name) ok = number(w[2], &(p.*(c.field)));
      if (!ok) return fail("unknown constant or bad value");
      continue;
    }
    const int coll = collIndex(w[0]);
    if (coll >= 0) {
      if (w.size() < 4) return fail("expected: COLL ALGO PROTO LATENCY_US BANDWIDTH_GBPS | off");
      const int algo = indexOf(w[1], kAlgoNames, kNumAlgos);
      const int proto = indexOf(w[2], kProtoNames, kNumProtos);
      if (algo < 0 || proto < 0) return fail("unknown algorithm or protocol");
      ModelParams::Override o{coll, algo, proto, false, {0, 1}};
      if (w.size() == 4 && lower(w[3]) == "off") {
        o.off = true;
      } else if (w.size() != 5 || w[3] == "-" || w[4] == "-" || !number(w[3], &o.cost.latUs) ||
                 !number(w[4], &o.cost.bwGBps) || o.cost.bwGBps <= 0) {
        return fail("expected: COLL ALGO PROTO LATENCY_US BANDWIDTH_GBPS | off");
      }
      p.overrides.push_back(o);
      continue;
    }
    return fail("unknown keyword " + w[0]);
  }
  *out = p;
  return true;
}

// ---------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------

namespace {

size_t pieceBytes(int nranks, size_t slotBytes, int perShare, size_t bytes) {
  // Smaller pieces pipeline better (the receiver starts sooner), larger ones pay the
  // per-slot synchronization less often. Aim for a few pieces per rank's share, never
  // below 16 KiB nor above the slot.
  const size_t share = bytes / static_cast<size_t>(std::max(1, nranks));
  size_t piece = std::max<size_t>(share / static_cast<size_t>(std::max(1, perShare)), 16 << 10);
  piece = std::min(piece, slotBytes);
  piece &= ~static_cast<size_t>(63);
  return std::max<size_t>(piece, 64);
}

}  // namespace

int piecesPerShare(const ModelShape& s) { return crowdedTcp(s) ? 1 : 4; }

size_t pieceBytesFor(const ModelShape& s, size_t bytes) {
  return pieceBytes(s.nranks, s.slotBytes, piecesPerShare(s), bytes);
}

size_t doublingMaxBytes(const ModelShape& s) {
  return leadersDoubling(s) ? std::max(s.llBytes, kLeadersMaxBytes) : s.llBytes;
}

namespace {
// Reduce-scatter by halving and all-gather by doubling run in rank order, for a power of two
// of ranks. Over tcp (the only place they are a default candidate, crowdedTcp) they pay up
// to kLeadersMaxBytes, the bound of the other small-message algorithms there: measured on 4
// x 1, 2 x 2 and 4 x 2 namespaced hosts (docs/PERF.md "Reduce-scatter and all-gather over
// crowded tcp"), 0.4-0.7x the ring's time up to 64 KiB; from 256 KiB 1.1-1.5x on 4 x 2
// (the first exchanges pair ranks on different hosts, every rank of a host at once, where
// the ring has one stream per host on tcp) and 1.2-1.3x for the all-gather on 4 x 1 at
// 4-64 MiB.
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
          int pow2 = 1, rounds = 0;
          while (pow2 * 2 <= s.nhosts) pow2 *= 2, ++rounds;
          const int steps = rounds + (s.nhosts > pow2 ? 2 : 0);
          const Hop shm = sharingCores(p, s, Proto::LL, p.shm.latUs, p.shm.bwGBps * p.llBwFactor);
          return 2 * (shm.lat + S / shm.bw) +
                 steps * (p.tcpLeaders.latUs + S / (p.tcpLeaders.bwGBps * 1e3));
        }
        int pow2 = 1, rounds = 0;
        while (pow2 * 2 <= n) pow2 *= 2, ++rounds;
        const int steps = rounds + (n > pow2 ? 2 : 0);
        return steps * (h.lat + p.llPeerUs + 2 * crowdStep + perCore * S / h.bw);
      }
      if (a == Algo::Halving) {
        // Recursive halving then doubling: 2 log2(pow2) pairwise exchanges moving the
        // ring's bytes, two more whole-vector hops when n is not a power of two.
        // With shm inside hosts of L ranks (a power of two, positions of a host adjacent)
        // the first log2(L) exchanges stay inside a host and move S (1 - 1/L) each way at
        // shm cost; only the rest, S/L (1 - L/n), cross tcp.
        int pow2 = 1, rounds = 0;
        while (pow2 * 2 <= n) pow2 *= 2, ++rounds;
        const bool odd = n > pow2;
        const int L = s.maxLocalRanks;
        double t;
        if (s.tcpHops && !s.allTcp && !odd && L > 1 && (L & (L - 1)) == 0 && n % L == 0 &&
            !findOverride(p, coll, a, Proto::Simple)) {
          int inside = 0;
          while ((1 << inside) < L) ++inside;
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
        int depth = 0;
        while ((2 << depth) <= n) ++depth;     // floor(log2 n)
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
        int steps = 0;
        while ((2 << steps) <= n) ++steps;
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

Algo bestAlgo(const ModelParams& p, const ModelShape& s, Coll coll, size_t bytes, unsigned algoMask,
              unsigned protoMask) {
  // Try the user's restriction; if it leaves nothing runnable at this size (CHORUS_ALGO=direct
  // for 256 MiB), keep only the protocol restriction, then nothing.
  const unsigned masks[3][2] = {
      {algoMask, protoMask}, {kDefaultAlgos, protoMask}, {kDefaultAlgos, ~0u}};
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
  for (int c = 0; c < kNumColls; ++c) {
    const Coll coll = static_cast<Coll>(c);
    auto best = [&](size_t b) { return bestAlgo(p, s, coll, b, algoMask, protoMask); };
    std::vector<Segment>& v = t.segs[c];
    // Scan sizes 1 B .. 2^44 B at 8 points per doubling; where the choice changes between
    // two points, find the exact switch by bisection.
    size_t prev = 0;  // the largest size known to pick `cur`
    Algo cur = best(0);
    for (int k = 0; k <= 44 * 8; ++k) {
      const size_t b = static_cast<size_t>(std::llround(std::pow(2.0, k / 8.0)));
      if (b <= prev) continue;
      while (best(b) != cur) {
        size_t lo = prev, hi = b;  // best(lo) == cur, best(hi) != cur
        while (hi - lo > 1) {
          const size_t mid = lo + (hi - lo) / 2;
          (best(mid) == cur ? lo : hi) = mid;
        }
        v.push_back({lo, cur});
        cur = best(hi);
        prev = hi;
      }
      prev = b;
    }
    v.push_back({std::numeric_limits<size_t>::max(), cur});
  }
  return t;
}

namespace {

std::string sizeText(size_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0)
    std::snprintf(buf, sizeof buf, "%zuG", b >> 30);
  else if (b >= (1u << 20) && b % (1u << 20) == 0)
    std::snprintf(buf, sizeof buf, "%zuM", b >> 20);
  else if (b >= 1024 && b % 1024 == 0)
    std::snprintf(buf, sizeof buf, "%zuK", b >> 10);
  else
    std::snprintf(buf, sizeof buf, "%zu", b);
  return buf;
}

}  // namespace

std::string formatPredictions(const ModelParams& p, const ModelShape& s, unsigned algoMask,
                              unsigned protoMask) {
  static const size_t kSizes[] = {8,       256,     4 << 10,  16 << 10, 64 << 10, 256 << 10,
                                  1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20};
  static const Coll kColls[] = {Coll::AllReduce, Coll::Broadcast, Coll::AllGather, Coll::Reduce,
                                Coll::ReduceScatter};
  const TuningTables t = buildTables(p, s, algoMask, protoMask);
  std::string out;
  char buf[64];
  out += "predicted us      ";
  for (size_t b : kSizes) std::snprintf(buf, sizeof buf, " %9s", sizeText(b).c_str()), out += buf;
  out += "\n";
  for (Coll c : kColls) {
    for (int i = 0; i < kNumAlgos; ++i) {
      const Algo a = static_cast<Algo>(i);
      bool any = false;
      std::string row;
      std::snprintf(buf, sizeof buf, "%-14s %-6s", collName(c), algoName(a));
      row += buf;
      for (size_t b : kSizes) {
        const double us = predictUs(p, s, c, a, b);
        if (us >= 0) any = true;
        if (us < 0)
          std::snprintf(buf, sizeof buf, " %9s", "-");
        else
          std::snprintf(buf, sizeof buf, " %9.*f", us < 100 ? 2 : 0, us);
        row += buf;
      }
      if (any) out += row + "\n";
    }
    std::string seg;
    const std::vector<Segment>& v = t.segs[static_cast<int>(c)];
    for (size_t k = 0; k < v.size(); ++k) {
      seg += algoName(v[k].algo);
      if (k + 1 < v.size()) seg += " <=" + sizeText(v[k].upTo) + " < ";
    }
    out += std::string(collName(c)) + " choice: " + seg + "\n";
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// From a communicator's facts to a plan (the communicator keeps the results: src/comm)
// ---------------------------------------------------------------------------------------

ModelParams loadModelParams(const std::string& path) {
  ModelParams p;
  if (path.empty()) return p;
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string err;
  if (!f)
    CHORUS_WARN(kLogTuning, "CHORUS_TUNING_FILE=%s cannot be read; using the defaults",
                path.c_str());
  else if (!parseTuningText(ss.str(), &p, &err))
    CHORUS_WARN(kLogTuning, "CHORUS_TUNING_FILE=%s: %s; using the defaults", path.c_str(),
                err.c_str());
  else
    CHORUS_INFO(kLogTuning, "tuning constants from %s", path.c_str());
  return p;
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

Plan choosePlan(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes) {
  const int perShare = tables != nullptr && k.nranks > 1 ? tables->piecesPerShare : 4;
  Plan p{Algo::Ring, Proto::Simple, pieceBytes(k.nranks, k.slotBytes, perShare, bytes),
         bytes >= k.ntBytes};
  if (k.nranks > 1 && tables != nullptr) {
    p.algo = tables->pick(coll, bytes);
    p.proto = protoOf(p.algo);
  }
  const bool twoRankRing = p.algo == Algo::Ring && k.nranks == 2 && k.slotBytes > 0;
  if (twoRankRing && (coll == Coll::AllReduce || (coll == Coll::AllGather && k.allShm))) {
    // Two ranks on the ring do the same steps at the same time (all-reduce: each sends its
    // half, then reduces the peer's, then copies the peer's result out; all-gather: each
    // writes its block, then reads the peer's), so over shared memory cutting a rank's half
    // into pieces overlaps nothing: every piece only adds handoffs (a cross-core round trip
    // each, and a wake-up when the waiter slept; all-gather np 2 at 256 KiB, four 32 KiB
    // pieces against one: 10.1 against 8.0-8.5 us where the cores are far apart,
    // docs/PERF.md). One piece per half, up to a slot. Over TCP the all-reduce's pieces do
    // overlap (the socket carries piece k+1 while piece k is reduced; 2 hosts x 1, 1 MiB:
    // 0.6 against 1.0 ms): a quarter of the half, at least tcpPieceMin (smaller pieces lost
    // at 256 KiB: 32 KiB ones took twice as long).
    const size_t half = (bytes / 2 + 63) & ~static_cast<size_t>(63);
    size_t piece = half;
    if (k.tcpPieceMin > 0 && tables != nullptr && !tables->sharedMemoryOnly)
      piece = std::min(half, std::max(k.tcpPieceMin, (half / 4 + 63) & ~static_cast<size_t>(63)));
    p.pieceBytes = std::min(piece, k.slotBytes);
  }
  if (p.algo == Algo::Halving && perShare == 1 && k.slotBytes > 0) {
    // Crowded tcp: whole halves per message, up to a slot (each message waits for its
    // receiver's turn on a CPU; measured, 4 x 1: 64 KiB pieces 1.1-1.9x slower).
    p.pieceBytes = k.slotBytes;
  }
  switch (coll) {
    case Coll::Scatter:
    case Coll::Gather:
    case Coll::AllToAll:
    case Coll::Send:
    case Coll::Recv:
      p.algo = Algo::Direct;
      p.proto = Proto::Simple;
      p.pieceBytes = k.slotBytes;
      break;
    default: break;
  }
  if (p.pieceBytes < 64) p.pieceBytes = 64;
  return p;
}

}  // namespace chorus
