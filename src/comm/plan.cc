// plan.cc — the communicator's plans: its cost-model tables, built once from its shape
// (src/tuning does the model, as pure functions), and the choice per call.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "src/comm/comm.h"
#include "src/core/debug.h"
#include "src/core/params.h"
#include "src/tuning/tuning.h"

namespace chorus {
namespace {

// Every rank must compute the same shape, so the same plan: the facts come from the peer
// table (identical on every rank) and the transports in use.
ShapeInputs shapeInputs(const chorusComm* comm) {
  ShapeInputs in;
  in.nranks = comm->nranks;
  for (const PeerInfo& pi : comm->peers) in.hostOfRank.push_back(pi.hostHash);
  in.minCpus = comm->ncpus;
  in.kernelRanksPerCpu = comm->maxRanksPerKernelCpu;  // the same on every rank (init.cc)
  for (const PeerInfo& p : comm->peers) in.minCpus = std::min(in.minCpus, p.ncpus);
  for (const auto& t : comm->transports) {
    if (std::strcmp(t->name(), "shm") == 0)
      in.shmHops = true;
    else
      in.otherHops = true;
  }
  in.shmDisabled = paramInt(Param::ShmDisable) != 0;
  in.llBytes = comm->tuning.llBytes;
  in.slotBytes = comm->tuning.slotBytes;
  in.treeBytes = comm->tuning.treeBytes;
  return in;
}

const TuningTables& tables(chorusComm* comm) {
  PlanCache& c = comm->plans;
  std::call_once(c.once, [comm, &c] {
    const ModelParams p = loadModelParams(paramString(Param::TuningFile));
    c.tables = tablesFor(p, shapeFrom(shapeInputs(comm)), comm->tuning.algo, comm->tuning.proto,
                         comm->rank == 0);
  });
  return c.tables;
}

}  // namespace

void commTuningInit(chorusComm* comm) {
  if (comm && comm->nranks > 1) (void)tables(comm);
}

Plan commChoosePlan(chorusComm* comm, Coll coll, size_t bytes) {
  PlanCache& memo = comm->plans;
  // The same call again: the same plan (the INFO line went out the first time; TRACE,
  // which reports every call, takes the long way).
  if (memo.lastValid && memo.lastColl == coll && memo.lastBytes == bytes &&
      !logEnabled(LogLevel::Trace, kLogTuning))
    return memo.last;
  const CommTuning& t = comm->tuning;
  const PlanKnobs k{comm->nranks, t.slotBytes, t.ntBytes, t.tcpPieceMin, comm->peerMem.allShm};
  const TuningTables* tab = comm->nranks > 1 ? &tables(comm) : nullptr;
  if (tab != nullptr && logEnabled(LogLevel::Info, kLogTuning)) {
    // Once per power-of-two size bucket and collective: what the tables picked.
    const Algo algo = tab->pick(coll, bytes);
    int bucket = 0;
    while (bucket < 63 && (size_t{2} << bucket) <= bytes) ++bucket;
    const uint64_t bit = uint64_t{1} << bucket;
    std::atomic<uint64_t>& logged = comm->plans.logged[static_cast<int>(coll)];
    if (!(logged.load(std::memory_order_relaxed) & bit) &&
        !(logged.fetch_or(bit, std::memory_order_relaxed) & bit))
      CHORUS_INFO(kLogTuning, "%s of %zu B (and up to %zu B) on %d ranks: %s/%s", collName(coll),
                  bytes, (size_t{2} << bucket) - 1, comm->nranks, algoName(algo),
                  protoName(protoOf(algo)));
  }
  const Plan p = choosePlan(tab, k, coll, bytes);
  CHORUS_TRACE(kLogTuning, "%s %zu B on %d ranks: %s/%s, pieces of %zu B%s", collName(coll), bytes,
               comm->nranks, algoName(p.algo), protoName(p.proto), p.pieceBytes,
               p.streaming ? ", streaming stores" : "");
  memo.lastValid = true;
  memo.lastColl = coll;
  memo.lastBytes = bytes;
  memo.last = p;
  return p;
}

}  // namespace chorus
