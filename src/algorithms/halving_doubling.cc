// halving_doubling.cc — recursive halving and doubling: all-reduce (Rabenseifner's),
// reduce-scatter (halving) and all-gather (doubling), each step a pairwise exchange.
//
// All-reduce: a reduce-scatter in log2(n) pairwise exchanges of halves, then an all-gather
// retracing them in reverse.
//
// Step k of the reduce-scatter pairs position p with p ^ 2^k: both hold partial results of
// the same range, each sends the partner the half it will not keep and reduces the half it
// keeps with the partner's; after log2(n) steps each position owns 1/n of the vector,
// fully reduced (post applied there). The all-gather swaps the owned ranges back, doubling
// them each step. Every rank sends and receives 2 (n-1)/n of the vector, as on the ring,
// but in 2 log2(n) dependent steps instead of 2 (n-1), and every step is a pairwise
// exchange (both directions of one link at once). Where every message waits for its
// receiver's turn on a crowded CPU (namespaced hosts sharing a kernel's CPUs, over tcp)
// the number of dependent steps is what costs (docs/PERF.md#perf-tcp-mid-sizes).
//
// Positions are ring positions (comm->ring: a host's ranks adjacent), so with hosts of
// 2^j ranks the first j steps, which move the larger halves, stay inside a host (shm), and
// only the later, smaller ones cross the network. Where n is not a power of two, the
// positions from pow2 on first hand their input to position - pow2 and get the result
// back at the end (as recursive doubling does). Each element is reduced at one position
// only, in an order fixed by the positions, and copied to the others: every rank ends with
// the same bits.
//
// Reduce-scatter (halving) and all-gather (doubling), for a power-of-two number of ranks:
// the same pairwise exchanges in rank order, the highest bit first for the reduce-scatter
// (so each rank's kept range stays contiguous and ends as its own block) and the lowest
// first for the all-gather (its range grows from its own block). log2(n) dependent steps
// instead of the ring's n-1, and the ring's bytes. Each element of block r is reduced on
// the way to rank r alone.
#include <algorithm>
#include <cstring>
#include <vector>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/bits.h"
#include "src/core/checks.h"

namespace chorus {

namespace {

struct Range {
  size_t lo, hi;  // elements [lo, hi)
  size_t size() const { return hi - lo; }
};

// One pairwise exchange in pieces: `ahead` pieces out before the first comes in, then one
// out per one in, so the link is not idle while a piece is reduced, and each side is at
// most `ahead` pieces ahead of the other: the FIFO holds that many without the receiver
// (measured, 2 x 2, 64-256 MiB, one piece ahead: 1.5-2.3x the tree's time, the pipe idle
// during every reduction). Sends `ns` elements from `send` (pre if `sendPre`); receives
// `nr` into `dst`: dst = slot OP local (local pre if `localPre`, post if `post`) where
// `reduce`, else dst = slot.
struct Exchange {
  Prims& p;
  size_t pieceElems;
  size_t ahead;

  chorusResult_t run(int peer, const char* send, size_t ns, bool sendPre, char* dst, size_t nr,
                     const char* local, bool localPre, bool reduce, bool post) const {
    const size_t elem = p.elemSize();
    const size_t pieces =
        std::max((ns + pieceElems - 1) / pieceElems, (nr + pieceElems - 1) / pieceElems);
    auto sendPiece = [&](size_t k) -> chorusResult_t {
      const size_t so = k * pieceElems;
      if (k >= pieces || so >= ns) return chorusSuccess;
      return p.send(peer, send + so * elem, std::min(pieceElems, ns - so), sendPre);
    };
    for (size_t k = 0; k + 1 < ahead; ++k) CHORUS_CHECK(sendPiece(k));
    for (size_t k = 0; k < pieces; ++k) {
      const size_t ro = k * pieceElems;
      CHORUS_CHECK(sendPiece(k + ahead - 1));
      if (ro < nr) {
        const size_t cnt = std::min(pieceElems, nr - ro);
        if (reduce)
          CHORUS_CHECK(
              p.recvReduceCopy(peer, local + ro * elem, dst + ro * elem, cnt, post, localPre));
        else
          CHORUS_CHECK(p.recv(peer, dst + ro * elem, cnt));
      }
    }
    return chorusSuccess;
  }
};

Exchange exchangeFor(chorusComm* comm, const Plan& plan, Prims& p) {
  return Exchange{p, std::max<size_t>(1, plan.pieceBytes / p.elemSize()),
                  comm->tuning.fifoDepth >= 3 ? size_t{2} : size_t{1}};
}

}  // namespace

chorusResult_t allReduceHalving(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  noteRan(comm, Algo::Halving, Proto::Simple);
  const int n = comm->nranks;
  const int me = comm->ring.me;
  const size_t elem = p.elemSize();
  const Exchange ex = exchangeFor(comm, plan, p);
  const size_t pieceElems = ex.pieceElems;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t count = a.count;
  const int pow2 = static_cast<int>(floorPow2(static_cast<uint64_t>(n)));
  const int extra = n - pow2;
  auto rankAt = [&](int pos) { return comm->ring.at(pos); };

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
  const int steps = floorLog2(static_cast<uint64_t>(pow2));
  std::vector<Range> kept(static_cast<size_t>(steps) + 1);
  Range cur{0, count};
  for (int s = 0; s < steps; ++s) {
    const int partnerPos = me ^ (1 << s);
    const size_t mid = cur.lo + (cur.hi - cur.lo + 1) / 2;
    const Range lower{cur.lo, mid}, upper{mid, cur.hi};
    const bool keepLower = me < partnerPos;
    const Range keep = keepLower ? lower : upper, give = keepLower ? upper : lower;
    CHORUS_CHECK(ex.run(rankAt(partnerPos), local + give.lo * elem, give.size(), localPre,
                        out + keep.lo * elem, keep.size(), local + keep.lo * elem, localPre, true,
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
    CHORUS_CHECK(ex.run(rankAt(partnerPos), out + cur.lo * elem, cur.size(), false,
                        out + other.lo * elem, other.size(), nullptr, false, false, false));
    cur = parent;
  }
  if (me < extra) {
    const int peer = rankAt(me + pow2);
    for (size_t o = 0; o < count; o += pieceElems)
      CHORUS_CHECK(p.send(peer, out + o * elem, std::min(pieceElems, count - o), false));
  }
  return chorusSuccess;
}

chorusResult_t reduceScatterHalving(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                    Prims& p) {
  noteRan(comm, Algo::Halving, Proto::Simple);
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), count = a.count;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const Exchange ex = exchangeFor(comm, plan, p);
  // Partial results of the kept half after the first step live in scratch (the output
  // holds one block only), indexed from that half's first element; the last step reduces
  // into the output.
  Range cur{0, count * static_cast<size_t>(n)};
  const char* local = in;
  bool localPre = true;
  char* scratch = nullptr;
  size_t scratchLo = 0;
  for (int mask = n / 2; mask >= 1; mask /= 2) {
    const int peer = rank ^ mask;
    const size_t mid = cur.lo + cur.size() / 2;
    const bool keepLower = (rank & mask) == 0;
    const Range keep = keepLower ? Range{cur.lo, mid} : Range{mid, cur.hi};
    const Range give = keepLower ? Range{mid, cur.hi} : Range{cur.lo, mid};
    const bool last = mask == 1;
    char* dst;
    if (last) {
      dst = out;
    } else {
      if (!scratch) {
        scratch = static_cast<char*>(comm->scratch.get(comm->scratch.a, keep.size() * elem));
        scratchLo = keep.lo;
      }
      dst = scratch + (keep.lo - scratchLo) * elem;
    }
    const size_t base = local == in ? 0 : scratchLo;
    CHORUS_CHECK(ex.run(peer, local + (give.lo - base) * elem, give.size(), localPre, dst,
                        keep.size(), local + (keep.lo - base) * elem, localPre, true, last));
    cur = keep;
    local = scratch;
    localPre = false;
  }
  return chorusSuccess;
}

chorusResult_t allGatherDoubling(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  noteRan(comm, Algo::Halving, Proto::Simple);
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), count = a.count;
  char* out = static_cast<char*>(a.recvbuf);
  const Exchange ex = exchangeFor(comm, plan, p);
  const size_t r = static_cast<size_t>(rank);
  if (out + r * count * elem != a.sendbuf)
    std::memmove(out + r * count * elem, a.sendbuf, count * elem);
  Range cur{r * count, (r + 1) * count};
  for (int mask = 1; mask < n; mask *= 2) {
    const int peer = rank ^ mask;
    // The partner holds the range of the same size on the other side of the bit.
    const Range other = (rank & mask) == 0 ? Range{cur.hi, cur.hi + cur.size()}
                                           : Range{cur.lo - cur.size(), cur.lo};
    CHORUS_CHECK(ex.run(peer, out + cur.lo * elem, cur.size(), false, out + other.lo * elem,
                        other.size(), nullptr, false, false, false));
    cur = Range{std::min(cur.lo, other.lo), std::max(cur.hi, other.hi)};
  }
  return chorusSuccess;
}

}  // namespace chorus
