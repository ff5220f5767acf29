// collective.cc — from a resolved call to the algorithm that runs it.
#include <cstring>

#include "algorithms/algorithms.h"
#include "algorithms/primitives.h"
#include "core/checks.h"
#include "core/debug.h"

namespace chorus {
namespace {

// One rank: the result is the input, decorated by pre/post where the op has them.
chorusResult_t runSingleRank(const CollArgs& a) {
  const size_t bytes = a.count * kernels::typeSize(a.type);
  switch (a.coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
    case Coll::ReduceScatter:
      if (a.spec.preMul || a.spec.postDiv > 1)
        kernels::reduce(a.spec, a.recvbuf, nullptr, a.sendbuf, a.count,
                        kernels::kApplyPre | kernels::kApplyPost);
      else if (a.recvbuf != a.sendbuf && bytes)
        std::memmove(a.recvbuf, a.sendbuf, bytes);
      return chorusSuccess;
    case Coll::Broadcast:
    case Coll::AllGather:
    case Coll::Scatter:
    case Coll::Gather:
    case Coll::AllToAll:
      if (a.recvbuf != a.sendbuf && bytes) std::memmove(a.recvbuf, a.sendbuf, bytes);
      return chorusSuccess;
    default:
      return chorusSuccess;
  }
}

size_t resultBytes(const chorusComm* comm, const CollArgs& a) {
  const size_t bytes = a.count * kernels::typeSize(a.type);
  switch (a.coll) {
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
    case Coll::Scatter:
    case Coll::Gather:
      return bytes * static_cast<size_t>(comm->nranks);
    default:
      return bytes;
  }
}

}  // namespace

chorusResult_t runCollective(chorusComm* comm, const CollArgs& a) {
  const uint64_t seq = ++comm->opCount;
  if (a.coll == Coll::Send || a.coll == Coll::Recv) return runP2pBatch(comm, &a, 1);
  if (comm->nranks == 1) return runSingleRank(a);
  if (a.count == 0 && a.coll != Coll::Barrier) return chorusSuccess;
  const Plan plan = choosePlan(comm, a.coll, resultBytes(comm, a));
  Prims p(comm, a.spec, collName(a.coll), seq, plan.streaming);
  switch (a.coll) {
    case Coll::AllReduce:
      if (plan.algo == Algo::Direct && a.count * p.elemSize() <= comm->tuning.llBytes)
        return allReduceDirect(comm, a, p);
      if (plan.algo == Algo::Tree) return allReduceTree(comm, a, plan, p);
      return allReduceRing(comm, a, plan, p);
    case Coll::Broadcast: return broadcastRun(comm, a, plan, p);
    case Coll::Reduce: return reduceRun(comm, a, plan, p);
    case Coll::AllGather: return allGatherRun(comm, a, plan, p);
    case Coll::ReduceScatter: return reduceScatterRun(comm, a, plan, p);
    case Coll::Scatter: return scatterRun(comm, a, plan, p);
    case Coll::Gather: return gatherRun(comm, a, plan, p);
    case Coll::AllToAll: return allToAllRun(comm, a, plan, p);
    case Coll::Barrier: return barrierRun(comm, p);
    case Coll::Send:
    case Coll::Recv: return runP2pBatch(comm, &a, 1);
  }
  CHORUS_FAIL(chorusInternalError, "unknown collective %d", static_cast<int>(a.coll));
}

}  // namespace chorus
