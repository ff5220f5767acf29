// ordered_plan.cc — the plan of a reduction in reproducible mode (orderedPlan, tuning.h).
//
// Every schedule it names adds the ranks' contributions to an element in rank order,
// ((x0 + x1) + x2) + ..., on whichever rank owns the element (src/algorithms/ordered.cc says
// why each does): the choice below is only about speed, never about the bits.
#include <algorithm>
#include <cstring>

#include "src/tuning/output_stores.h"
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

// Largest all-reduce across hosts that goes through the host leaders (orderedPlan); above it
// the leaders' k chains side by side where the hosts hold equal, contiguous runs of ranks
// (orderedAllReduceRails), else the chain in rank order. On 2 hosts x 2 ranks (docs/PERF.md
// "The host leaders' rails"): the rails 0.75-1.2x the default at 256 KiB-128 MiB and
// 1.0-1.4x at 128 KiB, where the rank chain paid up to 1.8x (512 KiB-2 MiB) and the leaders'
// chain 1.4-1.75x at 96-256 KiB; at 32-64 KiB the rails paid 1.3-3x (every rank waits on
// tcp, four messages where the leaders send two).
constexpr size_t kOrderedLeadersMaxBytes = 64 << 10;

// Smallest all-reduce across hosts whose leaders chain partial sums in pieces of half the
// call, where the hosts hold contiguous runs of ranks (orderedAllReduceLeaders); below it
// they swap: host 0's leader sends its host's rank-order partial sum, the others their
// hosts' raw inputs. The swap crosses each link once, at the latency of one message, but
// carries every rank of the host (but host 0's); the chain carries the call once a
// direction but crosses twice, the second crossing overlapped with the first by the pieces.
// Measured on 2 hosts x 2 ranks (docs/PERF.md "The host leaders' rails"): at 32-56 KiB the
// swap 1.2-1.5x the default, the chain 1.4-2.8x; at 64 KiB the chain 1.0-1.3x, the swap
// 1.0-1.6x (there the default, and the swap, slow down by half again).
constexpr size_t kOrderedLeadersChainMinBytes = 64 << 10;
// The leaders' chain goes in pieces of half the call, at least this: smaller pieces cost
// more over tcp than their overlap gives back (2 hosts x 2 ranks, docs/PERF.md "The host
// leaders' chain": at 32 KiB 1.3-1.4x the default in one piece, 1.7-1.8x in halves, 3.4-4.5x
// in quarters).
constexpr size_t kOrderedLeadersPieceMinBytes = 32 << 10;

// A chain's pieces: the call in `parts`, at least `minBytes`, at most a slot, whole lines.
size_t pieceOfCall(const PlanKnobs& k, size_t bytes, size_t parts, size_t minBytes) {
  return std::min(std::max(bytes / parts, minBytes), std::max<size_t>(k.slotBytes, 64)) &
         ~size_t{63};
}
// Both chains of orderedPlan: pieces of half the call.
size_t halfTheCall(const PlanKnobs& k, size_t bytes, size_t minBytes) {
  return pieceOfCall(k, bytes, 2, minBytes);
}

// The sizes whose calls orderedAllReduceWays lets choose among schedules (its comment).
constexpr size_t kOrderedWaysMinBytes = 16 << 10;
constexpr size_t kOrderedWaysMaxBytes = 4 << 20;  // (exclusive)

}  // namespace

const char* orderedWayName(OrderedWay w) {
  switch (w) {
    case OrderedWay::Plan: return "plan";
    case OrderedWay::Swap: return "swap";
    case OrderedWay::LeadersChain: return "chain";
    case OrderedWay::LeadersChain8: return "chain8";
    case OrderedWay::Rails: return "rails";
    case OrderedWay::RailsHalves: return "rails2";
    case OrderedWay::Count: break;
  }
  return "?";
}

int orderedWayParse(const char* s) {
  if (s == nullptr || *s == '\0' || std::strcmp(s, "auto") == 0) return kOrderedWayAuto;
  if (std::strcmp(s, "random") == 0) return kOrderedWayRandom;
  for (int w = 0; w < static_cast<int>(OrderedWay::Count); ++w)
    if (std::strcmp(s, orderedWayName(static_cast<OrderedWay>(w))) == 0) return w;
  return -3;
}

Plan orderedWayPlan(const PlanKnobs& k, size_t bytes, const Plan& base, OrderedWay w) {
  Plan p = base;
  switch (w) {
    case OrderedWay::Swap:
      p.proto = Proto::LL;
      p.viaLeaders = true;
      p.chain = false;
      break;
    case OrderedWay::LeadersChain:
    case OrderedWay::LeadersChain8:
      p.proto = Proto::LL;
      p.viaLeaders = true;
      p.chain = true;
      p.pieceBytes = w == OrderedWay::LeadersChain
                         ? halfTheCall(k, bytes, kOrderedLeadersPieceMinBytes)
                         : pieceOfCall(k, bytes, 8, 4 << 10);
      break;
    case OrderedWay::Rails:
    case OrderedWay::RailsHalves: {
      p.proto = Proto::Simple;
      p.viaLeaders = false;
      p.chain = true;
      const size_t parts = static_cast<size_t>(std::max(k.railsWidth, 1));
      p.pieceBytes = w == OrderedWay::Rails ? halfTheCall(k, bytes, 16 << 10)
                                            : pieceOfCall(k, bytes, 2 * parts, 16 << 10);
      break;
    }
    case OrderedWay::Plan:
    case OrderedWay::Count: break;
  }
  return p;
}

int orderedAllReduceWays(const TuningTables* tables, const PlanKnobs& k, size_t bytes,
                         const Plan& base, OrderedWay* ways) {
  ways[0] = OrderedWay::Plan;
  const bool unrestricted =
      tables == nullptr || (inMask(tables->algoMask, static_cast<int>(Algo::Direct)) &&
                            inMask(tables->protoMask, static_cast<int>(Proto::LL)) &&
                            inMask(tables->protoMask, static_cast<int>(Proto::Simple)));
  if (!base.ordered || base.pairCells || base.algo != Algo::Direct || k.allShm || !k.railsFit ||
      k.railsWidth < 2 || k.llBytes == 0 || !unrestricted || bytes < kOrderedWaysMinBytes ||
      bytes >= kOrderedWaysMaxBytes || !(base.viaLeaders || base.chain))
    return 1;
  // The same list for every size of a power-of-two bucket (thresholds are powers of two),
  // whichever of them orderedPlan picked: the swap up to 256 KiB (above, it carried a host's
  // inputs at 1.6x the default on 2 x 2, docs/PERF.md#perf-z3repro), the leaders' chain in
  // eighths from 256 KiB and the rails in halves of a part from 128 KiB (smaller, their
  // pieces fall under 32 and 16 KiB, where tcp pieces cost more than they overlap).
  int n = 0;
  if (bytes < (512 << 10)) ways[n++] = OrderedWay::Swap;
  ways[n++] = OrderedWay::LeadersChain;
  if (bytes >= (256 << 10)) ways[n++] = OrderedWay::LeadersChain8;
  ways[n++] = OrderedWay::Rails;
  if (bytes >= (128 << 10)) ways[n++] = OrderedWay::RailsHalves;
  return n;
}

bool orderedPlan(const TuningTables* tables, const PlanKnobs& k, Coll coll, size_t bytes,
                 const PlanCall& call, Plan* p) {
  if (!k.reproducible || k.nranks < 3 || !isReduction(coll) || !call.orderMatters) return false;
  // Four ranks crowding their CPUs on one host, where the default runs halving and doubling
  // on the pair cells (crowdedPairCells): the rank-order schedule on the same cells
  // (src/algorithms/ordered_pairs.cc), the halving's pieces and the same one partner a wait.
  // The ordered exchange below took 1.33-1.53x the halving's time at 2-4 MiB there (each of
  // its rounds waits on three peers, 16 rounds of 64 KiB pieces at 4 MiB;
  // docs/PERF.md#perf-r36order).
  if (crowdedPairCells(tables, k, coll, bytes)) {
    *p = Plan{Algo::Halving, Proto::Simple, pairHalvingHalf(bytes, k.pairCellBytes),
              streamingOutput(k.ntBytes, k.cacheShareBytes, k.nranks, coll, bytes, call.inPlace)};
    p->ordered = true;
    p->pairCells = true;
    return true;
  }
  const int perShare = tables != nullptr ? tables->piecesPerShare : 4;
  const bool llAllowed =
      tables == nullptr || inMask(tables->protoMask, static_cast<int>(Proto::LL));
  // Up to what one LL message carries, every rank's whole input (all-reduce, reduce) or the
  // whole send buffer (reduce-scatter) goes in one LL message: one hop, as the default
  // direct plan. Above it, or where CHORUS_PROTO excludes LL, the same exchange in slot
  // pieces on the FIFOs.
  const bool ll = bytes <= k.llBytes && llAllowed && k.llBytes > 0;
  // No streaming stores into the sums: the owner reads back each piece n - 1 times.
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
    // An all-reduce out of place from CHORUS_NT_THRESHOLD writes the peers' results with
    // streaming stores (orderedAllReduce; its sums with ordinary ones): np 4 on 2 CPUs,
    // 8-32 MiB, 6-11% faster (in place 0-40% slower: there the lines are in cache).
    p->streaming = coll == Coll::AllReduce && !call.inPlace && bytes >= k.ntBytes;
  }
  if (p->pieceBytes < 64) p->pieceBytes = 64;
  if (coll == Coll::AllReduce && !k.allShm) {
    // Where shared memory does not join every pair (several hosts, or tcp forced), the
    // direct exchange sends every rank's blocks to every remote peer (1.4-4.3x the default
    // over tcp, 2 hosts x 2 ranks). Small calls go through the host leaders, who swap their
    // hosts' inputs (host 0's as its partial sum where the hosts hold contiguous runs of
    // ranks: one crossing of each link each way, as the default's leaders' doubling) and
    // each add them in rank order, or, from kOrderedLeadersChainMinBytes, chain their hosts'
    // partial sums (up to kOrderedLeadersMaxBytes); larger ones the leaders' rails or a
    // chain in rank order (orderedRun chooses by the layout), which carry each link's
    // partial sums once a direction, both directions overlapped, in pieces of half the call
    // (at least 16 KiB, at most a slot; the rails: at most a k-th of the call). Smaller
    // pieces cost more than their overlap gives back over tcp here: the rank chain with an
    // eighth, 1.7-1.9x the default at 256-512 KiB; a quarter, 1.4-1.5x; half, 1.2-1.5x; a
    // 32nd, 2.1-3.2x at 256 KiB-1 MiB; the rails in halves or quarters of a k-th, 1.0-1.3x
    // and 1.1-2.2x at 128 KiB-4 MiB where one piece per k-th was 0.9-1.1x.
    // From kOrderedLeadersChainMinBytes, where the layout fits the rails, the rails rather
    // than the leaders' chain: with the sockets no longer paced (docs/PERF.md#perf-r36tail)
    // they took 0.69-0.70x the default's time at 64 KiB with one rank of each host per CPU
    // where the chain took 1.19-1.21x, and 1.08-1.16x against 1.22-1.28x unplaced (2 hosts x
    // 2 ranks, docs/PERF.md#perf-lead-night). Not where a host's ranks share CPUs
    // (hostCpusShared): there every rank of a host waits on tcp and its mates for the CPU,
    // and at 64 KiB the rails took 1.44-1.52x the default in the VM's windows where a cache
    // line between the vCPUs takes 0.5-0.85 us, against 1.21-1.30x for the leaders' chain in
    // the same sittings (1.14-1.27x against the rails' 1.18-1.22x where it takes 0.12 us;
    // docs/PERF.md#perf-r36cell). The leaders' chain also keeps the layouts the rails cannot
    // take (contiguous runs of unequal length, one rank a host).
    const bool railsFirst =
        k.railsFit && !k.hostCpusShared && bytes >= kOrderedLeadersChainMinBytes;
    if (llAllowed && k.llBytes > 0 && bytes <= kOrderedLeadersMaxBytes && !railsFirst) {
      p->proto = Proto::LL;
      p->viaLeaders = true;
      if (bytes >= kOrderedLeadersChainMinBytes) {
        p->chain = true;  // the leaders' chain
        p->pieceBytes = halfTheCall(k, bytes, kOrderedLeadersPieceMinBytes);
      }
    } else {
      p->proto = Proto::Simple;
      p->chain = true;
      p->pieceBytes = halfTheCall(k, bytes, 16 << 10);
    }
  }
  // A restriction that leaves out direct (or the protocol) cannot keep the order: this plan
  // runs anyway, reported as a fallback (WARN once; CHORUS_ALGO_STRICT=1 fails the call).
  if (tables != nullptr)
    p->fallback = !inMask(tables->algoMask, static_cast<int>(Algo::Direct)) ||
                  !inMask(tables->protoMask, static_cast<int>(p->proto));
  return true;
}

}  // namespace chorus
