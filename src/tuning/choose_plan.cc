// choose_plan.cc — the whole decision for one call (choosePlan, see tuning.h).
#include <algorithm>
#include <cstdio>
#include <string>

#include "src/tuning/cache_pieces.h"
#include "src/tuning/output_stores.h"
#include "src/tuning/tuning.h"

namespace chorus {

namespace {

// All-reduce copies once only from this size: the descriptors' swap (~0.2 us) is then a few
// percent of the call at most, and calls whose deciding rank chose the FIFO fall back to it
// after the swap. Below it the LL path runs. Measured (np 2, Intel Xeon, CMA forced against
// the default): 32-128 KiB 1.2-1.4x faster through CMA, 16 KiB 5-10% slower.
constexpr size_t kAllReduceSingleCopyMin = 64 * 1024;

// Scatter takes the LL path up to this many result bytes only. Measured (np 2, AMD EPYC,
// medians of 5 interleaved rounds, docs/PERF.md#perf-eager-gather): LL 1.11-1.18x the FIFO's
// speed at 512 B and 1.05-1.08x at 1 KiB, but 0.94-0.98x at 2-4 KiB, where each block is a
// long LL message. Gather gained or held at every size up to the LL threshold (1.11-1.15x
// at 4 KiB).
constexpr size_t kScatterLLMax = 1024;

// Two-rank same-host all-reduces below this size run direct on the FIFOs (below): the
// power-of-two sizes up to 256 KiB, whose plans are logged per power-of-two bucket.
constexpr size_t kTwoRankDirectBelow = 512 * 1024;

// Largest crowded same-host all-reduce that takes the ordered exchange (choosePlan's crowded
// rule): where it was level or ahead of the boards both quiet and beside two busy processes
// (np 4 on 2 CPUs, AMD EPYC Zen 5; at 1 MiB it lost beside them). Where the transport has
// boards, only up to kCrowdedOrderedBesideBoardsMaxBytes: at 512 KiB the boards without
// credit words were level or ahead quiet and 1.8x faster beside two busy processes
// (docs/PERF.md#perf-np4cells).
constexpr size_t kCrowdedOrderedMaxBytes = 512 << 10;
constexpr size_t kCrowdedOrderedBesideBoardsMaxBytes = 256 << 10;
// Smallest crowded same-host broadcast on the boards is the next size above this (choosePlan).
constexpr size_t kCrowdedBroadcastBoardAbove = 64 << 10;

// The crowded same-host all-reduce on a power of two of ranks takes halving and doubling on
// the pair cells (src/algorithms/pair_halving.cc) above kCrowdedPairHalvingAboveBytes, up to
// kCrowdedPairHalvingMaxBytes. Measured (np 4 on 2 CPUs, AMD EPYC Zen 5, interleaved
// rounds against main's plans, docs/PERF.md#perf-np4rab): 128 KiB-32 MiB 1.15-1.8x faster
// where the vCPUs sat far apart, 128 KiB-4 MiB 1.0-1.7x near; 32-64 KiB level or up to
// 10% slower near (the ordered exchange keeps them); beside two busy processes 1-4 MiB
// 1.5-2.9x faster, but 8 MiB 0.8x (eight pieces, each two waits per pair that wait for a
// scheduler turn, against the ring's pipelined ones): the ring keeps 8 MiB and above.
// At np 8 (three pairs per rank) it was level or up to 10% slower than main's plans at
// 128 KiB-4 MiB (one sitting of 3 rounds): the crowded rule takes np 4 only, where measured.
constexpr int kCrowdedPairHalvingRanks = 4;
constexpr size_t kCrowdedPairHalvingAboveBytes = 64 << 10;
constexpr size_t kCrowdedPairHalvingMaxBytes = 4 << 20;

bool inMask(unsigned mask, int bit) { return (mask >> bit) & 1u; }

// Whether the restriction the tables were built with lets a call run algorithm `a` on
// protocol `pr`, or is ignored for this call anyway (`fallback`: nothing it allows can run).
bool allows(const TuningTables& t, bool fallback, Algo a, Proto pr) {
  return fallback ||
         (inMask(t.algoMask, static_cast<int>(a)) && inMask(t.protoMask, static_cast<int>(pr)));
}

// The collectives whose same-host calls can copy once between user buffers.
bool singleCopyColl(Coll coll, size_t bytes, const PlanCall& call) {
  switch (coll) {
    case Coll::AllGather:
    case Coll::Broadcast:
    case Coll::Gather:
    case Coll::Scatter: return true;
    case Coll::AllReduce: return bytes >= kAllReduceSingleCopyMin;
    case Coll::AllToAll: return !call.inPlace;  // in place, a peer would read what we overwrite
    default: return false;
  }
}

}  // namespace

size_t pairHalvingHalf(size_t bytes, size_t cellBytes) {
  return std::min(cellBytes, ((bytes + 1) / 2 + 63) & ~size_t{63});
}

bool crowdedPairCells(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes) {
  const TuningTables* t = k.nranks > 1 ? tables : nullptr;
  if (t == nullptr || !k.allShm || k.pairCellBytes == 0 || coll != Coll::AllReduce ||
      bytes <= k.llBytes || !k.crowded || k.nranks != kCrowdedPairHalvingRanks ||
      bytes <= kCrowdedPairHalvingAboveBytes || bytes > kCrowdedPairHalvingMaxBytes)
    return false;
  // Where no restriction is set (the default algorithms) or one names halving.
  return !t->segment(coll, bytes).fallback &&
         (inMask(t->algoMask, static_cast<int>(Algo::Halving)) || t->algoMask == kDefaultAlgos) &&
         inMask(t->protoMask, static_cast<int>(Proto::Simple));
}

Plan choosePlan(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes,
                const PlanCall& call) {
  Plan ordered{Algo::Direct, Proto::Simple, 0, false};
  if (orderedPlan(tables, k, coll, bytes, call, &ordered)) return ordered;
  const int perShare = tables != nullptr && k.nranks > 1 ? tables->piecesPerShare : 4;
  const size_t cacheShare = k.allShm ? k.cacheShareBytes : 0;  // same-host calls only
  Plan p{Algo::Ring, Proto::Simple, pieceBytesOf(k.nranks, k.slotBytes, perShare, bytes),
         streamingOutput(k.ntBytes, cacheShare, k.nranks, coll, bytes, call.inPlace)};
  if (coll == Coll::Broadcast)
    p.rootCopyStreaming = streamingRootCopy(k.ntBytes, cacheShare, k.nranks, bytes);
  const TuningTables* t = k.nranks > 1 ? tables : nullptr;
  if (t != nullptr) {
    const Segment& g = t->segment(coll, bytes);
    p.algo = g.algo;
    p.proto = protoOf(g.algo);
    p.fallback = g.fallback;
  }
  const bool twoRankRing = p.algo == Algo::Ring && k.nranks == 2 && k.slotBytes > 0;
  // Two ranks on shared memory: the broadcast's pieces fit the root's L2 four at a time
  // (cache_pieces.h). Measured at np 2 only; longer chains keep the slot-sized pieces.
  if (twoRankRing && coll == Coll::Broadcast && k.allShm)
    p.pieceBytes = std::min(p.pieceBytes, broadcastPieceCap(k.l2Bytes));
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
  // The same-host rules below move a call to direct/Simple (where the restriction allows it,
  // checked by each rule first): on the FIFOs, or on the shared boards (board).
  auto directSimple = [&](size_t pieceBytes, bool board) {
    p.fallback = p.fallback && !allows(*t, false, Algo::Direct, Proto::Simple);
    p.algo = Algo::Direct;
    p.proto = Proto::Simple;
    p.pieceBytes = pieceBytes;
    p.board = board;
  };
  // Two ranks on shared memory, all-reduce above the LL path below kTwoRankDirectBelow: direct
  // on the FIFOs, where each rank sends its whole input and reduces both (allreduce.cc,
  // allReduceTwoRanks): one cross-core hand-off per call instead of the ring's two (half in,
  // result back), for reducing the other half too. The hand-off is a fixed cost and the extra
  // half grows with the size: measured (np 2, AMD EPYC Zen 5, against the ring, out of place /
  // in place) 32 KiB 1.3x / 1.5x, 64 KiB 1.15x / 1.4x, 128 KiB 1.1x / 1.4x, 256 KiB level /
  // 1.3x, 512 KiB level (docs/PERF.md#perf-two-rank-all-reduce).
  if (twoRankRing && coll == Coll::AllReduce && k.allShm && t != nullptr && bytes > k.llBytes &&
      bytes < kTwoRankDirectBelow && allows(*t, p.fallback, Algo::Direct, Proto::Simple))
    directSimple(std::min(k.slotBytes, (bytes + 63) & ~size_t{63}), false);
  if (p.algo == Algo::Halving && perShare == 1 && k.slotBytes > 0) {
    // Crowded tcp: whole halves per message, up to a slot (each message waits for its
    // receiver's turn on a CPU; measured, 4 x 1: 64 KiB pieces 1.1-1.9x slower).
    p.pieceBytes = k.slotBytes;
  }
  // --- crowded same-host all-reduce and all-gather (issue 38) ---
  // Where ranks outnumber their CPUs and more than two share a host, every ring step waits
  // for one particular peer to be scheduled. The rules below move such calls to direct/Simple:
  // on the FIFOs, or on the shared boards (src/algorithms/board.cc) where the transport has
  // them.
  const bool crowdedHost = t != nullptr && k.allShm && k.crowded && k.nranks > 2 &&
                           allows(*t, p.fallback, Algo::Direct, Proto::Simple);
  // Halving on the pair cells: a power of two of 4 or more ranks on one host, every pair
  // rank ^ 2^k with cells (pairCellBytes), above the LL path. Where the tables chose halving
  // (CHORUS_ALGO=halving) its pairwise exchanges go through the cells instead of the FIFOs;
  // and the crowded all-reduce of four ranks takes it above kCrowdedPairHalvingAboveBytes up to
  // kCrowdedPairHalvingMaxBytes, ahead of the ordered exchange, the boards and the ring
  // there: each step waits for one partner's post only, and nothing goes back to a writer
  // (transports/pair_cells.h), where the FIFOs' halving waited on slots handed back and was
  // 1.1-1.9x slower than the default (docs/PERF.md#perf-np4cells). Its sums follow a fixed
  // tree of the ranks' numbers: the same bits every run (docs/REPRODUCIBLE.md, default mode);
  // the reproducible mode's plan is taken above, before this (where crowdedPairCells holds,
  // its rank-order schedule on the same cells: orderedPlan, ordered_pairs.cc).
  const bool pairHalving = t != nullptr && k.allShm && k.pairCellBytes > 0 &&
                           coll == Coll::AllReduce && bytes > k.llBytes;
  if (crowdedPairCells(tables, k, coll, bytes)) {
    p.algo = Algo::Halving;
    p.proto = Proto::Simple;
  }
  if (pairHalving && p.algo == Algo::Halving) {
    p.pairCells = true;
    p.pieceBytes = pairHalvingHalf(bytes, k.pairCellBytes);
    return p;
  }
  // All-reduce: the ordered exchange (src/algorithms/ordered.cc, the reproducible mode's
  // plan, orderedPlan) up to kCrowdedOrderedMaxBytes, or where the transport has boards up to
  // kCrowdedOrderedBesideBoardsMaxBytes (and one board buffer): rank r takes block r of every
  // rank's input straight from the FIFOs, adds them in rank order, and sends its result to
  // every peer, in rounds of 256 KiB (a share in one piece up to 64 KiB at np 4). Two waits
  // per piece, each for whichever peers ran, as on the boards; but no rank waits until all n
  // have copied in before it reduces.
  // Measured (np 4 on 2 CPUs, AMD EPYC Zen 5, interleaved rounds, docs/PERF.md#perf-crowded-
  // ordered): 64-512 KiB 0.82-0.91x the boards' time where the vCPUs sat on far-apart cores,
  // level where near and beside two busy processes (32-512 KiB 0.93-1.09x); at 1 MiB (the
  // boards' two pieces, four rounds here) level quiet but 1.18x the boards' time beside two
  // busy processes, so the boards keep it. The same rank order as the boards (each element's n
  // inputs added once, by one loop over r = 0..n-1): the bits of every run stay the same
  // (docs/REPRODUCIBLE.md).
  const size_t orderedMax = k.boardBytes == 0
                                ? kCrowdedOrderedMaxBytes
                                : std::min(kCrowdedOrderedBesideBoardsMaxBytes, k.boardBytes);
  if (crowdedHost && coll == Coll::AllReduce && bytes > k.llBytes && bytes <= orderedMax) {
    PlanKnobs asReproducible = k;  // the mode's plan, in either mode
    asReproducible.reproducible = true;
    PlanCall anyOp = call;
    anyOp.orderMatters = true;  // integer and min/max reductions too: one schedule
    if (orderedPlan(tables, asReproducible, coll, bytes, anyOp, &ordered)) return ordered;
  }
  // Larger: all-reduce on the boards, where they hold the call in two buffers: each rank
  // copies its input in once and reduces its share from every board, instead of copying
  // n - 1 shares into slots and n - 1 results out again. Two waits per piece either way; on
  // the boards, n copies per rank against the FIFOs' 2(n - 1). Measured (np 4 on 2 CPUs, AMD
  // EPYC): 64 KiB-1 MiB 1.1-1.4x the direct schedule on the FIFOs and 1 MiB 1.0-1.3x the
  // ring; from 2 MiB level with the ring quiet, but each piece is two waits for every rank,
  // and beside busy processes (each wait then a scheduler turn) 4 pieces lost to the ring's
  // pairwise, pipelined hand-offs: up to two pieces (docs/PERF.md#perf-board).
  // Otherwise direct on the FIFOs (allReduceDirectFifo): it waits twice per piece, for
  // whichever peers ran, where the ring waits 2(n-1) times, and moves the same bytes; one
  // piece per rank's share. Up to shares of a quarter slot: above, the ring's pipelined
  // pieces won (np 4 on 2 CPUs, AMD EPYC: direct 1.2-1.8x the ring from 32 to 512 KiB,
  // 0.45-0.65x from 2 MiB; docs/PERF.md#perf-crowded-direct).
  if (crowdedHost && coll == Coll::AllReduce && bytes > k.llBytes) {
    const size_t share = bytes / static_cast<size_t>(k.nranks);
    if (k.boardBytes > 0 && bytes <= 2 * k.boardBytes) {
      const size_t pieces = bytes > k.boardBytes ? 2 : 1;
      directSimple(std::min(k.boardBytes, ((bytes + pieces - 1) / pieces + 63) & ~size_t{63}),
                   true);
    } else if (k.slotBytes > 0 && share <= k.slotBytes / 4) {
      directSimple((share + 63) & ~size_t{63}, false);
    }
  }
  // All-gather on the boards: the ring's n - 1 hand-offs per piece each wait for one
  // particular rank to be scheduled; on the boards every rank writes its block once and reads
  // every peer's as soon as that peer has written: one wait per peer, for whichever ran, and
  // n copies per rank instead of the ring's 2(n - 1). Pieces of a board buffer (a slot),
  // blocks of up to two (as the all-reduce above; np 4 on 2 CPUs, AMD EPYC: 1.1-3.3x the ring
  // quiet from 32 KiB to 16 MiB, but beside two busy processes 4 pieces a block lost 10-30%
  // to it). Above what the tables give the LL path (direct/LL stays there: one message per
  // peer).
  if (crowdedHost && coll == Coll::AllGather && k.boardBytes > 0 && p.algo != Algo::Direct) {
    const size_t block = (bytes / static_cast<size_t>(k.nranks) + 63) & ~size_t{63};
    if (block <= 2 * k.boardBytes) directSimple(std::min(block, k.boardBytes), true);
  }
  // Broadcast on the boards, above 64 KiB up to a board buffer, in one piece: the root
  // copies the message in once and every rank copies it out, one wait for the root; the
  // ring's chain copies it twice on every middle rank and waits for each forward in turn.
  // Measured (np 4 on 2 CPUs, AMD EPYC Zen 5, docs/PERF.md#perf-np4steady): 128-512 KiB
  // 1.2-1.5x the chain, 32 KiB 0.7x (the chain kept there), 1-8 MiB in board-buffer pieces
  // level or slower in one window (the chain kept).
  if (crowdedHost && coll == Coll::Broadcast && k.boardBytes > 0 && p.algo != Algo::Direct &&
      bytes > kCrowdedBroadcastBoardAbove && bytes <= k.boardBytes)
    directSimple(k.boardBytes, true);
  // --- end crowded same-host all-reduce and all-gather ---
  switch (coll) {
    case Coll::AllToAll:
    case Coll::Scatter:
    case Coll::Gather:
    case Coll::Send:
    case Coll::Recv:
      // One exchange per pair on the FIFOs (alltoall.cc). All-to-all, gather and scatter on
      // one host up to what an LL message carries send every block in one LL message
      // instead: its lines carry their own flags, so a small block reaches its rank in one
      // cache-line transfer per line, where a slot needs the head line first, then the slot.
      p.algo = Algo::Direct;
      p.proto = Proto::Simple;
      p.pieceBytes = k.slotBytes;
      if (t == nullptr) break;
      if ((coll == Coll::AllToAll || coll == Coll::Gather || coll == Coll::Scatter) && k.allShm &&
          bytes <= (coll == Coll::Scatter ? std::min(k.llBytes, kScatterLLMax) : k.llBytes) &&
          inMask(t->protoMask, static_cast<int>(Proto::LL)))
        p.proto = Proto::LL;
      p.fallback = !inMask(t->algoMask, static_cast<int>(Algo::Direct)) ||
                   !inMask(t->protoMask, static_cast<int>(p.proto));
      break;
    case Coll::ReduceScatter:
      // On one host up to what an LL message carries: every rank sends block r to rank r,
      // which reduces the n blocks in rank order (one hop instead of n-1 FIFO steps).
      // (The model has no direct reduce-scatter: where the restriction names direct and LL,
      // the tables fell back, and this rule runs what it asked for.)
      if (t != nullptr && k.allShm && bytes <= k.llBytes &&
          allows(*t, p.fallback, Algo::Direct, Proto::LL)) {
        p.fallback = p.fallback && !allows(*t, false, Algo::Direct, Proto::LL);
        p.algo = Algo::Direct;
        p.proto = Proto::LL;
      }
      break;
    default: break;
  }
  // Same-host single copy: a direct exchange between user buffers (each rank reads or writes
  // its peers' blocks), so only where the restriction allows direct on slots (or is ignored
  // for this call). A buffer no peer can reach sends the call down the FIFO schedule above.
  if (t != nullptr && k.allShm && !p.board && !p.pairCells && bytes >= k.singleCopyBytes &&
      singleCopyColl(coll, bytes, call) && allows(*t, p.fallback, Algo::Direct, Proto::Simple)) {
    p.route = Route::SingleCopy;
    p.cma = k.cma && bytes < k.cmaLimit;
  }
  if (p.pieceBytes < 64) p.pieceBytes = 64;
  return p;
}

std::string planText(const Plan& p) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s/%s, pieces of %zu B%s%s%s%s", algoName(p.algo),
                protoName(p.proto), p.pieceBytes, p.streaming ? ", streaming stores" : "",
                p.route == Route::SingleCopy
                    ? (p.cma ? ", single copy (registered: mapped; else CMA)"
                             : ", single copy (registered buffers only)")
                    : "",
                p.ordered && p.pairCells ? ", in rank order on the pair cells"
                : p.ordered              ? ", the ordered exchange (rank order)"
                : p.board                ? ", on the shared boards"
                : p.pairCells            ? ", on the pair cells"
                                         : "",
                !p.fallback ? ""
                : p.ordered ? "; CHORUS_ALGO/CHORUS_PROTO cannot keep the rank order"
                            : "; CHORUS_ALGO/CHORUS_PROTO cannot run it: the default instead");
  return buf;
}

}  // namespace chorus
