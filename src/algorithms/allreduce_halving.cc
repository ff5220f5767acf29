// allreduce_halving.cc — all-reduce by recursive halving and doubling (Rabenseifner's):
// a reduce-scatter in log2(n) pairwise exchanges of halves, then an all-gather retracing
// them in reverse.
//
// Step k of the reduce-scatter pairs position p with p ^ 2^k: both hold partial results of
// the same range, each sends the partner the half it will not keep and reduces the half it
// keeps with the partner's; after log2(n) steps each position owns 1/n of the vector,
// fully reduced (post applied there). The all-gather swaps the owned ranges back, doubling
// them each step. Every rank sends and receives 2 (n-1)/n of the vector, as on the ring,
// but in 2 log2(n) dependent steps instead of 2 (n-1), and every step is a pairwise
// exchange (both directions of one link at once). Where every message waits for its
// receiver's turn on a crowded CPU (namespaced hosts sharing a kernel's CPUs, over tcp)
// the number of dependent steps is what costs (docs/PERF.md "Session of 2026-11-25, third
// stop: tcp mid sizes").
//
// Positions are ring positions (comm->ring: a host's ranks adjacent), so with hosts of
// 2^j ranks the first j steps, which move the larger halves, stay inside a host (shm), and
// only the later, smaller ones cross the network. Where n is not a power of two, the
// positions from pow2 on first hand their input to position - pow2 and get the result
// back at the end (as recursive doubling does). Each element is reduced at one position
// only, in an order fixed by the positions, and copied to the others: every rank ends with
// the same bits.
#include <algorithm>
#include <vector>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

namespace {

struct Range {
  size_t lo, hi;  // elements [lo, hi)
};

}  // namespace

chorusResult_t allReduceHalving(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks;
  const int me = comm->ring.me;
  const size_t elem = p.elemSize();
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t count = a.count;
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int extra = n - pow2;
  auto rankAt = [&](int pos) { return comm->ring.at(pos); };

  // Pairwise exchange of ranges in pieces: `ahead` pieces out before the first comes in,
  // then one out per one in, so the link is not idle while a piece is reduced, and each
  // side is at most `ahead` pieces ahead of the other: the FIFO holds that many without
  // the receiver (measured, 2 x 2, 64-256 MiB, one piece ahead: 1.5-2.3x the tree's time,
  // the pipe idle during every reduction).
  const size_t ahead = comm->tuning.fifoDepth >= 3 ? 2 : 1;
  // `reduce`: in = slot OP local (local from `src`, pre if `pre`; post on the last step);
  // otherwise the piece is copied into the output.
  auto exchange = [&](int peer, Range sendR, const char* sendFrom, bool sendPre, Range recvR,
                      const char* local, bool localPre, bool reduce, bool post) -> chorusResult_t {
    const size_t ns = sendR.hi - sendR.lo, nr = recvR.hi - recvR.lo;
    const size_t pieces =
        std::max((ns + pieceElems - 1) / pieceElems, (nr + pieceElems - 1) / pieceElems);
    auto sendPiece = [&](size_t k) -> chorusResult_t {
      const size_t so = sendR.lo + k * pieceElems;
      if (k >= pieces || so >= sendR.hi) return chorusSuccess;
      return p.send(peer, sendFrom + so * elem, std::min(pieceElems, sendR.hi - so), sendPre);
    };
    for (size_t k = 0; k + 1 < ahead; ++k) CHORUS_CHECK(sendPiece(k));
    for (size_t k = 0; k < pieces; ++k) {
      const size_t ro = recvR.lo + k * pieceElems;
      CHORUS_CHECK(sendPiece(k + ahead - 1));
      if (ro < recvR.hi) {
        const size_t cnt = std::min(pieceElems, recvR.hi - ro);
        if (reduce)
          CHORUS_CHECK(
              p.recvReduceCopy(peer, local + ro * elem, out + ro * elem, cnt, post, localPre));
        else
          CHORUS_CHECK(p.recv(peer, out + ro * elem, cnt));
      }
    }
    return chorusSuccess;
  };

  // Folding in the positions beyond the largest power of two.
  if (me >= pow2) {
    const int peer = rankAt(me - pow2);
    for (size_t o = 0; o < count; o += pieceElems)
      CHORUS_CHECK(p.send(peer, in + o * elem, std::min(pieceElems, count - o), true));
    for (size_t o = 0; o < count; o += pieceElems)
      CHORUS_CHECK(p.recv(peer, out + o * elem, std::min(pieceElems, count - o)));
    return chorusSuccess;
  }
  // Where our current partial result lives, and whether it still needs pre.
  const char* local = in;
  bool localPre = true;
  if (me < extra) {
    const int peer = rankAt(me + pow2);
    for (size_t o = 0; o < count; o += pieceElems)
      CHORUS_CHECK(p.recvReduceCopy(peer, in + o * elem, out + o * elem,
                                    std::min(pieceElems, count - o), false, true));
    local = out;
    localPre = false;
  }

  // Reduce-scatter by halving.
  int steps = 0;
  while ((1 << steps) < pow2) ++steps;
  std::vector<Range> kept(static_cast<size_t>(steps) + 1);
  Range cur{0, count};
  for (int s = 0; s < steps; ++s) {
    const int partnerPos = me ^ (1 << s);
    const size_t mid = cur.lo + (cur.hi - cur.lo + 1) / 2;
    const Range lower{cur.lo, mid}, upper{mid, cur.hi};
    const bool keepLower = me < partnerPos;
    const Range keep = keepLower ? lower : upper, give = keepLower ? upper : lower;
    CHORUS_CHECK(exchange(rankAt(partnerPos), give, local, localPre, keep, local, localPre, true,
                          s == steps - 1));
    kept[static_cast<size_t>(s)] = cur;  // the range before this step
    cur = keep;
    local = out;  // the partial of the kept half now lives in the output, pre applied
    localPre = false;
  }
  // All-gather by doubling, the same pairs in reverse order.
  for (int s = steps - 1; s >= 0; --s) {
    const int partnerPos = me ^ (1 << s);
    const Range parent = kept[static_cast<size_t>(s)];
    const Range other = cur.lo == parent.lo ? Range{cur.hi, parent.hi} : Range{parent.lo, cur.lo};
    CHORUS_CHECK(
        exchange(rankAt(partnerPos), cur, out, false, other, nullptr, false, false, false));
    cur = parent;
  }
  if (me < extra) {
    const int peer = rankAt(me + pow2);
    for (size_t o = 0; o < count; o += pieceElems)
      CHORUS_CHECK(p.send(peer, out + o * elem, std::min(pieceElems, count - o), false));
  }
  return chorusSuccess;
}

}  // namespace chorus
