// reduce.cc — all to root: a pipelined chain in ring order ending at the root, each rank
// adding its input to the passing partial sum.
#include <algorithm>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

chorusResult_t reduceRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  if (plan.algo != Algo::Ring) return planCannotRun(comm, a, plan, a.count * p.elemSize());
  noteRan(comm, Algo::Ring, Proto::Simple);
  const int n = comm->nranks, root = a.root;
  // A chain along comm->ring ending at the root (chain position n-1).
  const int pos = (comm->ring.me - comm->ring.pos[static_cast<size_t>(root)] - 1 + 2 * n) % n;
  const int next = comm->ring.next, prev = comm->ring.prev;
  const size_t elem = p.elemSize();
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  for (size_t off = 0; off < a.count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, a.count - off);
    if (pos == 0)
      CHORUS_CHECK(p.send(next, in + off * elem, cnt, true));
    else if (pos == n - 1)
      CHORUS_CHECK(p.recvReduceCopy(prev, in + off * elem, out + off * elem, cnt, true));
    else
      CHORUS_CHECK(p.recvReduceSend(prev, next, in + off * elem, cnt));
  }
  return chorusSuccess;
}

}  // namespace chorus
