// choose_plan.cc — the whole decision for one call (choosePlan, see tuning.h).
#include <algorithm>
#include <cstdio>
#include <string>

#include "src/tuning/tuning.h"

namespace chorus {

namespace {

// All-reduce copies once only from this size: the descriptors' swap (~0.2 us) is then a few
// percent of the call at most, and calls whose deciding rank chose the FIFO fall back to it
// after the swap. Below it the LL path runs. Measured (np 2, Intel Xeon, CMA forced against
// the default): 32-128 KiB 1.2-1.4x faster through CMA, 16 KiB 5-10% slower.
constexpr size_t kAllReduceSingleCopyMin = 64 * 1024;

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

Plan choosePlan(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes,
                const PlanCall& call) {
  Plan ordered{Algo::Direct, Proto::Simple, 0, false};
  if (orderedPlan(tables, k, coll, bytes, call, &ordered)) return ordered;
  const int perShare = tables != nullptr && k.nranks > 1 ? tables->piecesPerShare : 4;
  Plan p{Algo::Ring, Proto::Simple, pieceBytesOf(k.nranks, k.slotBytes, perShare, bytes),
         bytes >= k.ntBytes};
  const TuningTables* t = k.nranks > 1 ? tables : nullptr;
  if (t != nullptr) {
    const Segment& g = t->segment(coll, bytes);
    p.algo = g.algo;
    p.proto = protoOf(g.algo);
    p.fallback = g.fallback;
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
    case Coll::AllToAll:
    case Coll::Scatter:
    case Coll::Gather:
    case Coll::Send:
    case Coll::Recv:
      // One exchange per pair on the FIFOs (alltoall.cc). All-to-all on one host up to what
      // an LL message carries sends every block in one LL message instead.
      p.algo = Algo::Direct;
      p.proto = Proto::Simple;
      p.pieceBytes = k.slotBytes;
      if (t == nullptr) break;
      if (coll == Coll::AllToAll && k.allShm && bytes <= k.llBytes &&
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
  if (t != nullptr && k.allShm && bytes >= k.singleCopyBytes && singleCopyColl(coll, bytes, call) &&
      allows(*t, p.fallback, Algo::Direct, Proto::Simple)) {
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
                p.ordered ? ", rank order (CHORUS_REPRODUCIBLE)" : "",
                !p.fallback ? ""
                : p.ordered ? "; CHORUS_ALGO/CHORUS_PROTO cannot keep the rank order"
                            : "; CHORUS_ALGO/CHORUS_PROTO cannot run it: the default instead");
  return buf;
}

}  // namespace chorus
