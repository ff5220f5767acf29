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

// Half the smallest L2 of the server cores we run on (1 MiB on AMD Zen 4/5, 2 MiB on recent
// Xeons): room left for the FIFO slots the pieces come through.
constexpr size_t kOrderedRoundBytes = 256 << 10;

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
  // The owner re-reads its piece of the sum once per rank, so a round's working set (its
  // accumulator piece and the n - 1 pieces it adds) should stay in the core's L2: at most
  // kOrderedRoundBytes a round, in pieces of at least 16 KiB. With 512 KiB pieces (the slot)
  // the np-4 all-reduce cost 1.5-1.7x the default at 16 MiB; with 32-64 KiB pieces it is
  // level with it (docs/REPRODUCIBLE.md "Cost").
  // Over tcp the pieces stay the slot's: there a piece's cost is the message, not the cache
  // (2 hosts x 2 ranks: 2-3x the default with 64 KiB pieces, 1.1-1.8x with 512 KiB).
  if (!ll && k.allShm) {
    // Where ranks outnumber CPUs each round is hand-offs to peers that may be descheduled:
    // as few rounds as the cap allows (a rank's whole share at np 4 up to 256 KiB, where
    // four pieces of a share cost 1.35x the default's crowded direct plan).
    // Measured for the all-reduce only: the reduce-scatter in place paid 1.4-1.65x with it.
    if (k.crowded && coll == Coll::AllReduce)
      p->pieceBytes = std::min(p->pieceBytes * static_cast<size_t>(perShare), k.slotBytes);
    const size_t cap =
        std::max<size_t>(kOrderedRoundBytes / static_cast<size_t>(k.nranks), 16 << 10);
    p->pieceBytes = std::min(p->pieceBytes, cap & ~size_t{63});
  }
  if (p->pieceBytes < 64) p->pieceBytes = 64;
  // A small all-reduce across hosts: each rank's n - 1 LL messages of the direct exchange
  // cost 3x the default's leader schedule over tcp (35 against 11 us, 2 hosts x 2 ranks);
  // every input to rank 0, added there in rank order, and the sum back is two hops.
  p->viaRoot = ll && coll == Coll::AllReduce && !k.allShm;
  // Above it, the direct exchange sends every rank's blocks to every remote peer across the
  // link (1.4-4.3x the default over tcp, 2 hosts x 2 ranks); a chain in rank order crosses
  // each link between hosts once a direction, the whole buffer in pieces of an eighth (at
  // least 16 KiB, at most a slot: a few pieces in flight fill the chain).
  if (!ll && coll == Coll::AllReduce && !k.allShm) {
    p->chain = true;
    p->pieceBytes =
        std::min(std::max<size_t>(bytes / 8, 16 << 10), std::max<size_t>(k.slotBytes, 64)) &
        ~size_t{63};
  }
  // A restriction that leaves out direct (or the protocol) cannot keep the order: this plan
  // runs anyway, reported as a fallback (WARN once; CHORUS_ALGO_STRICT=1 fails the call).
  if (tables != nullptr)
    p->fallback = !inMask(tables->algoMask, static_cast<int>(Algo::Direct)) ||
                  !inMask(tables->protoMask, static_cast<int>(p->proto));
  return true;
}

}  // namespace chorus
