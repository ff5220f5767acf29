// allreduce.cc — all-reduce three ways.
//
// direct (LL): every rank sends its whole (small) input to every other rank on the
//   low-latency path and reduces all inputs in rank order: one hop of latency, and every
//   rank computes the same bits because the order is the same everywhere.
// ring: reduce-scatter then all-gather around the ring, in pieces so the ranks pipeline;
//   each element is reduced exactly once, by its owner, then copied around.
// tree: reduce up a binary tree, broadcast back down, piece by piece (log n hops).
#include <algorithm>
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/primitives.h"
#include "core/checks.h"

namespace chorus {

using kernels::kApplyPost;
using kernels::kApplyPre;

chorusResult_t allReduceDirect(chorusComm* comm, const CollArgs& a, Prims& p) {
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), bytes = a.count * elem;
  const kernels::ReduceSpec& spec = a.spec;
  const void* mine = a.sendbuf;
  // Our contribution, pre-multiplied once, and kept safe from the in-place output.
  if (spec.preMul) {
    void* t = comm->scratch.get(comm->scratch.a, bytes);
    kernels::reduce(spec, t, nullptr, a.sendbuf, a.count, kApplyPre);
    mine = t;
  } else if (a.sendbuf == a.recvbuf && n > 1) {
    void* t = comm->scratch.get(comm->scratch.a, bytes);
    std::memcpy(t, a.sendbuf, bytes);
    mine = t;
  }
  for (int k = 1; k < n; ++k) CHORUS_CHECK(p.sendLL((rank + k) % n, mine, bytes));
  for (int k = 0; k < n; ++k) {
    const void* src = mine;
    if (k != rank) CHORUS_CHECK(p.waitLL(k, &src, bytes));  // reduce straight from it
    const unsigned post = k == n - 1 ? kApplyPost : 0u;
    if (k == 0) {
      if (post && spec.postDiv > 1)
        kernels::reduce(spec, a.recvbuf, nullptr, src, a.count, post);
      else if (src != a.recvbuf)
        std::memcpy(a.recvbuf, src, bytes);
    } else {
      kernels::reduce(spec, a.recvbuf, a.recvbuf, src, a.count, post);
    }
    if (k != rank) p.releaseLL(k);
  }
  return chorusSuccess;
}

chorusResult_t allReduceRing(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  // Chunks are numbered by ring position (comm->ring), not rank: any numbering every rank
  // agrees on works, and this one keeps each host's ranks adjacent.
  const int n = comm->nranks, rank = comm->ring.me;
  const int next = comm->ring.next, prev = comm->ring.prev;
  const size_t elem = p.elemSize();
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t count = a.count;
  const size_t loopElems = pieceElems * static_cast<size_t>(n);

  for (size_t base = 0; base < count; base += loopElems) {
    const size_t remaining = count - base;
    // Split this loop's elements evenly over the ranks' chunks.
    const size_t chunk = std::min(pieceElems, (remaining + n - 1) / static_cast<size_t>(n));
    auto off = [&](int c) { return std::min(base + static_cast<size_t>(c) * chunk, count); };
    auto len = [&](int c) { return std::min(base + static_cast<size_t>(c + 1) * chunk, count) - off(c); };

    // Reduce-scatter: chunk `rank` starts here, chunk `rank+1` finishes here.
    int c = rank;
    CHORUS_CHECK(p.send(next, in + off(c) * elem, len(c), true));
    for (int s = 1; s < n - 1; ++s) {
      c = (rank - s + n) % n;
      CHORUS_CHECK(p.recvReduceSend(prev, next, in + off(c) * elem, len(c)));
    }
    c = (rank + 1) % n;
    CHORUS_CHECK(p.recvReduceCopySend(prev, next, in + off(c) * elem, out + off(c) * elem,
                                      len(c), true));
    // All-gather of the finished chunks.
    for (int s = 1; s < n - 1; ++s) {
      c = (rank + 1 - s + n) % n;
      CHORUS_CHECK(p.recvCopySend(prev, next, out + off(c) * elem, len(c)));
    }
    c = (rank + 2) % n;
    CHORUS_CHECK(p.recv(prev, out + off(c) * elem, len(c)));
  }
  return chorusSuccess;
}

chorusResult_t allReduceTree(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank;
  const int parent = rank == 0 ? -1 : (rank - 1) / 2;
  int children[2];
  int nchild = 0;
  for (int ch = 2 * rank + 1; ch <= 2 * rank + 2 && ch < n; ++ch) children[nchild++] = ch;
  const size_t elem = p.elemSize();
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);

  for (size_t off = 0; off < a.count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, a.count - off);
    const char* pin = in + off * elem;
    char* pout = out + off * elem;
    // Up: ((pre(own) OP child0) OP child1), the same association on every run.
    if (nchild == 0) {
      CHORUS_CHECK(p.send(parent, pin, cnt, true));
    } else if (nchild == 1) {
      if (parent < 0)
        CHORUS_CHECK(p.recvReduceCopy(children[0], pin, pout, cnt, true));
      else
        CHORUS_CHECK(p.recvReduceSend(children[0], parent, pin, cnt));
    } else {
      // First partial into the output buffer (as scratch), then combine the second child
      // with it. The partial is already pre-multiplied, so no pre on the second step.
      CHORUS_CHECK(p.recvReduceCopy(children[0], pin, pout, cnt, false));
      if (parent < 0) {
        CHORUS_CHECK(p.recvReduceCopy(children[1], pout, pout, cnt, true, false));
      } else {
        CHORUS_CHECK(p.recvReduceSend(children[1], parent, pout, cnt, false));
      }
    }
    // Down.
    if (parent < 0) {
      CHORUS_CHECK(p.sendMany(children, nchild, pout, cnt));
    } else if (nchild > 0) {
      CHORUS_CHECK(p.recvCopySendMany(parent, children, nchild, pout, cnt));
    } else {
      CHORUS_CHECK(p.recv(parent, pout, cnt));
    }
  }
  return chorusSuccess;
}

}  // namespace chorus
