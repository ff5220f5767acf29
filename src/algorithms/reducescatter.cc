// reducescatter.cc — block r of the reduction lands on rank r: a pipelined ring where the
// partial sum of block c starts at rank c+1 and finishes at rank c. Where the plan says
// direct (small calls on one host, choosePlan), the LL path instead: every rank sends block
// r to rank r, which reduces the n blocks in rank order (one hop instead of n-1 FIFO steps).
#include <algorithm>
#include <cstring>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {
namespace {

using kernels::kApplyPost;
using kernels::kApplyPre;

chorusResult_t reduceScatterDirect(chorusComm* comm, const CollArgs& a, Prims& p) {
  noteRan(comm, Algo::Direct, Proto::LL);
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  const size_t all = blockBytes * static_cast<size_t>(n);
  const kernels::ReduceSpec& spec = a.spec;
  const char* in = static_cast<const char*>(a.sendbuf);
  const void* mine = in + static_cast<size_t>(rank) * blockBytes;
  // Our input, pre-multiplied once; our own block kept safe from the in-place output.
  if (spec.preMul) {
    void* t = comm->scratch.get(comm->scratch.a, all);
    kernels::reduce(spec, t, nullptr, a.sendbuf, a.count * static_cast<size_t>(n), kApplyPre);
    in = static_cast<const char*>(t);
    mine = in + static_cast<size_t>(rank) * blockBytes;
  } else if (mine == a.recvbuf) {
    void* t = comm->scratch.get(comm->scratch.a, blockBytes);
    std::memcpy(t, mine, blockBytes);
    mine = t;
  }
  for (int k = 1; k < n; ++k) {
    const int to = (rank + k) % n;
    CHORUS_CHECK(p.sendLL(to, in + static_cast<size_t>(to) * blockBytes, blockBytes));
  }
  for (int k = 0; k < n; ++k) {
    const void* src = mine;
    if (k != rank) CHORUS_CHECK(p.waitLL(k, &src, blockBytes));  // reduce straight from it
    const unsigned post = k == n - 1 ? kApplyPost : 0u;
    if (k == 0) {
      if (post && spec.postDiv > 1)
        kernels::reduce(spec, a.recvbuf, nullptr, src, a.count, post);
      else if (src != a.recvbuf)
        std::memcpy(a.recvbuf, src, blockBytes);
    } else {
      kernels::reduce(spec, a.recvbuf, a.recvbuf, src, a.count, post);
    }
    if (k != rank) p.releaseLL(k);
  }
  return chorusSuccess;
}

}  // namespace

chorusResult_t reduceScatterRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const size_t all = a.count * p.elemSize() * static_cast<size_t>(comm->nranks);
  if (plan.algo == Algo::Halving) {
    if (!halvingFits(comm->nranks)) return planCannotRun(comm, a, plan, all);
    return reduceScatterHalving(comm, a, plan, p);
  }
  if (plan.algo == Algo::Direct) {  // one host, small (choosePlan)
    if (all > comm->tuning.llBytes) return planCannotRun(comm, a, plan, all);
    return reduceScatterDirect(comm, a, p);
  }
  if (plan.algo != Algo::Ring) return planCannotRun(comm, a, plan, all);
  noteRan(comm, Algo::Ring, Proto::Simple);
  if (pairRuns(comm)) return reduceScatterPair(comm, a, plan, p);  // two ranks: the pair cells
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
