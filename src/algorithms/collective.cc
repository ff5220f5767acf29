// collective.cc — from a resolved call to the algorithm that runs it.
#include <cstdio>
#include <cstring>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"

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
    default: return chorusSuccess;
  }
}

size_t resultBytes(const chorusComm* comm, const CollArgs& a) {
  const size_t bytes = a.count * kernels::typeSize(a.type);
  switch (a.coll) {
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
    case Coll::Scatter:
    case Coll::Gather: return bytes * static_cast<size_t>(comm->nranks);
    default: return bytes;
  }
}

}  // namespace

chorusResult_t planCannotRun(chorusComm* comm, const CollArgs& a, const Plan& plan, size_t bytes) {
  CHORUS_FAIL(chorusInternalError,
              "%s of %zu B on %d ranks: the plan (%s) cannot run here; the planner "
              "(src/tuning/choose_plan.cc) and the algorithms disagree",
              collName(a.coll), bytes, comm->nranks, planText(plan).c_str());
}

namespace {

// The schedule that runs a call on the FIFOs (or the LL path): the plan's, always.
chorusResult_t runSchedule(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  switch (a.coll) {
    case Coll::AllReduce: {
      const size_t bytes = a.count * p.elemSize();
      switch (plan.algo) {
        case Algo::Direct:
          if (plan.board) return allReduceBoard(comm, a, plan, p);
          if (plan.proto == Proto::Simple) return allReduceDirectFifo(comm, a, plan, p);
          if (bytes > comm->tuning.llBytes) return planCannotRun(comm, a, plan, bytes);
          return allReduceDirect(comm, a, p);
        case Algo::Doubling:
          if (bytes > doublingMaxBytes(comm)) return planCannotRun(comm, a, plan, bytes);
          return allReduceRecDoubling(comm, a, p);
        case Algo::Tree: return allReduceTree(comm, a, plan, p);
        case Algo::Halving:
          if (plan.pairCells) return allReduceHalvingPairs(comm, a, plan, p);
          return allReduceHalving(comm, a, plan, p);
        case Algo::Ring: return allReduceRing(comm, a, plan, p);
      }
      return planCannotRun(comm, a, plan, bytes);
    }
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

chorusResult_t dispatch(chorusComm* comm, const CollArgs& a, uint64_t seq) {
  if (comm->nranks == 1) return runSingleRank(a);
  if (comm->checkMode) CHORUS_CHECK(checkCallMatches(comm, a, seq));
  if (a.count == 0 && a.coll != Coll::Barrier) return chorusSuccess;
  const size_t result = resultBytes(comm, a);
  const Plan plan = commChoosePlan(
      comm, a.coll, result, PlanCall{a.sendbuf == a.recvbuf, a.root, orderMatters(a.coll, a.spec)});
  PlanCache::Record& rec = comm->plans.record;
  rec.seq = seq;
  rec.coll = a.coll;
  rec.bytes = result;
  rec.plan = plan;
  rec.ranValid = false;
  if (plan.fallback && comm->plans.strict)
    CHORUS_FAIL(chorusInvalidUsage,
                "%s of %zu B on %d ranks: CHORUS_ALGO=%s CHORUS_PROTO=%s cannot run it "
                "(CHORUS_ALGO_STRICT=1; without it this plan would run: %s)",
                collName(a.coll), result, comm->nranks, comm->tuning.algo.c_str(),
                comm->tuning.proto.c_str(), planText(plan).c_str());
  Prims p(comm, a.spec, collName(a.coll), seq, plan.streaming);
  p.noteWaitsIn(comm->flight->waitSlot(a.frId));
  // tcp sends pieces from the caller's buffers (no copy into a slot): the call ends once
  // the kernel holds them (settleSends).
  p.allowSendFromUser();
  if (plan.ordered) return p.settleSends(orderedRun(comm, a, plan, p));  // reproducible mode
  if (plan.route != Route::SingleCopy) return p.settleSends(runSchedule(comm, a, plan, p));
  bool timeLeased = false;
  if (singleCopyLeased(comm, a, result, &timeLeased)) {
    if (!timeLeased) return p.settleSends(runSchedule(comm, a, plan, p));
    const int64_t t0 = nowNs();
    CHORUS_CHECK(p.settleSends(runSchedule(comm, a, plan, p)));
    singleCopyLeaseTimed(comm, a, result, nowNs() - t0);
    return chorusSuccess;
  }
  // Timed from before the descriptors are swapped to the end of whichever path ran: the
  // copy path is chosen from these times (src/tuning/copy_path.h).
  const int64_t t0 = nowNs();
  bool done = false;
  CopyPathCall call;
  CHORUS_CHECK(singleCopyRun(comm, a, plan, p, seq, result, &done, &call));
  if (!done) CHORUS_CHECK(p.settleSends(runSchedule(comm, a, plan, p)));
  singleCopyTimed(comm, a, call, seq, nowNs() - t0);
  return chorusSuccess;
}

}  // namespace

void frOperationFailed(chorusComm* comm, chorusResult_t r, const char* what, uint64_t seq) {
  // A timeout or a failed peer is what a hang report is for: every rank that sees one
  // writes its recorder now (the others write theirs when they fail in turn or end the
  // communicator). Usage errors and aborts are not hangs.
  if (r != chorusTimeout && r != chorusRemoteError) return;
  char reason[96];
  std::snprintf(reason, sizeof reason, "%s in %s #%llu",
                r == chorusTimeout ? "timeout" : "peer failure", what,
                static_cast<unsigned long long>(seq));
  frDumpIfConfigured(comm, reason, true, threadLastError());
}

namespace {
// The numbered collective `a` (its recorder entry started) runs; its entry is closed.
chorusResult_t runNumbered(chorusComm* comm, const CollArgs& a, uint64_t seq) {
  const chorusResult_t r = dispatch(comm, a, seq);
  comm->flight->finish(a.frId, r);
  if (__builtin_expect(r != chorusSuccess, 0)) frOperationFailed(comm, r, collName(a.coll), seq);
  return r;
}
}  // namespace

chorusResult_t runCollective(chorusComm* comm, const CollArgs& a) {
  if (a.coll == Coll::Send || a.coll == Coll::Recv) return runP2pBatch(comm, &a, 1);
  const uint64_t seq = ++comm->opCount;
  comm->flight->start(a.frId, seq);
  return runNumbered(comm, a, seq);
}

chorusResult_t runCollectiveNow(chorusComm* comm, CollArgs* a) {
  const uint64_t seq = ++comm->opCount;
  a->frId = comm->flight->begin(static_cast<int>(a->coll), a->type, a->count, a->op, a->root, seq);
  return runNumbered(comm, *a, seq);
}

}  // namespace chorus
