// pair.cc — two ranks on one host: all-gather, all-to-all, all-reduce (direct and ring) and
// reduce-scatter through the pair cells (transports/pair_cells.h) instead of the FIFO slots.
//
// Each piece (up to a cell) is one exchange: write this rank's piece to its cell, post it,
// copy this rank's own block where out of place, wait for the peer's piece and copy it out
// of the peer's cell (the all-reduce: reduce it with this rank's piece). The cell written
// at the next exchange is the one just read, so nothing waits for the peer to hand a slot
// back. Where the two cores sat on different dies the FIFO's copies took 1.23-1.37x as long
// (docs/PERF.md#perf-farlab). Ordinary stores: the peer reads the piece at once, from this
// core's cache.
#include <algorithm>
#include <cstring>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

chorusResult_t takePeerPiece(PairCells* cells, Prims& p, uint64_t x, const char** cell) {
  chorusResult_t r = cells->waitPeer(x, cell, p.waitCtx());
  if (r != chorusSuccess) return p.failed(r, "waiting for the pair cell of", cells->peer());
  return chorusSuccess;
}

void putOwnInput(Prims& p, char* dst, const char* src, size_t count) {
  if (p.spec().preMul)
    kernels::reduce(p.spec(), dst, nullptr, src, count, kernels::kApplyPre);
  else
    std::memcpy(dst, src, count * p.elemSize());
}

namespace {

// An exchange in two halves, so a caller can work between them: `bytes` from `send` into
// this rank's cell (pre-multiplied where `pre` and the op says so: `bytes` is then whole
// elements), posted (returns the exchange); then the peer's cell of that exchange.
uint64_t postPiece(PairCells* cells, Prims& p, const char* send, size_t bytes, bool pre = false) {
  const uint64_t x = cells->nextExchange();
  if (pre)
    putOwnInput(p, cells->own(x), send, bytes / p.elemSize());
  else
    std::memcpy(cells->own(x), send, bytes);
  cells->post(x);
  return x;
}

// One whole exchange: `bytes` from `send` out; *cell: the peer's piece.
chorusResult_t swapOnce(PairCells* cells, Prims& p, const char* send, size_t bytes,
                        const char** cell, bool pre = false) {
  return takePeerPiece(cells, p, postPiece(cells, p, send, bytes, pre), cell);
}

// This rank's input as both reduce it: pre-multiplied once into scratch where the op says
// so (so both operands of the reduction come pre-multiplied, and in place the input is kept
// from the output).
const char* preMultiplied(chorusComm* comm, const CollArgs& a, size_t elem) {
  if (!a.spec.preMul) return static_cast<const char*>(a.sendbuf);
  char* t = static_cast<char*>(comm->scratch.get(comm->scratch.a, a.count * elem));
  kernels::reduce(a.spec, t, nullptr, a.sendbuf, a.count, kernels::kApplyPre);
  return t;
}

// dst = post(x0 OP x1), rank 0's operand first on both ranks (the same bits).
void reduceInRankOrder(int rank, Prims& p, char* dst, const char* mine, const char* theirs,
                       size_t count, unsigned flags) {
  if (rank == 0)
    kernels::reduce(p.spec(), dst, mine, theirs, count, flags);
  else
    kernels::reduce(p.spec(), dst, theirs, mine, count, flags);
}

// Sends `bytes` from `send` and receives as many into `recv` (which may be `send`: each
// piece goes out before the peer's piece at the same offset comes in); copies `own` to
// `ownDst` (bytes) on the way, if ownDst is not null.
chorusResult_t pairSwap(chorusComm* comm, Prims& p, const char* send, char* recv, size_t bytes,
                        const char* own, char* ownDst, bool streaming) {
  PairCells* cells = comm->peerMem.pair;
  const size_t piece = cells->cellBytes();
  for (size_t off = 0; off < bytes || off == 0; off += piece) {
    const size_t n = std::min(piece, bytes - off);
    const uint64_t x = postPiece(cells, p, send + off, n);
    // Our own block while the peer takes the piece (the order of Prims::copySend).
    if (ownDst != nullptr) kernels::copy(ownDst + off, own + off, n, streaming);
    const char* cell = nullptr;
    CHORUS_CHECK(takePeerPiece(cells, p, x, &cell));
    kernels::copy(recv + off, cell, n, streaming);
    if (bytes == 0) break;
  }
  return chorusSuccess;
}

}  // namespace

bool pairRuns(const chorusComm* comm) { return comm->nranks == 2 && comm->peerMem.pair; }

chorusResult_t allGatherPair(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int rank = comm->rank, peer = 1 - rank;
  const size_t blockBytes = a.count * p.elemSize();
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  char* mine = out + static_cast<size_t>(rank) * blockBytes;
  return pairSwap(comm, p, in, out + static_cast<size_t>(peer) * blockBytes, blockBytes, in,
                  mine != in ? mine : nullptr, plan.streaming);
}

chorusResult_t allToAllPair(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int rank = comm->rank, peer = 1 - rank;
  const size_t blockBytes = a.count * p.elemSize();
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t mine = static_cast<size_t>(rank) * blockBytes;
  const size_t theirs = static_cast<size_t>(peer) * blockBytes;
  return pairSwap(comm, p, in + theirs, out + theirs, blockBytes, in + mine,
                  in != out ? out + mine : nullptr, plan.streaming);
}

// The two-rank direct all-reduce (allreduce.cc, allReduceTwoRanks) on the cells: each rank
// swaps its whole input (pre-multiplied where the op says so) for its peer's, piece by
// piece, and reduces both in rank order, x0 OP x1, on both ranks (the same bits).
chorusResult_t allReduceTwoRanksPair(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p) {
  PairCells* cells = comm->peerMem.pair;
  const size_t elem = p.elemSize(), count = a.count;
  const size_t pieceElems = std::max<size_t>(1, cells->cellBytes() / elem);
  const char* mine = preMultiplied(comm, a, elem);
  char* out = static_cast<char*>(a.recvbuf);
  const unsigned flags = kernels::kApplyPost | (plan.streaming ? kernels::kStreaming : 0u);
  for (size_t off = 0; off < count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, count - off), o = off * elem;
    // In place, this piece of our input is in the cell before the reduction overwrites it.
    const char* cell = nullptr;
    CHORUS_CHECK(swapOnce(cells, p, mine + o, cnt * elem, &cell));
    reduceInRankOrder(comm->rank, p, out + o, mine + o, cell, cnt, flags);
  }
  return chorusSuccess;
}

// The two-rank ring all-reduce (reduce-scatter, then all-gather) on the cells: per piece of
// up to two cells, rank r owns share r (whole 64-byte lines where the piece allows); one
// exchange swaps the shares each rank does not own, each rank reduces its own in rank order,
// and a second exchange swaps the reduced shares.
chorusResult_t allReduceRingPair(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  PairCells* cells = comm->peerMem.pair;
  const int rank = comm->rank, peer = 1 - rank;
  const size_t elem = p.elemSize(), count = a.count;
  const size_t cellElems = std::max<size_t>(1, cells->cellBytes() / elem);
  const size_t lineElems = std::max<size_t>(1, 64 / elem);
  const char* mine = preMultiplied(comm, a, elem);
  char* out = static_cast<char*>(a.recvbuf);
  const unsigned flags = kernels::kApplyPost | (plan.streaming ? kernels::kStreaming : 0u);
  for (size_t base = 0; base < count; base += 2 * cellElems) {
    const size_t total = std::min(2 * cellElems, count - base);
    const size_t first =
        std::min({total, cellElems, (total / 2 + lineElems - 1) / lineElems * lineElems});
    const size_t off[2] = {base, base + first}, len[2] = {first, total - first};
    const char* cell = nullptr;
    CHORUS_CHECK(swapOnce(cells, p, mine + off[peer] * elem, len[peer] * elem, &cell));
    char* share = out + off[rank] * elem;
    reduceInRankOrder(rank, p, share, mine + off[rank] * elem, cell, len[rank], flags);
    CHORUS_CHECK(swapOnce(cells, p, share, len[rank] * elem, &cell));
    kernels::copy(out + off[peer] * elem, cell, len[peer] * elem, plan.streaming);
  }
  return chorusSuccess;
}

// The two-rank reduce-scatter (the ring's one step) on the cells: per piece, each rank swaps
// the peer's block of its input (pre-multiplied where the op says so) for the peer's piece
// of its own block and reduces the two into its output, the peer's operand first (the
// ring's order, recvReduceCopy: the same bits as CHORUS_PAIR_CELLS=0; with two operands
// the reproducible mode's rank order up to the order of a commutative op's operands).
// In place the output is this rank's block itself: each piece is read before it is written.
chorusResult_t reduceScatterPair(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  PairCells* cells = comm->peerMem.pair;
  const int rank = comm->rank, peer = 1 - rank;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  const size_t pieceElems =
      std::max<size_t>(1, std::min(plan.pieceBytes, cells->cellBytes()) / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  const char* mine = in + static_cast<size_t>(rank) * blockBytes;
  const char* theirs = in + static_cast<size_t>(peer) * blockBytes;
  char* out = static_cast<char*>(a.recvbuf);
  const unsigned flags =
      kernels::kApplyPre | kernels::kApplyPost | (plan.streaming ? kernels::kStreaming : 0u);
  for (size_t off = 0; off < a.count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, a.count - off), o = off * elem;
    const char* cell = nullptr;
    CHORUS_CHECK(swapOnce(cells, p, theirs + o, cnt * elem, &cell, true));
    kernels::reduce(p.spec(), out + o, cell, mine + o, cnt, flags);
  }
  return chorusSuccess;
}

}  // namespace chorus
