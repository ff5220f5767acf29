// test_hooks.cc — see test_hooks.h.
#include "src/api/test_hooks.h"

#include <mutex>

#include "src/comm/comm.h"
#include "src/comm/exec_lock.h"
#include "src/core/checks.h"

extern "C" chorusResult_t chorusTestLastPlan(chorusComm_t comm, chorusTestPlanRecord* out) {
  using namespace chorus;
  CHORUS_CHECK(commCheck(comm, "chorusTestLastPlan"));
  if (out == nullptr) CHORUS_FAIL(chorusInvalidArgument, "chorusTestLastPlan: out is NULL");
  const std::unique_lock<std::mutex> lock = lockExec(comm);
  const PlanCache::Record& r = comm->plans.record;
  out->seq = r.seq;
  out->coll = collName(r.coll);
  out->bytes = r.bytes;
  out->planAlgo = algoName(r.plan.algo);
  out->planProto = protoName(r.plan.proto);
  out->planRoute = routeName(r.plan.route);
  out->planCma = r.plan.cma ? 1 : 0;
  out->planFallback = r.plan.fallback ? 1 : 0;
  out->ran = r.ranValid ? 1 : 0;
  out->ranAlgo = algoName(r.ran.algo);
  out->ranProto = protoName(r.ran.proto);
  out->ranPath = pathRanName(r.ran.path);
  out->allShm = comm->peerMem.allShm ? 1 : 0;
  out->networkHops = comm->nranks > 1 && !comm->plans.tables.sharedMemoryOnly ? 1 : 0;
  out->reproducible = comm->tuning.reproducible ? 1 : 0;
  out->planOrdered = r.plan.ordered ? 1 : 0;
  out->ranOrdered = r.ranValid && r.ran.ordered ? 1 : 0;
  out->planBoard = r.plan.board ? 1 : 0;
  out->ranBoard = r.ranValid && r.ran.board ? 1 : 0;
  out->planPairCells = r.plan.pairCells ? 1 : 0;
  out->ranPairCells = r.ranValid && r.ran.pairCells ? 1 : 0;
  return chorusSuccess;
}

extern "C" chorusResult_t chorusTestExecBias(chorusComm_t comm, int* state, int* ownedByCaller) {
  using namespace chorus;
  CHORUS_CHECK(commCheck(comm, "chorusTestExecBias"));
  if (!state || !ownedByCaller)
    CHORUS_FAIL(chorusInvalidArgument, "chorusTestExecBias: state or ownedByCaller is NULL");
  *state = comm->execBias.state.load(std::memory_order_relaxed);
  *ownedByCaller = *state == ExecBias::kBiased &&
                   comm->execBias.owner.load(std::memory_order_relaxed) == execThreadId();
  return chorusSuccess;
}
