// comm.h — the communicator: everything one rank knows about its group.
//
// All mutable state of the library lives here (or in a stream): connections, tuning
// knobs read at init, the user's pre-multiplied-sum ops, the last error, the abort flag.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "chorus.h"
#include "src/comm/flight_recorder.h"
#include "src/comm/peer_mem.h"
#include "src/core/coll.h"
#include "src/core/wait.h"
#include "kernels/reduce_spec.h"
#include "transports/transport.h"
#include "src/tuning/ordered_chooser.h"
#include "src/tuning/slot_stores.h"
#include "src/tuning/tuning.h"

namespace chorus {

/// The exec lock's bias (src/comm/exec_lock.h): which thread owns it, whether it still
/// holds, and whether the owner is inside a call. Its own line: the owner writes `busy`
/// twice a call.
struct alignas(64) ExecBias {
  static constexpr int kNone = 0, kBiased = 1, kRevoked = 2;
  std::atomic<int> state{kNone};  ///< changed only under execMutex; kRevoked is final
  std::atomic<uintptr_t> owner{0};
  std::atomic<int> busy{0};
};

/// A user op made by chorusRedOpCreatePreMulSum.
struct UserOp {
  bool inUse = false;
  kernels::ReduceSpec spec;
};

/// Buffers an algorithm may borrow for the duration of one call.
struct Scratch {
  std::vector<char> a;
  std::vector<char> b;
  void* get(std::vector<char>& v, size_t bytes) {
    if (v.size() < bytes) v.resize(bytes);
    return v.data();
  }
};

/// Recently validated user buffer ranges (see enqueue/ptrcheck.h). Read on every call from
/// any thread, written on a miss: readers take no lock (a seqlock: `version` is odd while a
/// writer changes an entry, and a reader that saw it change retries under the mutex), since
/// two uncontended lock/unlock pairs were ~13% of an 8-byte all-reduce.
struct PtrCache {
  struct Range {
    std::atomic<uintptr_t> lo{0}, hi{0};
    std::atomic<bool> writable{false};
  };
  std::mutex mutex;  // writers (and readers that raced one)
  std::atomic<uint64_t> version{0};
  std::array<Range, 16> ranges{};
  size_t next = 0;  // under mutex
};

/// The knobs that shape the data path, read once at init from the parameter registry.
struct CommTuning {
  size_t slotBytes;     // CHORUS_CHUNKSIZE
  int fifoDepth;        // slots per connection
  size_t llBytes;       // CHORUS_LL_THRESHOLD
  size_t treeBytes;     // CHORUS_TREE_THRESHOLD
  size_t ntBytes;       // CHORUS_NT_THRESHOLD (auto: kAutoNtBytes)
  bool ntAuto = false;  // CHORUS_NT_THRESHOLD=auto
  /// Under ntAuto: this rank's share of its host's last-level cache (src/tuning/output_stores.h)
  size_t cacheShareBytes = 0;
  /// One L2 of this host (hwloc; 0: unknown): caps a same-host broadcast's pieces
  /// (src/tuning/cache_pieces.h)
  size_t l2Bytes = 0;
  size_t tcpPieceMin = 0;  // CHORUS_TCP_PIECE_MIN (0: one piece per half, as over shm)
  /// The layout, fixed at init (commTuningInit) instead of worked out from the peers at
  /// every plan: orderedRailsWidth, and whether some host's ranks share CPUs.
  int railsWidth = 0;
  bool hostCpusShared = false;
  int spin;           // polls before the first clock read (0 where ranks outnumber cores)
  std::string algo;   // CHORUS_ALGO
  std::string proto;  // CHORUS_PROTO
  /// CHORUS_REPRODUCIBLE / chorusConfig_t::reproducible: float reductions add in rank order
  bool reproducible = false;
  /// CHORUS_REPRO_SCHEDULE (orderedWayParse: kOrderedWayAuto, kOrderedWayRandom or an
  /// OrderedWay), the same on every rank (commAgreeReproducible)
  int reproSchedule = kOrderedWayAuto;
};

/// The communicator's cost-model tables (src/comm/plan.cc): built once, at init or at the
/// first collective, under `once`; read-only afterwards.
struct PlanCache {
  std::once_flag once;
  TuningTables tables;
  /// Size buckets (log2) of each collective already reported at INFO.
  std::atomic<uint64_t> logged[kNumColls] = {};
  /// The last plan chosen and what it was chosen for: a repeated call (the common case in a
  /// training loop or a benchmark) takes it without the table lookup and piece arithmetic.
  /// The choice depends only on the collective and the size (the tables and knobs are fixed
  /// at init). Read and written only under chorusComm::execMutex, as every caller of
  /// commChoosePlan runs a collective.
  bool lastValid = false;
  Coll lastColl = Coll::AllReduce;
  size_t lastBytes = 0;
  bool lastInPlace = false;
  bool lastOrderMatters = true;  // PlanCall::orderMatters (reproducible mode's plans differ)
  Plan last{};
  /// Set with the tables: CHORUS_ALGO_STRICT (a call the restriction cannot run fails), and
  /// whether a single-copy descriptor fits every peer's LL message.
  bool strict = false;
  bool descFits = false;
  /// Collectives whose fallback (the restriction cannot run a call) was reported at WARN.
  std::atomic<uint32_t> warnedFallback{0};
  /// The last collective's plan and what ran it (the algorithm that ran records itself):
  /// what tests read through src/api/test_hooks.h. Under execMutex.
  struct Record {
    uint64_t seq = 0;
    Coll coll = Coll::AllReduce;
    size_t bytes = 0;
    Plan plan{};
    Ran ran{};
    bool ranValid = false;
  } record;
};

/// The last blocking call that passed validation (src/api/collectives.cc): an identical call
/// (same collective, buffers, count, type, built-in op and root, on the NULL stream outside a
/// group) reuses its resolved arguments instead of validating again. Read and written only
/// under chorusComm::execMutex. Everything validation looked at either is in the key, cannot
/// change (the op table is not consulted for built-in ops; the pointer checks' own cache is
/// never invalidated either) or is checked again on every call (the abort flag).
struct LastCall {
  bool valid = false;
  Coll coll = Coll::AllReduce;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;
  int type = 0, op = 0, root = 0;
  CollArgs args{};
};

/// The order ring algorithms visit ranks in: hosts in the order of their lowest rank, and
/// a host's ranks together, socket by socket (src/topology), so a ring crosses each host
/// boundary once
/// (with ranks 0,2 on host A and 1,3 on host B, rank order would cross four times).
struct RingOrder {
  std::vector<int> order;  // position -> rank
  std::vector<int> pos;    // rank -> position
  int me = 0;              // this rank's position
  int next = 0, prev = 0;  // neighbouring ranks
  int at(int position) const {
    const int n = static_cast<int>(order.size());
    return order[static_cast<size_t>(((position % n) + n) % n)];
  }
};

/// This rank's links in one tree of the double binary tree (src/topology/graph.cc): across
/// hosts a binary tree, inside a host a chain; at most two children across hosts + one chain.
constexpr int kTreeMaxChildren = 3;
struct TreeLinks {
  int parent = -1;  // -1 at the root
  int nchildren = 0;
  std::array<int, kTreeMaxChildren> children{{-1, -1, -1}};
};

}  // namespace chorus

struct chorusComm {
  int rank = 0;
  int nranks = 0;
  std::string name;
  int64_t timeoutNs = 0;
  uint64_t commHash = 0;
  chorusUniqueId id{};

  std::atomic<int> abortFlag{0};
  chorus::LinkFailure linkFailure;  /// first broken tcp/rdma connection: every wait returns it
  /// API calls running on any thread plus operations queued on streams: destroy and abort
  /// wait for this to reach zero before freeing, so no other thread is left inside.
  std::atomic<int> activeCalls{0};
  std::atomic<int> asyncError{chorusSuccess};

  std::unique_ptr<chorus::Bootstrap> bootstrap;
  std::vector<chorus::PeerInfo> peers;
  std::vector<std::unique_ptr<chorus::Transport>> transports;
  std::vector<std::unique_ptr<chorus::SendConn>> sendConn;  // by peer rank
  std::vector<std::unique_ptr<chorus::RecvConn>> recvConn;  // by peer rank
  int localRanks = 1;
  int ncpus = 1;
  /// Ranks of this communicator that this rank's kernel runs (on any host it runs: namespaced
  /// hosts and containers share one), and the CPUs they may use between them; how many
  /// kernels the job spans; whether this rank's kernel runs more of its ranks than it gives
  /// them CPUs; the most ranks per CPU of any kernel of the job (1 if none crowds its CPUs;
  /// the same on every rank): src/comm/init.cc.
  int kernelRanks = 1;
  int kernelCpus = 1;
  int nKernels = 1;
  bool kernelCrowded = false;
  double maxRanksPerKernelCpu = 1.0;
  chorus::RingOrder ring;
  /// Double binary tree (topology-driven, see src/topology): tree algorithms put half of
  /// the data on each.
  std::array<chorus::TreeLinks, 2> trees{};
  int nHosts = 1;                // distinct hosts in the communicator
  std::vector<int> hostLeaders;  // each host's lowest rank, in that order (topo_exchange.cc)
  std::vector<int> hostMates;    // this rank's host's ranks (itself included), ascending
  int numaOsIndex = -1;          // NUMA node (os index) this rank is bound to, -1 unbound/unknown

  chorus::CommTuning tuning{};
  /// How long this communicator's waits spin before sleeping (src/core/wait.h).
  chorus::WaitPolicy waitPolicy;
  chorus::PlanCache plans;
  /// How the shared-memory ring all-reduce, ring all-gather and all-to-all write their slots
  /// (CHORUS_SLOT_STORES), learned from their calls, one chooser each
  /// (src/tuning/slot_stores.h); used under execMutex. slotStoreLogs: INFO lines so far.
  chorus::SlotStoreChoosers slotStores;
  int slotStoreLogs = 0;
  /// Reproducible all-reduce across hosts: which rank-order schedule each size takes
  /// (CHORUS_REPRO_SCHEDULE=auto; src/tuning/ordered_chooser.h, src/algorithms/ordered.cc);
  /// the same state on every rank, its choices from rank 0's times. Used under execMutex.
  chorus::OrderedWayChooser orderedWays;
  uint64_t orderedWaysRng = 0;  // CHORUS_REPRO_SCHEDULE=random: this rank's draws
  int orderedWayLogs = 0;

  std::vector<chorus::UserOp> userOps;
  std::mutex userOpsMutex;

  /// Serializes operations on this communicator (a blocking call and a stream worker
  /// must not interleave their slots). Taken through lockExec (src/comm/exec_lock.h),
  /// which first revokes the bias below from any thread but its owner. "Under execMutex"
  /// in this file means under the exec lock: the mutex, or the bias for its owner.
  std::mutex execMutex;
  /// The exec lock biased to the one thread that makes the blocking calls: that thread's
  /// calls take neither execMutex nor activeCalls (src/comm/exec_lock.h).
  chorus::ExecBias execBias;
  chorus::LastCall lastCall;  // under the exec lock (execMutex or its bias)
  uint64_t opCount = 0;       // sequence number of collectives, for messages and checks
  uint64_t p2pCount = 0;      // sequence number of sends and receives (counted apart: ranks
                              // legitimately make different numbers of them)
  int anySourceNext = 0;      // where the next chorusRecvAnySource starts looking (fairness)
  /// The last operations, for hang reports (see comm/flight_recorder.h); never null after
  /// creation (capacity 0 when CHORUS_FLIGHT_RECORDER_SIZE=0).
  std::unique_ptr<chorus::FlightRecorder> flight;
  bool checkMode = false;  // CHORUS_CHECK_MODE: ranks compare each call before running it
  /// A non-blocking init that failed leaves a communicator that can only be destroyed.
  std::atomic<bool> initFailed{false};
  chorus::Scratch scratch;
  chorus::PtrCache ptrCache;
  /// Single copy between local ranks: CMA probe, registrations, peers' mapped regions.
  chorus::PeerMem peerMem;

  std::mutex errorMutex;
  std::string lastError;

  /// Non-blocking init runs here.
  std::thread initThread;

  /// Surviving a lost rank (src/comm/shrink.cc): the ranks the survivors agreed have failed
  /// (chorusCommFailedRanks), and the round number of this rank's last failed-ranks or
  /// shrink handshake; ftMutex keeps two of them from sharing the bootstrap at once.
  std::mutex ftMutex;
  std::vector<int> failedRanks;
  uint32_t ftRound = 0;
};

namespace chorus {

/// Deadline for a wait starting now.
int64_t commDeadline(const chorusComm* comm);

/// Records this thread's last error detail on the communicator.
void commRecordError(chorusComm* comm, chorusResult_t res);

/// Full initialization of an allocated communicator (bootstrap, transports, connect).
chorusResult_t commInit(chorusComm* comm, const chorusUniqueId& id, int nranks, int rank,
                        const chorusConfig_t* config);

/// Waits until no call is inside the communicator (activeCalls == 0); with the abort flag
/// raised, those calls return promptly.
void commWaitIdle(chorusComm* comm);

/// Frees everything; the pointer is invalid afterwards.
void commFree(chorusComm* comm);

/// Returns `res`, after recording this thread's error detail on `comm` when it failed
/// (so chorusGetLastError(comm) explains any failed call made with that comm).
chorusResult_t recordOnComm(const chorusComm* comm, chorusResult_t res);

/// Builds the communicator's tuning tables now (and logs the model at INFO on rank 0)
/// instead of at its first collective. Safe to call any number of times.
void commTuningInit(chorusComm* comm);

/// The whole plan of one call (src/comm/plan.cc): choosePlan over this communicator's
/// tables and facts, plus, on the rank that decides single copy's path for every rank, its
/// timed pick of CMA or the FIFO; logged at INFO (once per size bucket) and TRACE (every
/// call). `bytes` is the size of the whole result buffer.
Plan commChoosePlan(chorusComm* comm, Coll coll, size_t bytes, const PlanCall& call = PlanCall{});

/// k where the communicator's hosts hold equal, contiguous runs of k >= 2 ranks each (host h:
/// ranks h*k .. h*k+k-1), on 2 or more hosts; else 0. The same answer on every rank: the
/// width of reproducible mode's leaders' rails (src/algorithms/ordered_rails.cc).
int orderedRailsWidth(const chorusComm* comm);

/// The rank-order schedules a reproducible all-reduce of `bytes` with plan `base` may take
/// (orderedAllReduceWays over this communicator's tables and facts); *ways gets them, the
/// return value their count (1: no choice). The same on every rank.
int commOrderedWays(chorusComm* comm, size_t bytes, const Plan& base, OrderedWay* ways);
/// The plan of way `w` for that call (orderedWayPlan).
Plan commOrderedWayPlan(chorusComm* comm, size_t bytes, const Plan& base, OrderedWay w);

/// Validates a communicator handle passed by the user.
chorusResult_t commCheck(const chorusComm* comm, const char* api);

}  // namespace chorus
