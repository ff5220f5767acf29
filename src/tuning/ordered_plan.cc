// ordered_plan.cc — the plan of a reduction in reproducible mode (orderedPlan, tuning.h).
//
// Every schedule it names adds the ranks' contributions to an element in rank order,
// ((x0 + x1) + x2) + ..., on whichever rank owns the element (src/algorithms/ordered.cc says
// why each does): the choice below is only about speed, never about the bits.
#include <algorithm>

#include "src/tuning/tuning.h"

namespace chorus {

namespace {

bool isReduction(Coll coll) {
  return coll == Coll::AllReduce || coll == Coll::Reduce || coll == Coll::ReduceScatter;
}

bool inMask(unsigned mask, int bit) { return (mask >> bit) & 1u; }

}  // namespace

bool orderedPlan(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes,
                 const PlanCall& call, Plan* p) {
  if (!k.reproducible || k.nranks < 3 || !isReduction(coll) || !call.orderMatters) return false;
  const int perShare = tables != nullptr ? tables->piecesPerShare : 4;
  const bool llAllowed =
      tables == nullptr || inMask(tables->protoMask, static_cast<int>(Proto::LL));
  // Up to what one LL message carries, every rank's whole input (all-reduce, reduce) or the
  // whole send buffer (reduce-scatter) goes in one LL message: one hop, as the default
  // direct plan. Above it, or where CHORUS_PROTO excludes LL, the same exchange in slot
  // pieces on the FIFOs.
  const bool ll = bytes <= k.llBytes && llAllowed && k.llBytes > 0;
  // No streaming stores: the owner reads back each piece of its sum n - 1 times.
  *p = Plan{Algo::Direct, ll ? Proto::LL : Proto::Simple,
            pieceBytesOf(k.nranks, k.slotBytes, perShare, bytes), false};
  p->ordered = true;
  if (p->pieceBytes < 64) p->pieceBytes = 64;
  // A restriction that leaves out direct (or the protocol) cannot keep the order: this plan
  // runs anyway, reported as a fallback (WARN once; CHORUS_ALGO_STRICT=1 fails the call).
  if (tables != nullptr)
    p->fallback = !inMask(tables->algoMask, static_cast<int>(Algo::Direct)) ||
                  !inMask(tables->protoMask, static_cast<int>(p->proto));
  return true;
}

}  // namespace chorus
