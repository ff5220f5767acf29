// ordered.cc — reproducible mode's schedules (orderedPlan, src/tuning/ordered_plan.cc): every
// element's n contributions are added on one rank, the element's owner, in rank order,
// ((x0 OP x1) OP x2) OP ..., so the bits depend only on the inputs and the world size.
//
// Why the order holds, whatever else changes (docs/ARCHITECTURE.md, "Reproducible mode"):
//  - Each output element is computed once, on its owner, by one loop over r = 0 .. n-1; a
//    peer's contribution is waited for in that loop, so arrival order, piece size, slot
//    size, transport and thread or process ranks change when it runs, never what it adds.
//  - Pieces cut the elements, never the sum: an element is in exactly one piece, and every
//    piece runs the same loop.
//  - A contribution arrives pre-multiplied by its sender (avg, PreMulSum), as every other
//    schedule sends it; pre(x) is one rounding of x alone, the same on any rank.
//  - The kernels' a OP b equals b OP a bit for bit (IEEE add and multiply commute; 16-bit
//    floats widen exactly and round once), so which operand is "local" does not matter.
//  - The other ranks get the result by copies only (all-gather, gather): no arithmetic.
// Up to CHORUS_LL_THRESHOLD the existing direct schedules on LL already add in rank order
// (allReduceDirect, the direct reduce-scatter); this file adds the rest, and
// ordered_hosts.cc the all-reduce where shared memory does not join every pair.
#include <algorithm>
#include <cstdio>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/ordered_hosts.h"
#include "src/algorithms/ordered_rails.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"

namespace chorus {

using kernels::kApplyPost;
using kernels::kApplyPre;

bool orderMatters(Coll coll, const kernels::ReduceSpec& s) {
  if (coll != Coll::AllReduce && coll != Coll::Reduce && coll != Coll::ReduceScatter) return false;
  const bool isFloat = s.type == chorusFloat16 || s.type == chorusBfloat16 ||
                       s.type == chorusFloat32 || s.type == chorusFloat64;
  return isFloat && (s.kind == kernels::ReduceKind::Sum || s.kind == kernels::ReduceKind::Prod);
}

namespace {

// An all-reduce's elements cut in n blocks, block r owned by rank r; block sizes a multiple
// of a cache line (the last ones shorter or empty).
struct Blocks {
  size_t per = 0, count = 0;
  size_t lo(int r) const { return std::min(count, per * static_cast<size_t>(r)); }
  size_t len(int r) const { return lo(r + 1) - lo(r); }
};

Blocks blocksOf(size_t count, int n, size_t elem) {
  const size_t line = std::max<size_t>(1, 64 / elem);
  Blocks b;
  b.count = count;
  b.per = ((count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n) + line - 1) / line * line;
  return b;
}

// What one ordered exchange needs: rank t's block of this rank's input is at in(t), len(t)
// elements; this rank's own block's result goes to acc, its own contribution read from mine.
struct Exchange {
  const char* in = nullptr;    // this rank's input, block t at in + inOff(t)
  size_t inStride = 0;         // reduce-scatter: block t at t * inStride; else 0 (use blocks)
  Blocks blocks;               // all-reduce / reduce: the element blocks
  char* acc = nullptr;         // this rank's block of the result
  const char* mine = nullptr;  // this rank's contribution to its own block
  // Where acc and mine share memory (in place) on a rank other than 0: a piece-sized place
  // for the sum of the ranks before this one, so that this rank's own contribution is read
  // before its result overwrites it; else nullptr (the sum builds up in acc).
  char* before = nullptr;
  size_t elems(int t) const { return inStride ? blocks.per : blocks.len(t); }
  const char* from(int t, size_t elem) const {
    return in + (inStride ? static_cast<size_t>(t) * inStride : blocks.lo(t) * elem);
  }
};

// One round of the direct reduce-scatter: this rank's piece [off, off + pieceElems) of every
// other rank's block goes to that rank; then its own block's piece is summed in rank order.
// Every rank sends all its pieces of a round before it receives any, and each FIFO carries a
// pair's messages in the order both sides walk them, so no cycle of full FIFOs can form
// (round k's sends wait only for round k-1's receives, which wait only for round k-1's sends).
chorusResult_t reduceRound(chorusComm* comm, const Exchange& x, Prims& p, size_t off,
                           size_t pieceElems) {
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize();
  for (int k = 1; k < n; ++k) {
    const int t = (rank + k) % n;
    if (off >= x.elems(t)) continue;
    const size_t cnt = std::min(pieceElems, x.elems(t) - off);
    CHORUS_CHECK(p.send(t, x.from(t, elem) + off * elem, cnt, true));
  }
  if (off >= x.elems(rank)) return chorusSuccess;
  const size_t cnt = std::min(pieceElems, x.elems(rank) - off);
  const kernels::ReduceSpec& spec = p.spec();
  char* d = x.acc + off * elem;
  const char* own = x.mine + off * elem;
  // In place, the ranks before this one are summed aside (x.before) and the step that adds
  // this rank's contribution reads it and writes the result in the same element: no copy of
  // the block, and the piece aside stays in cache.
  char* sum = x.before != nullptr ? x.before : d;
  for (int r = 0; r < n; ++r) {  // the rank order: the whole point of this file
    const unsigned post = r == n - 1 ? kApplyPost : 0u;
    if (r == rank) {
      kernels::reduce(spec, d, r == 0 ? nullptr : sum, own, cnt, kApplyPre | post);
      sum = d;
    } else if (r == 0) {
      CHORUS_CHECK(p.recv(0, sum, cnt));  // pre-multiplied by its sender
    } else {
      CHORUS_CHECK(p.recvReduceCopy(r, sum, sum, cnt, post != 0, false));
    }
  }
  return chorusSuccess;
}

// Where this rank's own contribution shares memory with its result (in place), a piece of
// scratch for the sum of the ranks before it (Exchange::before); rank 0 adds its own first
// and needs none.
char* sumAside(chorusComm* comm, const char* mine, const char* acc, size_t bytes,
               size_t pieceBytes) {
  const bool overlap = mine < acc + bytes && acc < mine + bytes;
  if (!overlap || comm->rank == 0 || bytes == 0) return nullptr;
  return static_cast<char*>(comm->scratch.get(comm->scratch.a, std::min(bytes, pieceBytes)));
}

size_t pieceElemsOf(const Plan& plan, size_t elem) {
  return std::max<size_t>(1, plan.pieceBytes / elem);
}

chorusResult_t orderedAllReduce(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize();
  Exchange x;
  x.in = static_cast<const char*>(a.sendbuf);
  x.blocks = blocksOf(a.count, n, elem);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t pieceElems = pieceElemsOf(plan, elem);
  x.acc = out + x.blocks.lo(rank) * elem;
  x.mine = x.in + x.blocks.lo(rank) * elem;
  x.before = sumAside(comm, x.mine, x.acc, x.blocks.len(rank) * elem, pieceElems * elem);
  p.setStreaming(false);  // the sum is read again: ordinary stores
  for (size_t off = 0; off < x.blocks.per; off += pieceElems) {
    CHORUS_CHECK(reduceRound(comm, x, p, off, pieceElems));
    // All-gather of this round's pieces: copies only.
    if (off < x.blocks.len(rank)) {
      const size_t cnt = std::min(pieceElems, x.blocks.len(rank) - off);
      for (int k = 1; k < n; ++k)
        CHORUS_CHECK(p.send((rank + k) % n, x.acc + off * elem, cnt, false));
    }
    // The peers' results with streaming stores where the plan says so (a large output, out
    // of place): lines no step reads again, and that are not in cache (in place they are:
    // this rank's input, just sent).
    p.setStreaming(plan.streaming);
    for (int k = 1; k < n; ++k) {
      const int from = (rank - k + n) % n;
      if (off >= x.blocks.len(from)) continue;
      const size_t cnt = std::min(pieceElems, x.blocks.len(from) - off);
      CHORUS_CHECK(p.recv(from, out + (x.blocks.lo(from) + off) * elem, cnt));
    }
    p.setStreaming(false);
  }
  return chorusSuccess;
}

chorusResult_t orderedReduceScatter(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                    Prims& p) {
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  Exchange x;
  x.in = static_cast<const char*>(a.sendbuf);
  x.inStride = blockBytes;
  x.blocks = Blocks{a.count, a.count};
  const size_t pieceElems = pieceElemsOf(plan, elem);
  x.acc = static_cast<char*>(a.recvbuf);
  x.mine = x.from(comm->rank, elem);
  x.before = sumAside(comm, x.mine, x.acc, blockBytes, pieceElems * elem);
  for (size_t off = 0; off < a.count; off += pieceElems)
    CHORUS_CHECK(reduceRound(comm, x, p, off, pieceElems));
  return chorusSuccess;
}

// Reduce: the ordered reduce-scatter, then every owner's block to the root (copies only).
chorusResult_t orderedReduce(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank, root = a.root;
  const size_t elem = p.elemSize();
  Exchange x;
  x.in = static_cast<const char*>(a.sendbuf);
  x.blocks = blocksOf(a.count, n, elem);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t myBytes = x.blocks.len(rank) * elem;
  const size_t pieceElems = pieceElemsOf(plan, elem);
  x.acc = rank == root ? out + x.blocks.lo(rank) * elem
                       : static_cast<char*>(comm->scratch.get(comm->scratch.b, myBytes));
  x.mine = x.in + x.blocks.lo(rank) * elem;
  x.before = sumAside(comm, x.mine, x.acc, myBytes, pieceElems * elem);
  for (size_t off = 0; off < x.blocks.per; off += pieceElems) {
    CHORUS_CHECK(reduceRound(comm, x, p, off, pieceElems));
    if (rank != root) {
      if (off < x.blocks.len(rank))
        CHORUS_CHECK(p.send(root, x.acc + off * elem,
                            std::min(pieceElems, x.blocks.len(rank) - off), false));
      continue;
    }
    for (int r = 0; r < n; ++r) {
      if (r == root || off >= x.blocks.len(r)) continue;
      const size_t cnt = std::min(pieceElems, x.blocks.len(r) - off);
      CHORUS_CHECK(p.recv(r, out + (x.blocks.lo(r) + off) * elem, cnt));
    }
  }
  return chorusSuccess;
}

// Reduce up to CHORUS_LL_THRESHOLD: every rank's whole input to the root in one LL message;
// the root adds them in rank order (allReduceDirect's loop, on one rank).
chorusResult_t orderedReduceLL(chorusComm* comm, const CollArgs& a, Prims& p) {
  const int n = comm->nranks, rank = comm->rank, root = a.root;
  const size_t bytes = a.count * p.elemSize();
  const kernels::ReduceSpec& spec = a.spec;
  const void* mine = a.sendbuf;
  if (spec.preMul || (rank == root && a.sendbuf == a.recvbuf && rank != 0)) {
    void* t = comm->scratch.get(comm->scratch.a, bytes);
    kernels::reduce(spec, t, nullptr, a.sendbuf, a.count, kApplyPre);
    mine = t;
  }
  if (rank != root) return p.sendLL(root, mine, bytes);
  for (int r = 0; r < n; ++r) {
    const void* src = mine;
    if (r != rank) CHORUS_CHECK(p.waitLL(r, &src, bytes));
    const unsigned post = r == n - 1 ? kApplyPost : 0u;
    kernels::reduce(spec, a.recvbuf, r == 0 ? nullptr : a.recvbuf, src, a.count, post);
    if (r != rank) p.releaseLL(r);
  }
  return chorusSuccess;
}

chorusResult_t runOrderedSteps(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const size_t bytes = a.count * p.elemSize();
  // Four crowded ranks on one host: on the pair cells (ordered_pairs.cc).
  if (plan.pairCells && a.coll == Coll::AllReduce) return orderedAllReducePairs(comm, a, plan, p);
  if (plan.algo != Algo::Direct) return planCannotRun(comm, a, plan, bytes);
  const bool ll = plan.proto == Proto::LL;
  switch (a.coll) {
    case Coll::AllReduce:
      if (plan.viaLeaders) return orderedAllReduceLeaders(comm, a, plan, p);  // ordered_hosts.cc
      if (plan.chain) {
        if (const int k = comm->tuning.railsWidth)
          return orderedAllReduceRails(comm, a, plan, p, k);  // ordered_rails.cc
        return orderedAllReduceChain(comm, a, plan, p);
      }
      if (!ll) {
        noteRan(comm, Algo::Direct, Proto::Simple);
        return orderedAllReduce(comm, a, plan, p);
      }
      if (bytes > comm->tuning.llBytes) return planCannotRun(comm, a, plan, bytes);
      return allReduceDirect(comm, a, p);  // rank order already
    case Coll::ReduceScatter:
      if (!ll) {
        noteRan(comm, Algo::Direct, Proto::Simple);
        return orderedReduceScatter(comm, a, plan, p);
      }
      return reduceScatterRun(comm, a, plan, p);  // direct on LL: rank order already
    case Coll::Reduce:
      if (ll && bytes > comm->tuning.llBytes) return planCannotRun(comm, a, plan, bytes);
      noteRan(comm, Algo::Direct, ll ? Proto::LL : Proto::Simple);
      return ll ? orderedReduceLL(comm, a, p) : orderedReduce(comm, a, plan, p);
    default: return planCannotRun(comm, a, plan, bytes);
  }
}

// The decider's Decision on the wire (the small LL message that starts a call whose
// Decision is due: OrderedWayChooser::syncDue).
struct WayMessage {
  uint32_t magic;
  uint32_t best, interval, tryWay;
};
constexpr uint32_t kWayMagic = 0x57a7e5u;

uint64_t nextRandom(uint64_t* s) {  // xorshift64*: CHORUS_REPRO_SCHEDULE=random's draws
  uint64_t x = *s != 0 ? *s : 0x2545f4914f6cdd1dull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545f4914f6cdd1dull;
}

// A reproducible all-reduce across hosts with several rank-order schedules to take
// (commOrderedWays): the one CHORUS_REPRO_SCHEDULE names, or the one the chooser says
// (src/tuning/ordered_chooser.h). The chooser's state is the same on every rank: it moves
// with the calls' count, and where a Decision is due rank 0 makes it from its own times and
// sends it to every other rank before the call (each waits for it), so every rank runs the
// same schedule in every call. All of them add in rank order: the choice changes the time,
// never the bits.
chorusResult_t orderedRunChosen(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p,
                                size_t bytes, const OrderedWay* ways, int nways) {
  const int pin = comm->tuning.reproSchedule;
  if (pin >= 0) {  // pinned: that schedule where it is one of this size's, else the plan's
    OrderedWay w = OrderedWay::Plan;
    for (int i = 0; i < nways; ++i)
      if (static_cast<int>(ways[i]) == pin) w = ways[i];
    return runOrderedSteps(comm, a, commOrderedWayPlan(comm, bytes, plan, w), p);
  }
  const bool random = pin == kOrderedWayRandom;
  OrderedWayChooser& ch = comm->orderedWays;
  const int n = comm->nranks, rank = comm->rank;
  if (ch.syncDue(bytes)) {
    OrderedWayChooser::Decision d;
    if (rank == 0) {
      d = ch.decide(bytes, nways);
      // The test mode: a short interval, so Decisions (and changes) come every few calls.
      if (random) d.interval = 1 + static_cast<uint32_t>(nextRandom(&comm->orderedWaysRng) % 4);
      const WayMessage m{kWayMagic, d.best, d.interval, d.tryWay};
      for (int r = 1; r < n; ++r) CHORUS_CHECK(p.sendLL(r, &m, sizeof m));
    } else {
      WayMessage m{};
      CHORUS_CHECK(p.recvLL(0, &m, sizeof m));
      if (m.magic != kWayMagic || m.best >= static_cast<uint32_t>(nways) ||
          m.tryWay >= static_cast<uint32_t>(nways))
        CHORUS_FAIL(chorusInternalError,
                    "rank %d: all_reduce of %zu B: rank 0's schedule message is not one "
                    "(magic %x, way %u, try %u of %d ways)",
                    rank, bytes, m.magic, m.best, m.tryWay, nways);
      d.best = m.best;
      d.interval = m.interval;
      d.tryWay = m.tryWay;
    }
    if (ch.apply(bytes, d, nways) && comm->orderedWayLogs < 256) {
      // Every rank logs each change, with the call's number: the lines of all ranks must
      // match (tests/multinode/repro_hosts.py compares them); rank 0 adds its figure.
      ++comm->orderedWayLogs;
      char why[64] = "";
      if (rank == 0)
        std::snprintf(why, sizeof why, " (rank 0's figure %.1f us)",
                      ch.figure(bytes, static_cast<int>(d.best)) / 1e3);
      CHORUS_INFO(kLogTuning,
                  "reproducible all_reduce of %zu B (its bucket): schedule %s from call #%llu%s",
                  bytes, orderedWayName(ways[d.best]),
                  static_cast<unsigned long long>(comm->plans.record.seq), why);
    }
  }
  const int w = ch.way(bytes);
  const Plan wp = commOrderedWayPlan(comm, bytes, plan, ways[w]);
  const int64_t t0 = rank == 0 ? nowNs() : 0;
  CHORUS_CHECK(runOrderedSteps(comm, a, wp, p));
  if (random) {
    // The test mode: every rank's figures random, and each rank's different (its own
    // draws), so only the Decision sent keeps the ranks on one schedule.
    ch.record(bytes, w, 1e3 * static_cast<double>(1 + nextRandom(&comm->orderedWaysRng) % 1000));
  } else if (rank == 0) {
    ch.record(bytes, w, static_cast<double>(nowNs() - t0));
  }
  ch.advance(bytes, nways);
  return chorusSuccess;
}

}  // namespace

chorusResult_t orderedRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  static_assert(static_cast<int>(OrderedWay::Count) <= OrderedWayChooser::kMaxWays,
                "a chooser figure per way");
  chorusResult_t r;
  OrderedWay ways[static_cast<int>(OrderedWay::Count)];
  const size_t bytes = a.count * p.elemSize();
  const int nways =
      a.coll == Coll::AllReduce && comm->tuning.reproSchedule != static_cast<int>(OrderedWay::Plan)
          ? commOrderedWays(comm, bytes, plan, ways)
          : 1;
  if (nways > 1)
    r = orderedRunChosen(comm, a, plan, p, bytes, ways, nways);
  else
    r = runOrderedSteps(comm, a, plan, p);
  if (comm->plans.record.ranValid) comm->plans.record.ran.ordered = true;
  return r;
}

}  // namespace chorus
