// allgather.cc — every rank's block to every rank.
//
// Small: each rank writes its block to every other rank on the LL path. Where ranks crowd
// their CPUs, the shared boards (board.cc). Otherwise a pipelined ring: each block travels
// n-1 hops, forwarded piece by piece.
#include <algorithm>
#include <cstring>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

namespace {

// Ring in comm->ring order: at step s a rank forwards the block that started s positions
// before it.
chorusResult_t allGatherRing(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  auto block = [&](int r) { return out + static_cast<size_t>(r) * blockBytes; };
  const RingOrder& ring = comm->ring;
  const int next = ring.next, prev = ring.prev, me = ring.me;
  // Two ranks on shared memory: one piece per block, up to a slot (choosePlan).
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  for (size_t off = 0; off < a.count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, a.count - off);
    const size_t o = off * elem;
    CHORUS_CHECK(p.copySend(next, in + o, block(rank) + o, cnt));
    for (int s = 1; s < n - 1; ++s)
      CHORUS_CHECK(p.recvCopySend(prev, next, block(ring.at(me - s)) + o, cnt));
    CHORUS_CHECK(p.recv(prev, block(ring.at(me + 1)) + o, cnt));
  }
  return chorusSuccess;
}

}  // namespace

chorusResult_t allGatherRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  auto block = [&](int r) { return out + static_cast<size_t>(r) * blockBytes; };
  if (plan.algo == Algo::Halving) {
    if (!halvingFits(n)) return planCannotRun(comm, a, plan, blockBytes * static_cast<size_t>(n));
    return allGatherDoubling(comm, a, plan, p);
  }
  if (plan.board) return allGatherBoard(comm, a, plan, p);  // crowded same-host calls
  if (plan.algo == Algo::Direct) {
    noteRan(comm, Algo::Direct, Proto::LL);
    for (int k = 1; k < n; ++k) CHORUS_CHECK(p.sendLL((rank + k) % n, in, blockBytes));
    if (block(rank) != in) std::memmove(block(rank), in, blockBytes);
    for (int k = 1; k < n; ++k) {
      int from = (rank - k + n) % n;
      CHORUS_CHECK(p.recvLL(from, block(from), blockBytes));
    }
    return chorusSuccess;
  }
  if (plan.algo != Algo::Ring)
    return planCannotRun(comm, a, plan, blockBytes * static_cast<size_t>(n));
  noteRan(comm, Algo::Ring, Proto::Simple);
  if (pairRuns(comm)) return allGatherPair(comm, a, plan, p);  // two ranks: the pair cells
  // Slot stores chosen per call from the timing of earlier ones (CHORUS_SLOT_STORES).
  return runWithSlotStores(comm, a, plan, p, SlotStoreUse::AllGather, blockBytes, block(rank) == in,
                           allGatherRing);
}

}  // namespace chorus
