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

/// How a call's bytes travel: through the transports' FIFOs, or, between ranks of one
/// host, once, straight between user buffers (PeerMem: mappings of registered buffers, or
/// CMA).
enum class Route : int { Fifo, SingleCopy };
const char* routeName(Route r);

struct Plan {
  Algo algo;
  Proto proto;
  size_t pieceBytes;  // bytes moved per primitive step (<= slot size)
  bool streaming;     // write the user's output with non-temporal stores
  Route route = Route::Fifo;
  bool cma = false;       // single copy may use CMA for buffers that are not registered
  bool cmaTimed = false;  // `cma` is this rank's timed pick for every rank (CHORUS_CMA_MAX=auto)
  bool fallback = false;  // the restriction cannot run this call (see choosePlan)
  bool ordered = false;   // reproducible mode: the rank-order schedule (orderedPlan)
  bool board = false;     // direct/Simple on the shared boards (src/algorithms/board.cc)
  /// Halving/Simple on the pair cells of every halving pair (src/algorithms/pair_halving.cc;
  /// pieceBytes: half a piece, up to a cell).
  bool pairCells = false;
  /// Reproducible all-reduce where shared memory does not join every pair (orderedPlan):
  /// small calls through the host leaders, who swap their inputs (viaLeaders), or chain
  /// partial sums (viaLeaders and chain); larger ones the leaders' rails, or where the layout
  /// does not fit them a chain in rank order (chain).
  bool viaLeaders = false;
  bool chain = false;
  /// Broadcast on the FIFOs, out of place: the root's copy of its input into its output
  /// with non-temporal stores (output_stores.h); the receivers follow `streaming`.
  bool rootCopyStreaming = false;
};

/// How single copy reached the peers' buffers in a call that took it.
enum class PathRan : int { Fifo, Mapped, Cma };
const char* pathRanName(PathRan p);

/// What a call actually ran, recorded by the algorithm that ran it: tests compare it with
/// the plan (src/api/test_hooks.h).
struct Ran {
  Algo algo = Algo::Ring;
  Proto proto = Proto::Simple;
  PathRan path = PathRan::Fifo;
  bool ordered = false;    // a schedule that adds in rank order ran (src/algorithms/ordered.cc)
  bool board = false;      // a schedule on the shared boards ran (src/algorithms/board.cc)
  bool pairCells = false;  // halving on the pair cells ran (src/algorithms/pair_halving.cc)
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
/// (docs/TUNING.md#constants); CHORUS_TUNING_FILE may replace any of them. Where each
/// fitted or hand-set value comes from is told in docs/TUNING.md, under the anchor named.
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
  /// Over tcp where one kernel runs more ranks than it has CPUs: a direct exchange pays
  /// this per peer over tcp per extra rank per CPU (docs/TUNING.md#tcp-crowd).
  double tcpCrowdPeerUs = 24.7;
  /// One round of recursive doubling between host leaders over tcp (leadersDoubling;
  /// docs/TUNING.md#tcp-leaders).
  LinkCost tcpLeaders{14.0, 1.9};
  /// Size corrections, one factor per power of two from 16 KiB (index 0) to 8 MiB (index
  /// 9), interpolated in log2(size) and held flat outside (as NCCL corrects its tree by
  /// size): the all-TCP tree (docs/TUNING.md#tcp-tree), and over tcp on a crowded kernel
  /// the ring and recursive halving, each times the extra ranks per CPU
  /// (docs/TUNING.md#tcp-crowd-ring, #tcp-crowd-halving).
  static constexpr int kTcpTreeBuckets = 10;
  double tcpTreeCorrection[kTcpTreeBuckets] = {1.22, 1.23, 1.24, 1.22, 1.2,
                                               1.13, 1.06, 1.06, 1.07, 1.27};
  double tcpCrowdRingCorrection[kTcpTreeBuckets] = {1.41, 0.96, 0.50, 0.75, 1.00,
                                                    0.96, 0.92, 0.92, 0.92, 0.92};
  double tcpCrowdHalvingCorrection[kTcpTreeBuckets] = {1.30, 0.80, 0.50, 0.80, 0.80,
                                                       0.80, 0.80, 0.80, 0.85, 1.00};
  /// Crowded-tcp halving above 16 MiB, where it was not fitted (docs/TUNING.md#tcp-crowd-halving).
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
/// between host leaders (leadersDoubling; docs/TUNING.md#leaders-max).
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
/// direct wherever it could be measured, docs/TUNING.md#doubling-opt-in).
unsigned parseAlgoMask(const std::string& spec, std::string* bad = nullptr,
                       unsigned all = kDefaultAlgos);
unsigned parseProtoMask(const std::string& spec, std::string* bad = nullptr);

/// Reads a tuning file (see docs/ENV.md, CHORUS_TUNING_FILE) into p. False with *err set
/// on the first malformed line (p is then left as it was).
bool parseTuningText(const std::string& text, ModelParams* p, std::string* err);

/// Piece size the algorithms use for `bytes` (shared by the model and choosePlan): a
/// quarter of a rank's share (piecesPerShare), 16 KiB to the slot size.
size_t pieceBytesFor(const ModelShape& s, size_t bytes);
/// The same from plain numbers: a share of `bytes` over `nranks`, cut in `perShare` pieces.
size_t pieceBytesOf(int nranks, size_t slotBytes, int perShare, size_t bytes);
/// Pieces per rank's share: 4, or 1 over tcp on a crowded kernel (crowdedTcp), where every
/// piece waits for its receiver's turn on a CPU (docs/TUNING.md#pieces).
int piecesPerShare(const ModelShape& s);

/// Whether the code can run this (collective, algorithm) at this size at all.
bool algoAvailable(const ModelShape& s, Coll coll, Algo a, size_t bytes);
/// The protocol an algorithm runs with.
inline Proto protoOf(Algo a) {
  return a == Algo::Direct || a == Algo::Doubling ? Proto::LL : Proto::Simple;
}

/// Predicted microseconds for one call; a negative value means "cannot run".
double predictUs(const ModelParams& p, const ModelShape& s, Coll coll, Algo a, size_t bytes);

/// Per collective, sorted segments: sizes up to `upTo` use `algo`; `fallback`: the
/// restriction (CHORUS_ALGO / CHORUS_PROTO) leaves nothing that can run these sizes, so
/// `algo` is the model's best without it.
struct Segment {
  size_t upTo;
  Algo algo;
  bool fallback = false;
};
struct TuningTables {
  std::vector<Segment> segs[kNumColls];
  int piecesPerShare = 4;             ///< piecesPerShare of the shape the tables were built for
  bool sharedMemoryOnly = true;       ///< no hop of the shape is TCP
  unsigned algoMask = kDefaultAlgos;  ///< the restriction the tables were built with
  unsigned protoMask = (1u << kNumProtos) - 1;
  const Segment& segment(Coll coll, size_t bytes) const {
    static const Segment kNone{~size_t{0}, Algo::Ring, false};
    const std::vector<Segment>& v = segs[static_cast<int>(coll)];
    for (const Segment& g : v)
      if (bytes <= g.upTo) return g;
    return v.empty() ? kNone : v.back();
  }
  Algo pick(Coll coll, size_t bytes) const { return segment(coll, bytes).algo; }
};

/// The best allowed algorithm by the model (a restriction that leaves nothing runnable for
/// a size is ignored for that size: then *fallback, if given, is set).
Algo bestAlgo(const ModelParams& p, const ModelShape& s, Coll coll, size_t bytes, unsigned algoMask,
              unsigned protoMask, bool* fallback = nullptr);
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

/// The knobs of a plan besides the tables: plain facts, fixed for a communicator.
struct PlanKnobs {
  int nranks = 1;
  size_t slotBytes = 0;  // CHORUS_CHUNKSIZE
  size_t ntBytes = 0;    // CHORUS_NT_THRESHOLD (a number, or auto's fixed part)
  /// CHORUS_NT_THRESHOLD=auto, every rank on one host: this rank's share of the host's
  /// last-level cache (output_stores.h); 0: ntBytes alone decides.
  size_t cacheShareBytes = 0;
  /// One L2 of the host (hwloc; 0: unknown): a same-host broadcast's pieces are at most a
  /// quarter of it (cache_pieces.h).
  size_t l2Bytes = 0;
  size_t tcpPieceMin = 0;  // CHORUS_TCP_PIECE_MIN (0: two ranks over tcp keep one piece per half)
  bool allShm = false;     // shared memory joins every pair (PeerMem::allShm)
  size_t boardBytes = 0;   // a board buffer (transports/board.h) where allShm has boards; 0: none
  /// A pair cell (transports/pair_cells.h) where every pair rank ^ 2^k has them (a power of
  /// two of 4 or more ranks, allShm: PeerMem::halvingPairs); 0: none.
  size_t pairCellBytes = 0;
  size_t llBytes = 16 << 10;  // CHORUS_LL_THRESHOLD: what one LL message carries
  /// Same-host single copy (PeerMem): from this many result bytes (CHORUS_SINGLE_COPY_THRESHOLD;
  /// SIZE_MAX: never, also where a descriptor does not fit an LL message).
  size_t singleCopyBytes = ~size_t{0};
  bool cma = false;              // process_vm_readv/writev works between every local pair
  size_t cmaLimit = ~size_t{0};  // CHORUS_CMA_MAX: CMA only for results below this
  bool reproducible = false;     // CHORUS_REPRODUCIBLE: reductions add in rank order
  /// Some kernel runs more of the job's ranks than it has CPUs (chorusComm::
  /// maxRanksPerKernelCpu > 1; the same on every rank).
  bool crowded = false;
  /// The hosts hold equal, contiguous runs of 2 or more ranks (orderedRailsWidth): the
  /// reproducible all-reduce across hosts can take the leaders' rails.
  bool railsFit = false;
  /// Some host gives its ranks fewer CPUs between them than it has ranks (the union of their
  /// affinity masks, PeerInfo::ncpus; the same on every rank): there the ranks of a host
  /// take turns on a CPU.
  bool hostCpusShared = false;
  /// Where railsFit: the ranks per host (the rails side by side, orderedRailsWidth).
  int railsWidth = 0;
};

/// What a call brings besides its collective and size.
struct PlanCall {
  bool inPlace = false;  // output = input
  int root = 0;          // rooted collectives: the root
  /// The reduction's result depends on the order of its operands (floating-point sum, prod,
  /// avg, pre-multiplied sum); integers, min and max do not (reproducible mode keeps their
  /// default plan).
  bool orderMatters = true;
};

/// The whole decision for one call, chosen by choosePlan alone; the algorithms obey it.
/// `bytes` is the size of the whole result buffer of the call. `tables` is read only with
/// more than one rank (may be null otherwise).
///  - algo / proto: the schedule on the FIFOs (and, on the single-copy route, the schedule a
///    call falls back to when a peer's buffer cannot be reached);
///  - route SingleCopy: same-host ranks copy once between user buffers (registered buffers
///    through mappings; others by CMA where `cma`), src/algorithms/single_copy.cc;
///  - pieceBytes, streaming: piece size and the store policy of the user's output;
///  - fallback: CHORUS_ALGO / CHORUS_PROTO cannot run this call; this is the plan without
///    them (CHORUS_ALGO_STRICT=1 fails the call instead).
/// Same-host rules that are not in the cost model live here too, each only where the
/// restriction allows it (or where it is ignored anyway): reduce-scatter, all-to-all and
/// gather up to CHORUS_LL_THRESHOLD, and scatter up to the smaller of it and 1 KiB, go direct
/// on the LL path; all-to-all, gather and scatter otherwise run direct on the FIFOs.
Plan choosePlan(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes,
                const PlanCall& call = PlanCall{});

/// Reproducible mode (k.reproducible; docs/REPRODUCIBLE.md): for an all-reduce, reduce or
/// reduce-scatter whose result depends on the order (call.orderMatters) on 3 or more ranks,
/// sets *p to the rank-order plan and returns true (src/tuning/ordered_plan.cc): direct on
/// LL up to CHORUS_LL_THRESHOLD, direct on the FIFOs (Simple) above, always Route::Fifo.
/// On 1 or 2 ranks every plan adds in rank order already (a + b == b + a in IEEE).
bool orderedPlan(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes,
                 const PlanCall& call, Plan* p);

/// The rank-order schedules of a reproducible all-reduce across hosts, by name: the leaders'
/// swap, the leaders' chain in pieces of half the call or of an eighth, the leaders' rails
/// in one piece a part (half the call's pieces, as orderedPlan gives) or in halves of a part
/// (src/algorithms/ordered_hosts.cc, ordered_rails.cc). Each adds in rank order: which one
/// runs changes the time, never the bits. `Plan` stands for orderedPlan's own choice.
enum class OrderedWay : int { Plan, Swap, LeadersChain, LeadersChain8, Rails, RailsHalves, Count };
const char* orderedWayName(OrderedWay w);
/// CHORUS_REPRO_SCHEDULE's values: a way's name, "plan", "auto" (-1) or "random" (-2);
/// -3 for a name it does not know.
int orderedWayParse(const char* s);
constexpr int kOrderedWayAuto = -1;
constexpr int kOrderedWayRandom = -2;

/// The ways a reproducible all-reduce of `bytes` whose plan is `base` (orderedPlan's) may
/// take instead, base's own first (ways[0] is base's way), at most (int)OrderedWay::Count;
/// returns how many (1: base's alone, no choice). Several only for an all-reduce across
/// hosts that hold equal, contiguous runs of ranks (k.railsFit), from 16 KiB to below
/// 4 MiB, where no CHORUS_ALGO / CHORUS_PROTO restriction applies; the set is the same for
/// every size of a power-of-two bucket (src/tuning/ordered_chooser.h learns per bucket).
int orderedAllReduceWays(const TuningTables* tables, const PlanKnobs& k, size_t bytes,
                         const Plan& base, OrderedWay* ways);
/// The plan of way `w` for an all-reduce of `bytes` (base: orderedPlan's, for `Plan`).
Plan orderedWayPlan(const PlanKnobs& k, size_t bytes, const Plan& base, OrderedWay w);

/// Half a piece of halving on the pair cells for `bytes`: half the call, whole lines, up to a
/// cell (so a piece is two cells).
size_t pairHalvingHalf(size_t bytes, size_t cellBytes);

/// The crowded all-reduce of four ranks on one host with pair cells (k.pairCellBytes), above
/// 64 KiB up to 4 MiB, where the restriction allows halving or none is set (choose_plan.cc):
/// the default runs halving and doubling on the pair cells there (src/algorithms/
/// pair_halving.cc), the reproducible mode its rank-order schedule on the same cells
/// (orderedPlan, src/algorithms/ordered_pairs.cc).
bool crowdedPairCells(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes);

/// One line naming a plan ("ring/Simple, pieces of 64 KiB, single copy (CMA)"), for logs.
std::string planText(const Plan& p);

}  // namespace chorus
