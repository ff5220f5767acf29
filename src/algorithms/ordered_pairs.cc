// ordered_pairs.cc — reproducible mode's all-reduce of four ranks on one host over the pair
// cells of halving (transports/pair_cells.h: pairs rank ^ 1 and rank ^ 2), where the default
// runs halving and doubling on them (pair_halving.cc; the plan: orderedPlan,
// crowdedPairCells). Every element is ((x0 + x1) + x2) + x3, added on the rank that owns its
// quarter of the piece, as ordered.cc's exchange adds it, but with the halving's waits: each
// step one post and one wait, for one partner, four steps a piece, where the ordered
// exchange waits on all three peers twice a round (docs/PERF.md#perf-r36order).
//
// A piece is cut in quarters Q0..Q3 (whole lines; the last ones shorter or empty), quarter q
// owned by rank q. A cell carries two quarters of one parity, quarter q in slot q >> 1. With
// r this rank, "low" ranks 0 and 1 (bit 2 clear), "high" ranks 2 and 3:
//
// 1. Pair r ^ 1. Each rank gives the two quarters of its partner's parity. A low rank adds
//    its partner's quarters to its own input: x0 + x1 of Q(r ^ 2) straight into its cell for
//    step 2 (posted at once), of Qr into its output. A high rank adds nothing: of the two
//    quarters it gets, Q(r ^ 2)'s goes on to step 2 (below), Qr's stays in the partner's
//    cell, read at step 2 (a peer's cell stays readable until this rank posts the pair's
//    next exchange, in the all-gather).
// 2. Pair r ^ 2. The high rank gives x2 and x3 of its low partner's quarter, in rank order in
//    the two slots: one from its input, the other from the step-1 cell. The low rank gives
//    x0 + x1 of the high rank's quarter. Each then adds, in order: the low rank
//    (x0 + x1) + x2, then + x3; the high rank (x0 + x1) + x2 (one of them from the step-1
//    cell), then + x3. The last add writes the result to the output and into the cell the
//    rank just read (its cell of the pair's next exchange), slot 0.
// 3. Pair r ^ 2 again: the two quarters' results cross (doubling, copies only).
// 4. Pair r ^ 1: the two pairs' halves cross (copies only).
//
// Step 2's relay (x2 or x3 of the low partner's quarter, a quarter copied from one cell to
// another) is the price of the order: pair 0-3 and pair 1-2 have no cells. Per piece a rank
// moves 2-2.5 quarters a step in the reduce-scatter against the halving's 2 then 1, and adds
// as many elements (rank 0 and 1 a piece four quarters, ranks 2 and 3 two, where every
// halving rank adds three).
//
// No rank reads its own cell after posting it (the race fixed in 4b08fc4: the partner may
// rewrite it as soon as it has read it): what the all-gather sends of this rank's result is
// copied from its cell before the post, and every later read is of a partner's cell, before
// this rank's next exchange on that pair. Every pair makes two exchanges a piece, the same on
// both of its ranks, so their counts agree; empty ranges (small pieces) still exchange.
// Pre-multiplication applies to each rank's own input where it first enters a sum or a cell
// (a relayed contribution arrives pre-multiplied); post at the last add.
#include <algorithm>
#include <cstring>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

namespace {

using kernels::kApplyPost;
using kernels::kApplyPre;

constexpr int kRanks = 4;

// A piece's quarters, in elements from the piece's start.
struct Quarters {
  size_t per = 0, count = 0;
  size_t lo(int q) const { return std::min(count, per * static_cast<size_t>(q)); }
  size_t len(int q) const { return lo(q + 1) - lo(q); }
};

struct PieceRun {
  const kernels::ReduceSpec& spec;
  Prims& p;
  PairCells* pair1;  // the cells of pair rank ^ 1
  PairCells* pair2;  // the cells of pair rank ^ 2
  int rank;
  size_t elem;
  unsigned outFlags;  // streaming stores into the output, where the plan says so
  bool streaming;

  chorusResult_t run(const char* in, char* out, size_t cnt, size_t lineElems) const {
    Quarters q;
    q.count = cnt;
    q.per = ((cnt + kRanks - 1) / kRanks + lineElems - 1) / lineElems * lineElems;
    auto at = [this](size_t e) { return e * elem; };
    auto slot = [&](int quarter) { return at(static_cast<size_t>(quarter >> 1) * q.per); };
    const bool low = (rank & 2) == 0;
    const int mine = rank, across = rank ^ 2;  // this rank's quarter; its step-2 partner's
    const int give1 = (rank ^ 1) & 1;          // parity of the quarters given at step 1

    // Step 1, pair rank ^ 1.
    const uint64_t y = pair1->nextExchange();
    char* own1 = pair1->own(y);
    for (int g : {give1, give1 | 2}) putOwnInput(p, own1 + slot(g), in + at(q.lo(g)), q.len(g));
    pair1->post(y);
    const uint64_t x = pair2->nextExchange();
    char* own2 = pair2->own(x);
    // The high rank's own contribution to its low partner's quarter in its rank's slot (rank
    // 2: 0, rank 3: 1), the relayed one (its step-1 partner's) in the other.
    const size_t ownSlot = at(static_cast<size_t>(rank & 1) * q.per);
    const size_t relaySlot = at(static_cast<size_t>(1 - (rank & 1)) * q.per);
    if (!low) putOwnInput(p, own2 + ownSlot, in + at(q.lo(across)), q.len(across));
    const char* peer1 = nullptr;  // the partner's quarters of this rank's parity
    CHORUS_CHECK(takePeerPiece(pair1, p, y, &peer1));
    if (low) {
      kernels::reduce(spec, own2, peer1 + slot(across), in + at(q.lo(across)), q.len(across),
                      kApplyPre);
      pair2->post(x);
      kernels::reduce(spec, out + at(q.lo(mine)), peer1 + slot(mine), in + at(q.lo(mine)),
                      q.len(mine), kApplyPre);
    } else {
      std::memcpy(own2 + relaySlot, peer1 + slot(across), at(q.len(across)));
      pair2->post(x);
    }

    // Step 2, pair rank ^ 2: the sums in rank order; the result into the output and into
    // `res`, this rank's cell of the pair's next exchange (the one read here), slot 0.
    const char* peer2 = nullptr;
    CHORUS_CHECK(takePeerPiece(pair2, p, x, &peer2));
    const uint64_t xn = pair2->nextExchange();
    char* res = pair2->own(xn);
    char* o = out + at(q.lo(mine));
    const size_t n = q.len(mine);
    if (low) {
      // peer2: x2 and x3 of this rank's quarter, slots 0 and 1; o: x0 + x1.
      kernels::reduce(spec, o, o, peer2, n, 0);
      kernels::reduceCopy(spec, res, o, o, peer2 + at(q.per), n, kApplyPost | outFlags);
    } else {
      // peer2: x0 + x1 of this rank's quarter, slot 0; slot 1 takes (x0 + x1) + x2.
      const char* relayed = peer1 + slot(mine);  // the step-1 partner's contribution
      const char* ownIn = in + at(q.lo(mine));
      const bool ownFirst = (rank & 1) == 0;  // rank 2: x2 is this rank's own
      char* mid = res + at(q.per);
      kernels::reduce(spec, mid, peer2, ownFirst ? ownIn : relayed, n, ownFirst ? kApplyPre : 0u);
      kernels::reduceCopy(spec, res, o, mid, ownFirst ? relayed : ownIn, n,
                          (ownFirst ? 0u : kApplyPre) | kApplyPost | outFlags);
    }
    // This rank's result for step 4 (its partner's parity is its own), before the post of
    // `res`: a rank does not read its own cell after posting it.
    const uint64_t yn = pair1->nextExchange();
    char* next1 = pair1->own(yn);
    std::memcpy(next1 + slot(mine), res, at(n));
    pair2->post(xn);

    // Step 3, pair rank ^ 2: the partner's quarter's result, to the output and on to step 4.
    const char* peer3 = nullptr;
    CHORUS_CHECK(takePeerPiece(pair2, p, xn, &peer3));
    kernels::reduceCopy(spec, next1 + slot(across), out + at(q.lo(across)), nullptr, peer3,
                        q.len(across), outFlags);
    pair1->post(yn);

    // Step 4, pair rank ^ 1: the other parity's two quarters.
    const char* peer4 = nullptr;
    CHORUS_CHECK(takePeerPiece(pair1, p, yn, &peer4));
    for (int g : {give1, give1 | 2})
      kernels::copy(out + at(q.lo(g)), peer4 + slot(g), at(q.len(g)), streaming);
    return chorusSuccess;
  }
};

}  // namespace

chorusResult_t orderedAllReducePairs(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p) {
  const size_t elem = p.elemSize();
  const std::vector<PairCells*>& byBit = comm->peerMem.halvingPairs;
  const size_t lineElems = std::max<size_t>(1, 64 / elem);
  if (comm->nranks != kRanks || !halvingPairsRun(comm) || plan.pieceBytes < elem ||
      byBit[0]->cellBytes() < 2 * lineElems * elem)
    return planCannotRun(comm, a, plan, a.count * elem);
  noteRan(comm, Algo::Halving, Proto::Simple);
  comm->plans.record.ran.pairCells = true;
  // A piece: four quarters of whole lines, two of which fill at most a cell (as the halving's
  // piece: two halves of up to plan.pieceBytes, each at most a cell).
  const size_t halfBytes = std::min(plan.pieceBytes, byBit[0]->cellBytes());
  const size_t quarterElems = std::max(lineElems, halfBytes / 2 / elem / lineElems * lineElems);
  const size_t pieceElems = kRanks * quarterElems;
  const PieceRun run{p.spec(),
                     p,
                     byBit[0],
                     byBit[1],
                     comm->rank,
                     elem,
                     plan.streaming ? kernels::kStreaming : 0u,
                     plan.streaming};
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  for (size_t base = 0; base < a.count; base += pieceElems)
    CHORUS_CHECK(run.run(in + base * elem, out + base * elem, std::min(pieceElems, a.count - base),
                         lineElems));
  return chorusSuccess;
}

}  // namespace chorus
