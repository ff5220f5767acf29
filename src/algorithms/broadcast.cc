// broadcast.cc — root to all.
//
// Small messages: the root writes the data to every rank on the LL path (one hop).
// Otherwise a pipelined chain in ring order from the root: each piece is forwarded as soon
// as it arrives, so the time is ~one copy of the message plus (n-1) pieces. Ranks crowding
// their CPUs on one host take the shared boards instead (board.cc) at mid sizes.
#include <algorithm>
#include <cstring>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

chorusResult_t broadcastRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank, root = a.root;
  const size_t elem = p.elemSize(), bytes = a.count * elem;
  if (plan.board) return broadcastBoard(comm, a, plan, p);  // crowded same-host calls
  if (plan.algo == Algo::Direct) {
    noteRan(comm, Algo::Direct, Proto::LL);
    if (rank == root) {
      for (int k = 1; k < n; ++k) CHORUS_CHECK(p.sendLL((root + k) % n, a.sendbuf, bytes));
      if (a.sendbuf != a.recvbuf) std::memcpy(a.recvbuf, a.sendbuf, bytes);
      return chorusSuccess;
    }
    return p.recvLL(root, a.recvbuf, bytes);
  }
  if (plan.algo != Algo::Ring) return planCannotRun(comm, a, plan, bytes);
  noteRan(comm, Algo::Ring, Proto::Simple);
  // A chain along comm->ring starting at the root.
  const int pos = (comm->ring.me - comm->ring.pos[static_cast<size_t>(root)] + n) % n;
  const int next = comm->ring.next, prev = comm->ring.prev;
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  // The root's own copy (out of place) has a store policy of its own (the plan's,
  // src/tuning/output_stores.h: it sets the pace, writing every piece twice).
  if (pos == 0) p.setStreaming(plan.rootCopyStreaming);
  for (size_t off = 0; off < a.count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, a.count - off);
    if (pos == 0)
      CHORUS_CHECK(p.copySend(next, in + off * elem, out + off * elem, cnt));
    else if (pos == n - 1)
      CHORUS_CHECK(p.recv(prev, out + off * elem, cnt));
    else
      CHORUS_CHECK(p.recvCopySend(prev, next, out + off * elem, cnt));
  }
  return chorusSuccess;
}

}  // namespace chorus
