// tuning.h — picks the algorithm, protocol and piece size for one call.
//
// A cost model (latency + bytes / bandwidth per hop, per transport and protocol; see
// docs/ARCHITECTURE.md "Tuning") predicts the time of every algorithm a collective has, for
// the communicator's shape (ranks, hosts, ranks per host, cores, whether TCP carries any
// hop). For each communicator the model is evaluated once and reduced to a few size
// thresholds per collective, so choosePlan itself is a handful of compares. Everything
// here is a pure function of plain structs; the communicator keeps its tables
// (src/comm/plan.cc).
// CHORUS_ALGO / CHORUS_PROTO restrict the choice (a list, or ^list to exclude), and
// CHORUS_TUNING_FILE replaces the model's constants.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chorus.h"
#include "src/core/coll.h"

namespace chorus {

// Doubling: recursive doubling (LL); Halving: recursive halving + doubling (Rabenseifner's)
enum class Algo : int { Direct, Ring, Tree, Doubling, Halving };
enum class Proto : int { LL, Simple };
constexpr int kNumAlgos = 5;
constexpr unsigned kDefaultAlgos = 0x7;  // direct, ring, tree (parseAlgoMask)
constexpr int kNumProtos = 2;
const char* algoName(Algo a);
const char* protoName(Proto p);

struct Plan {
  Algo algo;
  Proto proto;
  size_t pieceBytes;  // bytes moved per primitive step (<= slot size)
  bool streaming;     // write the user's output with non-temporal stores
};

// ---------------------------------------------------------------------------------------
// The model, as pure functions (unit-tested without processes).
// ---------------------------------------------------------------------------------------

/// Cost of one hop on a transport: a fixed latency plus bytes / bandwidth.
struct LinkCost {
  double latUs;
  double bwGBps;  // GB/s = 1e3 bytes per microsecond
};

/// Every constant of the model. Defaults are measured on the 2-core development machine
/// (docs/PERF.md "Tuning: auto vs forced"); CHORUS_TUNING_FILE may replace any of them.
struct ModelParams {
  LinkCost shm{0.38, 6.5};    // LL hop latency; per-rank copy rate of a slot pipeline
  LinkCost tcp{45.0, 1.0};    // one message over a socket; per-rank stream rate
  double simpleStepUs = 1.0;  // extra per step of the slot (Simple) protocol over LL
  double llBwFactor = 0.71;   // LL moves 8 data bytes per 16-byte item, but skips a copy
  double llPeerUs = 0.15;     // each further peer of a direct exchange
  double treeBwFactor = 0.6;  // tree bytes per rank: (children + 1) * S * this
  double osLatFactor = 0.0;   // hop latency x (1 + this * (ranks per core - 1))
  double osLatUs = 1.0;       // direct: + this per peer per extra rank per core
  double osBwFactor = 1.0;    // Simple bandwidth / (1 + this * (ranks per core - 1))
  /// All-reduce tree over all-TCP hops: the predicted time times a factor fitted to
  /// measurements per power-of-two size, 16 KiB (index 0) to 8 MiB (index 9), interpolated
  /// in log2(size) between them and held flat outside (as NCCL corrects its tree by size).
  /// Each factor is the measured tree/ring time over the model's own tree/ring. Refitted
  /// after issue 17's second pass (the waiting caller reads the sockets itself): on two
  /// namespaced hosts the tree now takes 1.37-1.85x the ring's time at every size from
  /// 16 KiB, where before it had kept up with the ring up to 512 KiB (docs/ARCHITECTURE.md
  /// "Tuning", docs/PERF.md "Tuning over tcp after the second pass").
  /// Where one kernel runs more of the job's ranks than it has CPUs (namespaced hosts or
  /// containers on one machine, src/comm/hostid.h) and hops go over tcp, every message
  /// waits for its receiver's turn on a CPU, and for the sockets' work in the kernel.
  /// Fitted on 4 namespaced hosts x 1 rank and 2 x 2 on 2 CPUs (perf/fit_tcp_crowd.py,
  /// perf/data/tcp_crowd.csv; docs/PERF.md "Ranks that share a kernel"), each times the
  /// extra ranks per CPU: a direct exchange pays this per peer over tcp (its exchanges
  /// all wait for every peer at once; recursive doubling waits for one per step) ...
  double tcpCrowdPeerUs = 24.7;
  /// One round of recursive doubling between host leaders over tcp (leadersDoubling): set
  /// by hand from 2 namespaced hosts x 2 ranks on 2 CPUs (docs/PERF.md "fifth stop:
  /// leaders"): 15.4-18.7 us from 8 B to 8 KiB, 25-35 / 46-52 / 70-78 / 134-165 us at 32 /
  /// 64 / 128 / 256 KiB, whole call. The model's tcp hop (45 us, 1 GB/s per rank) predicts
  /// 3x that, and would leave 32-128 KiB to halving, measured 1.3-2.6x slower there.
  LinkCost tcpLeaders{14.0, 1.9};
  static constexpr int kTcpTreeBuckets = 10;
  double tcpTreeCorrection[kTcpTreeBuckets] = {1.22, 1.23, 1.24, 1.22, 1.2,
                                               1.13, 1.06, 1.06, 1.07, 1.27};
  /// ... and the ring's time, over tcp on a crowded kernel, is multiplied by a factor per
  /// size (the same buckets and interpolation as tcpTreeCorrection, times the extra ranks
  /// per CPU; there the tree's own correction is left out). Fitted (perf/fit_tcp_crowd.py)
  /// so that the model's choice among ring, tree and halving is the best measured in both
  /// shapes at once, with one tcp socket per peer (CHORUS_NSOCKS=auto): on 4 x 1 the ring
  /// from 64 KiB on, on 2 x 2 the ring up to 2 MiB, halving from 2 MiB.
  double tcpCrowdRingCorrection[kTcpTreeBuckets] = {1.41, 0.96, 0.50, 0.75, 1.00,
                                                    0.96, 0.92, 0.92, 0.92, 0.92};
  /// ... and so is recursive halving + doubling's (Algo::Halving). Set by hand from forced
  /// runs in perf/compare_tcp.sh's own protocol (a fresh process per sweep, -n 5 -w 1 from
  /// 256 KiB; -n 200 below) once the waiting caller kept the sockets for its whole yield
  /// (CHORUS_TCP_BUSY_POLL_US=auto) and the tcp slot rings and 2 x 2's shm segments were
  /// faulted in at connect: 4 x 1, halving 115-133 us at 16-64 KiB against the tree's
  /// 114-248 and the ring's 169-208, 436 / 1439 us at 256 KiB / 1 MiB against the ring's
  /// 506 / 2011, and in 5 more rounds 351 / 1233 / 5791 us at 256 KiB / 1 / 4 MiB against
  /// the ring's 450 / 1361 / 6833, level with it at 16 MiB; 2 x 2, halving 69-100 us at
  /// 32-128 KiB, 164 / 441 / 2896 us at 256 KiB / 1 / 4 MiB against the ring's 313 / 987 /
  /// 4082 (docs/PERF.md "fourth stop: tcp crowd"). The fit of perf/fit_tcp_crowd.py (its
  /// input, -n 20 -w 5 from 16 KiB, had halving's first calls at every size paying page
  /// faults then) had put 3.0 at 128 KiB-1 MiB ...
  double tcpCrowdHalvingCorrection[kTcpTreeBuckets] = {1.30, 0.80, 0.50, 0.80, 0.80,
                                                       0.80, 0.80, 0.80, 0.85, 1.00};
  /// ... and times this above 16 MiB, where it was not fitted: measured on 2 x 2, 64 MiB
  /// 1.1x and 256 MiB 1.7x the tree's time, but 0.5-1x the ring's (64 MiB 54 against
  /// 102-125 ms; 256 MiB 342 against 214-425), and the plain model prices the tree's shm
  /// bytes at tcp's rate, so the tree is out of its reach there: 1.5 keeps halving above
  /// the ring on 2 x 2 (4 had picked the ring: 0.39-0.47x the old build's tree at
  /// 64-256 MiB) and changes nothing on 4 x 1 (the ring).
  double tcpCrowdHalvingLarge = 1.5;
  /// Per (collective, algorithm, protocol): replace the hop cost, or rule the combination out.
  struct Override {
    int coll;
    int algo;
    int proto;
    bool off;
    LinkCost cost;
  };
  std::vector<Override> overrides;
};

/// What the model needs to know about a communicator; identical on every rank (so every
/// rank picks the same algorithm).
struct ModelShape {
  int nranks = 1;
  int nhosts = 1;
  int maxLocalRanks = 1;  // most ranks on one host
  int ncpus = 1;          // usable cores per host (assumed equal on every host)
  bool tcpHops = false;   // some ring neighbours talk over TCP
  bool allTcp = false;    // every hop is TCP (CHORUS_SHM_DISABLE=1, or one rank per host)
  size_t llBytes = 16 << 10;
  size_t slotBytes = 512 << 10;
  size_t treeBytes = 0;  // CHORUS_TREE_THRESHOLD: all-reduce prefers tree up to it
  /// Ranks per CPU on the most crowded kernel of the job (1: none has more ranks than
  /// CPUs): hosts that share a kernel share its CPUs (src/comm/hostid.h).
  double kernelRanksPerCpu = 1.0;
};

/// Ranks per core the model charges for: a host's ranks on its CPUs, or, where hosts share
/// a kernel, that kernel's ranks on its CPUs, whichever is more crowded (>= 1).
double ranksPerCore(const ModelShape& s);
/// Hops over tcp between ranks that queue for the same CPUs (see ModelParams::tcpCrowd*).
inline bool crowdedTcp(const ModelShape& s) { return s.tcpHops && ranksPerCore(s) > 1.0; }
/// Whether reduce-scatter by recursive halving and all-gather by recursive doubling (rank
/// order, no folding) can run on `nranks` ranks: a power of two of them.
inline bool halvingFits(int nranks) { return nranks > 1 && (nranks & (nranks - 1)) == 0; }
/// Recursive doubling runs between one leader per host, the other ranks handing their input
/// to it over shared memory (src/algorithms/allreduce.cc, allReduceLeaders): several hosts,
/// some with several ranks.
inline bool leadersDoubling(const ModelShape& s) {
  return s.nhosts > 1 && s.nhosts < s.nranks && !s.allTcp;
}
/// Largest all-reduce recursive doubling carries: CHORUS_LL_THRESHOLD, or kLeadersMaxBytes
/// between host leaders (leadersDoubling). Measured on 2 x 2 crowded namespaced hosts
/// (docs/PERF.md "fifth stop: leaders"): in steady runs (-n 100) faster than halving up to
/// 512 KiB (32-128 KiB: 25-78 against 40-115 us), slower at 1 MiB; in perf/compare_tcp.sh's
/// large sweep (-n 5 -w 1: the first calls count) level with Open MPI at 256 KiB where
/// halving had been 1.3-1.5x ahead. So up to 128 KiB.
constexpr size_t kLeadersMaxBytes = 128 << 10;
size_t doublingMaxBytes(const ModelShape& s);
/// The algorithms the model chooses from when CHORUS_ALGO is empty (and what "^name"
/// starts from): kDefaultAlgos, plus recursive doubling where crowdedTcp (measured there:
/// 4 x 1 and 2 x 2 namespaced hosts, 8 B-8 KiB, 0.4-0.7x direct's time).
unsigned defaultAlgos(const ModelShape& s);

/// Bit i set = Algo i (or Proto i) allowed. Parses "", "ring", "ring,tree", "^tree",
/// "^tree,direct" (case-insensitive); unknown names are reported in *bad (if given) and
/// ignored. "" allows every protocol and the default algorithms (kDefaultAlgos); an
/// exclusion ("^tree") starts from those. Recursive doubling is opt-in: only a list that
/// names it ("doubling", "direct,doubling") lets the model pick it (measured slower than
/// direct wherever it could be measured, docs/PERF.md).
unsigned parseAlgoMask(const std::string& spec, std::string* bad = nullptr,
                       unsigned all = kDefaultAlgos);
unsigned parseProtoMask(const std::string& spec, std::string* bad = nullptr);

/// Reads a tuning file (see docs/ENV.md, CHORUS_TUNING_FILE) into p. False with *err set
/// on the first malformed line (p is then left as it was).
bool parseTuningText(const std::string& text, ModelParams* p, std::string* err);

/// Piece size the algorithms use for `bytes` (shared by the model and choosePlan): a
/// quarter of a rank's share (piecesPerShare), 16 KiB to the slot size.
size_t pieceBytesFor(const ModelShape& s, size_t bytes);
/// Pieces per rank's share: 4, or 1 over tcp on a crowded kernel (crowdedTcp), where every
/// piece waits for its receiver's turn on a CPU (measured, 256 KiB all-reduce on 4 x 1 and
/// 2 x 2 namespaced hosts: 0.3-0.6x the time of a quarter share; docs/PERF.md).
int piecesPerShare(const ModelShape& s);

/// Whether the code can run this (collective, algorithm) at this size at all.
bool algoAvailable(const ModelShape& s, Coll coll, Algo a, size_t bytes);
/// The protocol an algorithm runs with.
inline Proto protoOf(Algo a) {
  return a == Algo::Direct || a == Algo::Doubling ? Proto::LL : Proto::Simple;
}

/// Predicted microseconds for one call; a negative value means "cannot run".
double predictUs(const ModelParams& p, const ModelShape& s, Coll coll, Algo a, size_t bytes);

/// Per collective, sorted segments: sizes up to `upTo` use `algo`.
struct Segment {
  size_t upTo;
  Algo algo;
};
struct TuningTables {
  std::vector<Segment> segs[kNumColls];
  int piecesPerShare = 4;        ///< piecesPerShare of the shape the tables were built for
  bool sharedMemoryOnly = true;  ///< no hop of the shape is TCP
  Algo pick(Coll coll, size_t bytes) const {
    const std::vector<Segment>& v = segs[static_cast<int>(coll)];
    for (const Segment& g : v)
      if (bytes <= g.upTo) return g.algo;
    return v.empty() ? Algo::Ring : v.back().algo;
  }
};

/// The best allowed algorithm by the model (a restriction that leaves nothing runnable for
/// a size is ignored for that size).
Algo bestAlgo(const ModelParams& p, const ModelShape& s, Coll coll, size_t bytes, unsigned algoMask,
              unsigned protoMask);
/// The thresholds: exact switch points of bestAlgo over all sizes.
TuningTables buildTables(const ModelParams& p, const ModelShape& s, unsigned algoMask,
                         unsigned protoMask);
/// Human-readable table of predicted times (µs) for a set of sizes, one line per row.
std::string formatPredictions(const ModelParams& p, const ModelShape& s, unsigned algoMask,
                              unsigned protoMask);

// ---------------------------------------------------------------------------------------
// From a communicator's facts to a plan.
// ---------------------------------------------------------------------------------------

/// Reads the model's constants from a tuning file (CHORUS_TUNING_FILE; "" = the defaults).
/// A file that cannot be read or parsed is reported at WARN and gives the defaults.
ModelParams loadModelParams(const std::string& path);

/// The plain facts a communicator knows after init that its ModelShape is computed from.
struct ShapeInputs {
  int nranks = 1;
  std::vector<uint64_t> hostOfRank;  // host hash of every rank
  int minCpus = 1;                   // fewest usable cores of any rank
  double kernelRanksPerCpu = 1.0;    // ModelShape::kernelRanksPerCpu
  bool shmHops = false;              // a connected transport is shm
  bool otherHops = false;            // a connected transport is not (tcp, rdma)
  bool shmDisabled = false;          // CHORUS_SHM_DISABLE (used while nothing is connected)
  size_t llBytes = 16 << 10;
  size_t slotBytes = 0;  // 0: the ModelShape default
  size_t treeBytes = 0;
};
ModelShape shapeFrom(const ShapeInputs& in);

/// The tables for restrictions given as CHORUS_ALGO / CHORUS_PROTO text (unknown names are
/// reported at WARN and ignored); `announce`: log the model and its predictions at INFO.
TuningTables tablesFor(const ModelParams& p, const ModelShape& s, const std::string& algo,
                       const std::string& proto, bool announce);

/// The knobs of a plan besides the tables.
struct PlanKnobs {
  int nranks = 1;
  size_t slotBytes = 0;    // CHORUS_CHUNKSIZE
  size_t ntBytes = 0;      // CHORUS_NT_THRESHOLD
  size_t tcpPieceMin = 0;  // CHORUS_TCP_PIECE_MIN (0: two ranks over tcp keep one piece per half)
  bool allShm = false;     // shared memory joins every pair (comm->peerMem.allShm)
};

/// The plan for one call; `bytes` is the size of the whole result buffer of the call.
/// `tables` is read only with more than one rank (may be null otherwise).
Plan choosePlan(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes);

}  // namespace chorus
