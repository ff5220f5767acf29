// algorithms.h — collectives as schedules of primitive steps.
//
// An algorithm gets a resolved call (CollArgs, src/core/coll.h) and a plan from tuning (which
// algorithm, which protocol, which route, what piece size) and drives Prims. It runs what the
// plan says (a plan it cannot run is an internal error, never a quiet change of algorithm),
// records what ran (noteRan), and never knows which transport carries its bytes.
#pragma once

#include <cstddef>

#include "src/comm/comm.h"
#include "kernels/host/host_reduce.h"
#include "src/core/coll.h"
#include "src/tuning/tuning.h"

namespace chorus {

/// Runs one collective on the calling thread (the caller holds comm's exec lock: execMutex or
/// its bias, src/comm/exec_lock.h).
chorusResult_t runCollective(chorusComm* comm, const CollArgs& args);
/// runCollective for a blocking collective (never a send or receive) that was not queued:
/// numbers it and makes its flight-recorder entry, started, in one write (sets a->frId).
chorusResult_t runCollectiveNow(chorusComm* comm, CollArgs* a);

/// Runs a batch of sends and receives concurrently (group semantics: no deadlock whatever
/// the order of the calls).
chorusResult_t runP2pBatch(chorusComm* comm, const CollArgs* ops, int nops);

/// After an operation failed with `r`: on a timeout or a peer failure, writes the flight
/// recorder (CHORUS_FLIGHT_RECORDER_DIR) so every stuck rank leaves its story behind.
void frOperationFailed(chorusComm* comm, chorusResult_t r, const char* what, uint64_t seq);

/// CHORUS_CHECK_MODE: exchanges a signature of the call (collective, count, type, op, root,
/// sequence number) with every rank before it runs; chorusInvalidUsage on every rank, with
/// both calls named, when they differ (src/algorithms/check.cc).
chorusResult_t checkCallMatches(chorusComm* comm, const CollArgs& a, uint64_t seq);

/// What ran the current call (PlanCache::Record, read by tests through src/api/test_hooks.h):
/// every algorithm below records itself as it starts.
inline void noteRan(chorusComm* comm, Algo a, Proto pr, PathRan path = PathRan::Fifo,
                    bool board = false) {
  comm->plans.record.ran = Ran{a, pr, path, false, board};
  comm->plans.record.ranValid = true;
}

/// Same-host single copy (src/algorithms/single_copy.cc) for a call planned on that route
/// (Plan::route): sets *done = false when the call falls back to the FIFO schedule (a buffer
/// no peer can reach, or the deciding rank picked the FIFO; decided alike on every rank).
class Prims;
/// A call whose copy path (FIFO or CMA, src/tuning/copy_path.h) this rank chose for every
/// rank (chose), or followed.
struct CopyPathCall {
  bool chose = false;
  CopyPathUse use = CopyPathUse::AllGather;
  CopyPath way = CopyPath::Fifo;
  size_t bytes = 0;
  bool inPlace = false;
  /// A root that leaves early (broadcast, scatter) on the FIFO: how long it waited for its
  /// receivers' descriptors, not counted in the call's time (single_copy.cc, swap).
  uint64_t catchUpNs = 0;
};
chorusResult_t singleCopyRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p,
                             uint64_t seq, size_t resultBytes, bool* done, CopyPathCall* call);
/// A call planned on the single-copy route that runs the FIFO schedule at once, without
/// swapping descriptors: the deciding rank's last swap of this collective fell back to the
/// FIFO and leased the next calls of the same size to it (decided alike on every rank).
/// *timeIt: this is a leased call on a deciding rank that lags its peers (gather's root):
/// the caller times it and reports it with singleCopyLeaseTimed.
bool singleCopyLeased(chorusComm* comm, const CollArgs& a, size_t resultBytes, bool* timeIt);
/// The time of a leased call singleCopyLeased said to time (their mean over the lease is the
/// FIFO's steady figure).
void singleCopyLeaseTimed(chorusComm* comm, const CollArgs& a, size_t resultBytes, int64_t ns);
/// Every rank times each call that singleCopyRun began, the FIFO fallback included, and
/// reports it here: the chooser learns from the deciding rank's times (and, for broadcast
/// and scatter, its receivers', which reach it with their next call's descriptors).
void singleCopyTimed(chorusComm* comm, const CollArgs& a, const CopyPathCall& call, uint64_t seq,
                     int64_t ns);

/// A plan the algorithms cannot run (the planner let through what they cannot do): an
/// internal error naming both, never a quiet change of algorithm.
chorusResult_t planCannotRun(chorusComm* comm, const CollArgs& a, const Plan& plan, size_t bytes);

/// The steps of a FIFO schedule (the signature of the algorithms below).
using FifoSteps = chorusResult_t (*)(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p);

/// Runs `steps` with the slots written the way comm->slotStores[use] chooses for a call of
/// `bytes` bytes (`inPlace` calls apart), times the call and reports the time back
/// (CHORUS_SLOT_STORES, src/tuning/slot_stores.h); each change of way is logged at INFO.
/// Only where shared memory joins every pair (comm->peerMem.allShm) does the way the slots
/// are written decide where the peer reads them from; elsewhere `steps` just runs.
chorusResult_t runWithSlotStores(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p,
                                 SlotStoreUse use, size_t bytes, bool inPlace, FifoSteps steps);

// The algorithms, one per file.
chorusResult_t allReduceDirect(chorusComm* comm, const CollArgs& a, Prims& p);
/// Direct on the FIFOs (crowded same-host calls, choosePlan): block r is reduced by rank r.
chorusResult_t allReduceDirectFifo(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
/// The same through the shared boards (src/algorithms/board.cc): pieces of plan.pieceBytes
/// of the whole vector, at most a board buffer; each share reduced in rank order.
chorusResult_t allReduceBoard(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
/// A host's other rank in a leaders' all-reduce (allreduce.cc, ordered_hosts.cc): its input
/// (pre-multiplied where the op says) to `leader` in LL pieces of `piece` bytes, then the
/// result, post already applied, back from it.
chorusResult_t allReduceThroughLeader(chorusComm* comm, const CollArgs& a, Prims& p, int leader,
                                      size_t piece);
/// The leader's side of the hand-back: the result to each of its host's other ranks, in LL
/// pieces of `piece` bytes.
chorusResult_t leaderHandsBack(chorusComm* comm, Prims& p, const char* result, size_t bytes,
                               size_t piece);
chorusResult_t allReduceRing(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t allReduceTree(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t allReduceRecDoubling(chorusComm* comm, const CollArgs& a, Prims& p);
/// Largest all-reduce allReduceRecDoubling takes on this communicator (see tuning.h).
size_t doublingMaxBytes(const chorusComm* comm);
chorusResult_t allReduceHalving(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
/// Recursive halving reduce-scatter and recursive doubling all-gather, in rank order; only
/// where halvingFits(nranks) (src/tuning/tuning.h: a power of two).
chorusResult_t reduceScatterHalving(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                    Prims& p);
/// Every rank's block through the shared boards (src/algorithms/board.cc): pieces of
/// plan.pieceBytes, at most a board buffer.
chorusResult_t allGatherBoard(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
/// Broadcast on the shared boards (crowded same-host calls): the root writes each piece to
/// its board once, every other rank copies it out (board.cc).
chorusResult_t broadcastBoard(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
/// Two ranks on one host with pair cells (comm->peerMem.pair; src/algorithms/pair.cc): the
/// FIFO schedules of all-gather, all-to-all, all-reduce and reduce-scatter, through the cells
/// instead.
bool pairRuns(const chorusComm* comm);
/// A power of two of 4 or more ranks on one host with pair cells for every pair rank ^ 2^k
/// (comm->peerMem.halvingPairs): the all-reduce by recursive halving and doubling on them
/// (src/algorithms/pair_halving.cc), where the plan says so (Plan::pairCells).
bool halvingPairsRun(const chorusComm* comm);
/// The steps the pair-cell schedules share (pair.cc, pair_halving.cc, ordered_pairs.cc): the
/// partner's cell of exchange `x` (a failure names the partner), and this rank's own input of
/// `count` elements into `dst` where it first enters a cell or a sum, pre-multiplied where
/// the op says so (avg), else copied.
chorusResult_t takePeerPiece(PairCells* cells, Prims& p, uint64_t x, const char** cell);
void putOwnInput(Prims& p, char* dst, const char* src, size_t count);
chorusResult_t allReduceHalvingPairs(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p);
/// Four such ranks, reproducible mode: every element ((x0 + x1) + x2) + x3 on the same cells
/// (src/algorithms/ordered_pairs.cc), where the plan has Plan::ordered and Plan::pairCells.
chorusResult_t orderedAllReducePairs(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p);
chorusResult_t allGatherPair(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t allToAllPair(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t allReduceTwoRanksPair(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p);
chorusResult_t allReduceRingPair(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t reduceScatterPair(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t allGatherDoubling(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t broadcastRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t reduceRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t allGatherRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t reduceScatterRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t scatterRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t gatherRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t allToAllRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);
chorusResult_t barrierRun(chorusComm* comm, Prims& p);

/// Reproducible mode (src/algorithms/ordered.cc): whether a collective's result depends on
/// the order of its operands (floating-point sum, prod, avg, PreMulSum) — PlanCall::orderMatters;
/// and the rank-order schedules that run plans with Plan::ordered (orderedPlan).
bool orderMatters(Coll coll, const kernels::ReduceSpec& spec);
chorusResult_t orderedRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p);

}  // namespace chorus
