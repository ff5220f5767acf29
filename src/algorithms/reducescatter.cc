// reducescatter.cc — block r of the reduction lands on rank r: a pipelined ring where the
// partial sum of block c starts at rank c+1 and finishes at rank c.
#include <algorithm>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

chorusResult_t reduceScatterRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  // Ring in comm->ring order: the partial sum of the block owned s+1 positions back moves
  // forward each step, so every block is complete when it reaches its owner.
  const int n = comm->nranks, rank = comm->rank;
  const RingOrder& ring = comm->ring;
  const int next = ring.next, prev = ring.prev, me = ring.me;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  auto block = [&](int r) { return in + static_cast<size_t>(r) * blockBytes; };
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  for (size_t off = 0; off < a.count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, a.count - off);
    const size_t o = off * elem;
    CHORUS_CHECK(p.send(next, block(ring.at(me - 1)) + o, cnt, true));
    for (int s = 1; s < n - 1; ++s)
      CHORUS_CHECK(p.recvReduceSend(prev, next, block(ring.at(me - s - 1)) + o, cnt));
    CHORUS_CHECK(p.recvReduceCopy(prev, block(rank) + o, out + o, cnt, true));
  }
  return chorusSuccess;
}

}  // namespace chorus
