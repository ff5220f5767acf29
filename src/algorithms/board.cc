// board.cc — schedules on the shared boards (transports/board.h): every rank copies its
// bytes in once, every peer copies them out of the board in place.
//
// All-gather, piece by piece (a piece: up to a board buffer of each rank's block): write the
// piece of this rank's block to its board and post it, then take each peer's piece from the
// peer's board as soon as it is posted. One wait per peer for whichever peer has written,
// never a chain of forwards; with ranks crowding their CPUs (np 4 on 2 CPUs) the ring's
// n - 1 hand-offs per piece each waited for one particular rank to be scheduled
// (docs/PERF.md#perf-board). Bytes copied per rank: its piece once in, the n - 1
// peers' pieces out; the ring copies 2(n - 1) times per rank (slot in, slot out). Written
// with ordinary stores: streaming ones, chosen per call as for the all-reduce's shares
// below, cost the all-gather 14-30% at 64 KiB-1 MiB where the vCPUs share an L3 (the
// chooser's trial calls; docs/PERF.md#perf-board-far).
//
// All-reduce, piece by piece (a piece: up to a board buffer of the whole vector): every rank
// writes its piece to its board (pre-multiplied where the op says so) and posts it; rank r
// reduces share r of the piece from all n boards, in rank order (the same bits whoever ran
// first), into its board's other buffer and its output, posts that, and copies every peer's
// reduced share out of the peer's board. Two waits per piece, as the direct schedule on the
// FIFOs (allReduceDirectFifo), without its n - 1 copies into slots each way.
//
// Broadcast (crowded same-host calls above 64 KiB, up to a board buffer): the root writes
// each piece to its board once and posts it; every other rank posts (saying it is done with
// the root's last piece) and copies the root's piece out. Each rank then waits for every
// peer's post of the epoch (rule (a) of transports/board.h, so the boards stay safe for the
// next collective), in the order they come. The ring's chain instead copies the message
// twice on every middle rank and waits for each forward in turn: with 4 ranks on 2 CPUs
// each of those waits is a turn on a CPU (docs/PERF.md#perf-np4steady).
//
// The reduced shares are written to the board the way the slot-store chooser says
// (CHORUS_SLOT_STORES, runWithSlotStores): each is read by every peer, and where the VM's
// vCPUs sit on different dies the peers read them faster from memory (streaming stores)
// than from this core's cache, one line at a time across the dies; where the vCPUs share an
// L3 it is the other way round (docs/PERF.md#perf-board-far). The inputs are always written
// with ordinary stores: each share of an input is read by one rank alone, and streaming
// stores made it slower even with the vCPUs apart.
#include <algorithm>
#include <cstring>
#include <vector>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

namespace {

chorusResult_t allGatherBoardSteps(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                   Prims& p) {
  SharedBoard* board = comm->peerMem.board;
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  const WaitCtx& w = p.waitCtx();
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  char* mine = out + static_cast<size_t>(rank) * blockBytes;
  const size_t piece = std::max(elem, plan.pieceBytes / elem * elem);
  for (size_t off = 0; off < blockBytes; off += piece) {
    const size_t bytes = std::min(piece, blockBytes - off);
    // Free to write: every peer posted the last piece after reading this buffer's last use
    // (transports/board.h, rules (a) and (b); this loop keeps both).
    const uint64_t epoch = board->nextEpoch();
    std::memcpy(board->own(epoch), in + off, bytes);
    board->post(epoch);
    // This rank's own block while the peers take the piece (in place: already there).
    if (mine != in) std::memcpy(mine + off, in + off, bytes);
    for (int k = 1; k < n; ++k) {
      const int from = (rank + k) % n;
      const char* src = nullptr;
      chorusResult_t r = board->waitPosted(from, epoch, &src, w);
      if (r != chorusSuccess) return p.failed(r, "waiting for the board of", from);
      kernels::copy(out + static_cast<size_t>(from) * blockBytes + off, src, bytes, plan.streaming);
    }
  }
  return chorusSuccess;
}

chorusResult_t allReduceBoardSteps(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                   Prims& p) {
  SharedBoard* board = comm->peerMem.board;
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize();
  const WaitCtx& w = p.waitCtx();
  const kernels::ReduceSpec& spec = p.spec();
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const unsigned outFlags = plan.streaming ? kernels::kStreaming : 0u;
  std::vector<const char*> src(static_cast<size_t>(n));
  for (size_t base = 0; base < a.count; base += pieceElems) {
    const size_t cnt = std::min(pieceElems, a.count - base);
    // Shares of whole 64-byte lines where the piece allows (no two ranks write one line).
    const size_t lineElems = std::max<size_t>(1, 64 / elem);
    const size_t share =
        ((cnt + n - 1) / static_cast<size_t>(n) + lineElems - 1) / lineElems * lineElems;
    auto off = [&](int r) { return std::min(static_cast<size_t>(r) * share, cnt); };
    auto len = [&](int r) { return std::min(static_cast<size_t>(r + 1) * share, cnt) - off(r); };
    // Both buffers free to write when this rank gets to them (transports/board.h, rules (a)
    // and (b)): the input's, as every peer posted the last epoch (the previous piece's
    // shares) after reading its last use; the share's, as every peer posts this piece's input
    // after reading the last reduced shares, and this rank waits for those posts first.
    const uint64_t inEpoch = board->nextEpoch(), sumEpoch = board->nextEpoch();
    const char* piece = in + base * elem;
    if (spec.preMul)
      kernels::reduce(spec, board->own(inEpoch), nullptr, piece, cnt, kernels::kApplyPre);
    else
      std::memcpy(board->own(inEpoch), piece, cnt * elem);
    board->post(inEpoch);
    // This rank's share: every rank's input, in rank order.
    const size_t mineOff = off(rank) * elem, mineLen = len(rank);
    for (int k = 0; k < n; ++k) {
      chorusResult_t r = board->waitPosted(k, inEpoch, &src[static_cast<size_t>(k)], w);
      if (r != chorusSuccess) return p.failed(r, "waiting for the board of", k);
      src[static_cast<size_t>(k)] += mineOff;
    }
    char* sum = board->own(sumEpoch) + mineOff;
    char* dst = out + base * elem + mineOff;
    if (mineLen > 0) {
      // Folds into the output (our input is on the board by now), the last one to both
      // places (reduceCopy's second output may alias its accumulator).
      const void* acc = src[0];
      for (int k = 1; k < n - 1; ++k) {
        kernels::reduce(spec, dst, acc, src[static_cast<size_t>(k)], mineLen, 0);
        acc = dst;
      }
      if (p.slotStreaming()) {
        // reduceCopy streams to its second output only, which is the accumulator here:
        // the output first (from the cache), then one streaming copy to the board.
        kernels::reduce(spec, dst, acc, src[static_cast<size_t>(n - 1)], mineLen,
                        kernels::kApplyPost);
        kernels::copy(sum, dst, mineLen * elem, true);
      } else {
        kernels::reduceCopy(spec, sum, dst, acc, src[static_cast<size_t>(n - 1)], mineLen,
                            kernels::kApplyPost | outFlags);
      }
    }
    board->post(sumEpoch);
    for (int k = 1; k < n; ++k) {
      const int from = (rank + k) % n;
      const char* res = nullptr;
      chorusResult_t r = board->waitPosted(from, sumEpoch, &res, w);
      if (r != chorusSuccess) return p.failed(r, "waiting for the board of", from);
      kernels::copy(out + (base + off(from)) * elem, res + off(from) * elem, len(from) * elem,
                    plan.streaming);
    }
  }
  return chorusSuccess;
}

}  // namespace

chorusResult_t allGatherBoard(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const SharedBoard* board = comm->peerMem.board;
  const size_t blockBytes = a.count * p.elemSize();
  if (board == nullptr || plan.pieceBytes == 0 || plan.pieceBytes > board->bufferBytes())
    return planCannotRun(comm, a, plan, blockBytes * static_cast<size_t>(comm->nranks));
  noteRan(comm, Algo::Direct, Proto::Simple, PathRan::Fifo, true);
  return allGatherBoardSteps(comm, a, plan, p);
}

chorusResult_t broadcastBoard(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  SharedBoard* board = comm->peerMem.board;
  const int n = comm->nranks, rank = comm->rank, root = a.root;
  const size_t elem = p.elemSize(), bytes = a.count * elem;
  if (board == nullptr || plan.pieceBytes == 0 || plan.pieceBytes > board->bufferBytes())
    return planCannotRun(comm, a, plan, bytes);
  noteRan(comm, Algo::Direct, Proto::Simple, PathRan::Fifo, true);
  const WaitCtx& w = p.waitCtx();
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t piece = std::max(elem, plan.pieceBytes / elem * elem);
  std::vector<int> peers(static_cast<size_t>(n));
  for (size_t off = 0; off < bytes; off += piece) {
    const size_t len = std::min(piece, bytes - off);
    const uint64_t epoch = board->nextEpoch();
    if (rank == root) {
      std::memcpy(board->own(epoch), in + off, len);
      board->post(epoch);
      if (out != in) std::memcpy(out + off, in + off, len);
    } else {
      // Posting says this rank has finished with the root's last piece (rule (b)); its own
      // buffer carries nothing.
      board->post(epoch);
      const char* src = nullptr;
      chorusResult_t r = board->waitPosted(root, epoch, &src, w);
      if (r != chorusSuccess) return p.failed(r, "waiting for the board of", root);
      kernels::copy(out + off, src, len, plan.streaming);
    }
    // Rule (a): every peer's post of this epoch, in the order they come (for the root: each
    // reader is done with the piece before last, whose buffer the next piece takes).
    int left = 0;
    for (int k = 1; k < n; ++k) {
      const int peer = (rank + k) % n;
      if (peer != root || rank == root) peers[static_cast<size_t>(left++)] = peer;
    }
    while (left > 0) {
      int i = 0;
      const char* src = nullptr;
      chorusResult_t r = board->waitAnyPosted(peers.data(), left, epoch, &i, &src, w);
      if (r != chorusSuccess) return p.failed(r, "waiting for the board of", peers[0]);
      for (int j = i; j + 1 < left; ++j)
        peers[static_cast<size_t>(j)] = peers[static_cast<size_t>(j + 1)];
      --left;
    }
  }
  return chorusSuccess;
}

chorusResult_t allReduceBoard(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const SharedBoard* board = comm->peerMem.board;
  if (board == nullptr || plan.pieceBytes == 0 || plan.pieceBytes > board->bufferBytes())
    return planCannotRun(comm, a, plan, a.count * p.elemSize());
  noteRan(comm, Algo::Direct, Proto::Simple, PathRan::Fifo, true);
  return runWithSlotStores(comm, a, plan, p, SlotStoreUse::AllReduce, a.count * p.elemSize(),
                           a.sendbuf == a.recvbuf, allReduceBoardSteps);
}

}  // namespace chorus
