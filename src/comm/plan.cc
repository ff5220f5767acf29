// plan.cc — the communicator's plans: its cost-model tables, built once from its shape
// (src/tuning does the model and the plan, as pure functions), and the plan per call.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "src/comm/comm.h"
#include "src/core/bits.h"
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
  // By capability, not by name: a transport that joins ranks through shared memory (shm)
  // makes same-host hops; any other (tcp, rdma) makes network hops.
  for (const auto& t : comm->transports) {
    if (t->sharesMemory())
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
    c.strict = paramInt(Param::AlgoStrict) != 0;
    // Single copy swaps a descriptor with each peer in one LL message.
    bool fits = comm->sendConn.size() == static_cast<size_t>(comm->nranks);
    for (int r = 0; fits && r < comm->nranks; ++r)
      fits = r == comm->rank ||
             comm->sendConn[static_cast<size_t>(r)]->llMaxBytes() >= sizeof(PeerDesc);
    c.descFits = fits;
  });
  return c.tables;
}

}  // namespace

int orderedRailsWidth(const chorusComm* comm) {
  const int n = comm->nranks, hosts = comm->nHosts;
  if (hosts < 2 || n % hosts != 0 || n / hosts < 2) return 0;
  const int k = n / hosts;
  // nHosts blocks of k ranks, each on one host: then each block is a host of its own.
  for (int r = 0; r < n; ++r)
    if (comm->peers[static_cast<size_t>(r)].hostHash !=
        comm->peers[static_cast<size_t>(r - r % k)].hostHash)
      return 0;
  return k;
}

namespace {

// Whether some host's ranks have fewer CPUs between them than there are ranks on it.
bool hostCpusShared(const chorusComm* comm) {
  std::map<uint64_t, int> ranksOn;
  for (const PeerInfo& p : comm->peers) ++ranksOn[p.hostHash];
  for (const PeerInfo& p : comm->peers)
    if (p.ncpus < ranksOn[p.hostHash]) return true;
  return false;
}

PlanKnobs knobsOf(const chorusComm* comm) {
  const CommTuning& t = comm->tuning;
  const PeerMem& pm = comm->peerMem;
  PlanKnobs k;
  k.nranks = comm->nranks;
  k.slotBytes = t.slotBytes;
  k.ntBytes = t.ntBytes;
  k.cacheShareBytes = t.cacheShareBytes;
  k.l2Bytes = t.l2Bytes;
  k.tcpPieceMin = t.tcpPieceMin;
  k.allShm = pm.allShm;
  k.boardBytes = pm.board != nullptr ? pm.board->bufferBytes() : 0;
  k.pairCellBytes = pm.halvingPairs.empty() ? 0 : pm.halvingPairs[0]->cellBytes();
  k.llBytes = t.llBytes;
  k.singleCopyBytes = pm.allShm && comm->plans.descFits ? pm.threshold : ~size_t{0};
  k.cma = pm.cma;
  k.cmaLimit = pm.cmaLimit;
  k.reproducible = t.reproducible;
  k.crowded = comm->maxRanksPerKernelCpu > 1.0;
  k.railsFit = t.railsWidth != 0;
  k.hostCpusShared = t.hostCpusShared;
  k.railsWidth = t.railsWidth;
  return k;
}

}  // namespace

void commTuningInit(chorusComm* comm) {
  if (comm == nullptr) return;
  comm->tuning.railsWidth = orderedRailsWidth(comm);
  comm->tuning.hostCpusShared = hostCpusShared(comm);
  if (comm->nranks > 1) (void)tables(comm);
}

int commOrderedWays(chorusComm* comm, size_t bytes, const Plan& base, OrderedWay* ways) {
  const TuningTables* tab = comm->nranks > 1 ? &tables(comm) : nullptr;
  return orderedAllReduceWays(tab, knobsOf(comm), bytes, base, ways);
}

Plan commOrderedWayPlan(chorusComm* comm, size_t bytes, const Plan& base, OrderedWay w) {
  return orderedWayPlan(knobsOf(comm), bytes, base, w);
}

Plan commChoosePlan(chorusComm* comm, Coll coll, size_t bytes, const PlanCall& call) {
  PlanCache& memo = comm->plans;
  Plan p;
  // The same call again: the same plan (the INFO line went out the first time; TRACE,
  // which reports every call, takes the long way).
  const bool fromMemo = memo.lastValid && memo.lastColl == coll && memo.lastBytes == bytes &&
                        memo.lastInPlace == call.inPlace &&
                        memo.lastOrderMatters == call.orderMatters &&
                        !logEnabled(LogLevel::Trace, kLogTuning);
  if (fromMemo) {
    p = memo.last;
  } else {
    const TuningTables* tab = comm->nranks > 1 ? &tables(comm) : nullptr;
    p = choosePlan(tab, knobsOf(comm), coll, bytes, call);
    memo.lastValid = true;
    memo.lastColl = coll;
    memo.lastBytes = bytes;
    memo.lastInPlace = call.inPlace;
    memo.lastOrderMatters = call.orderMatters;
    memo.last = p;
    if (tab != nullptr && logEnabled(LogLevel::Info, kLogTuning)) {
      // Once per power-of-two size bucket and collective: the plan.
      const int bucket = floorLog2(bytes);
      const uint64_t bit = uint64_t{1} << bucket;
      std::atomic<uint64_t>& logged = comm->plans.logged[static_cast<int>(coll)];
      if (!(logged.load(std::memory_order_relaxed) & bit) &&
          !(logged.fetch_or(bit, std::memory_order_relaxed) & bit))
        CHORUS_INFO(kLogTuning, "%s of %zu B (and up to %zu B) on %d ranks: %s", collName(coll),
                    bytes, (size_t{2} << bucket) - 1, comm->nranks, planText(p).c_str());
    }
    if (p.fallback && comm->rank == 0) {
      // Visible once per collective: a forced algorithm or protocol that did not run.
      const uint32_t bit = 1u << static_cast<int>(coll);
      if (!(memo.warnedFallback.fetch_or(bit, std::memory_order_relaxed) & bit))
        CHORUS_WARN(kLogTuning,
                    "CHORUS_ALGO=%s CHORUS_PROTO=%s cannot run %s of %zu B on %d ranks: running "
                    "%s instead (CHORUS_ALGO_STRICT=1 fails such calls; later ones at TRACE)",
                    comm->tuning.algo.c_str(), comm->tuning.proto.c_str(), collName(coll), bytes,
                    comm->nranks, planText(p).c_str());
    }
  }
  // Single copy's path (CMA or the FIFO) is timed per call on the one rank that decides it
  // for every rank (CHORUS_CMA_MAX=auto, src/tuning/copy_path.h); its pick goes to the others
  // in its descriptor.
  if (p.route == Route::SingleCopy && p.cma && comm->peerMem.cmaAuto &&
      comm->rank == copyPathDecider(coll, call.root)) {
    p.cma = comm->peerMem.copyPaths[copyPathUse(coll)].choose(bytes, call.inPlace) == CopyPath::Cma;
    p.cmaTimed = true;
  }
  // (A plan taken from the memo is one TRACE is off for: no second look at the log level.)
  if (!fromMemo)
    CHORUS_TRACE(kLogTuning, "%s %zu B on %d ranks: %s", collName(coll), bytes, comm->nranks,
                 planText(p).c_str());
  return p;
}

}  // namespace chorus
