// lifecycle.cc — creating, splitting, finishing and destroying communicators.
#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "chorus.h"
#include "src/comm/comm.h"
#include "src/comm/env_init.h"
#include "src/comm/exec_lock.h"
#include "src/comm/reproducible.h"
#include "src/comm/shrink.h"
#include "src/comm/split.h"
#include "src/core/checks.h"
#include "src/core/live_handles.h"
#include "src/core/debug.h"
#include "src/core/params.h"

namespace chorus {
namespace {

chorusResult_t checkConfig(const chorusConfig_t* config, const char* api) {
  if (!config) return chorusSuccess;
  if (config->magic != CHORUS_CONFIG_MAGIC || config->size < offsetof(chorusConfig_t, commName))
    CHORUS_FAIL(chorusInvalidArgument,
                "%s: config was not initialized with CHORUS_CONFIG_INITIALIZER", api);
  if (config->blocking != CHORUS_CONFIG_UNDEF_INT && config->blocking != 0 && config->blocking != 1)
    CHORUS_FAIL(chorusInvalidArgument, "%s: config->blocking is %d; it must be 0 or 1", api,
                config->blocking);
  if (config->size >= offsetof(chorusConfig_t, commName) &&
      config->timeoutSeconds != CHORUS_CONFIG_UNDEF_INT && config->timeoutSeconds <= 0)
    CHORUS_FAIL(chorusInvalidArgument,
                "%s: config->timeoutSeconds is %d; it must be > 0 (or CHORUS_CONFIG_UNDEF_INT "
                "for CHORUS_TIMEOUT_S)",
                api, config->timeoutSeconds);
  const int reproducible = configReproducible(config);
  if (reproducible != CHORUS_CONFIG_UNDEF_INT && reproducible != 0 && reproducible != 1)
    CHORUS_FAIL(chorusInvalidArgument,
                "%s: config->reproducible is %d; it must be 0, 1 or CHORUS_CONFIG_UNDEF_INT "
                "(for CHORUS_REPRODUCIBLE)",
                api, reproducible);
  return chorusSuccess;
}

// A communicator whose non-blocking init is still running (or failed) has no connections.
chorusResult_t checkInitDone(const chorusComm* comm, const char* api) {
  if (comm->asyncError.load(std::memory_order_acquire) == chorusInProgress)
    CHORUS_FAIL(chorusInvalidUsage,
                "%s: the communicator is still initializing (non-blocking init): poll "
                "chorusCommGetAsyncError until it is no longer chorusInProgress",
                api);
  if (comm->initFailed.load(std::memory_order_acquire))
    CHORUS_FAIL(chorusInvalidUsage,
                "%s: the communicator's non-blocking init failed (chorusCommGetAsyncError says "
                "why); it can only be destroyed",
                api);
  return chorusSuccess;
}

chorusResult_t initRank(chorusComm_t* out, int nranks, const chorusUniqueId& id, int rank,
                        const chorusConfig_t* config, const char* api) {
  clearThreadLastError();
  if (!out) CHORUS_FAIL(chorusInvalidArgument, "%s: comm (output pointer) is NULL", api);
  *out = nullptr;
  if (nranks < 1) CHORUS_FAIL(chorusInvalidArgument, "%s: nranks %d must be >= 1", api, nranks);
  if (rank < 0 || rank >= nranks)
    CHORUS_FAIL(chorusInvalidArgument, "%s: rank %d is outside [0, %d)", api, rank, nranks);
  CHORUS_CHECK(checkConfig(config, api));
  auto* comm = new chorusComm();
  liveHandleAdd(HandleKind::Comm, comm);  // commFree removes it
  // Known now: set before any init thread starts, so API calls racing a non-blocking init
  // read them safely (commInit finds them set and leaves them alone).
  comm->rank = rank;
  comm->nranks = nranks;
  comm->flight = std::make_unique<FlightRecorder>(static_cast<size_t>(
      std::min<int64_t>(std::max<int64_t>(paramInt(Param::FlightRecorderSize), 0), 1 << 20)));
  comm->checkMode = paramInt(Param::CheckMode) != 0;
  const bool blocking =
      !config || config->blocking == CHORUS_CONFIG_UNDEF_INT || config->blocking != 0;
  if (!blocking) {
    // Non-blocking: init runs on a thread; chorusCommGetAsyncError reports progress.
    comm->asyncError.store(chorusInProgress);
    chorusResult_t cr = Bootstrap::create(rank, nranks, &comm->bootstrap);
    if (cr != chorusSuccess) {
      commFree(comm);
      return cr;
    }
    chorusConfig_t cfg = *config;
    std::string name = config->commName ? config->commName : "";
    comm->initThread = std::thread([comm, id, nranks, rank, cfg, name]() mutable {
      cfg.commName = name.empty() ? nullptr : name.c_str();
      clearThreadLastError();
      chorusResult_t r = commInit(comm, id, nranks, rank, &cfg);
      if (r != chorusSuccess) {
        commRecordError(comm, r);
        comm->initFailed.store(true, std::memory_order_release);
      }
      comm->asyncError.store(r);
    });
    *out = comm;
    return chorusInProgress;
  }
  chorusResult_t r = commInit(comm, id, nranks, rank, config);
  if (r != chorusSuccess) {
    commFree(comm);
    return r;
  }
  *out = comm;
  return chorusSuccess;
}

}  // namespace
}  // namespace chorus

using namespace chorus;

extern "C" {

CHORUS_API chorusResult_t chorusGetUniqueId(chorusUniqueId* uniqueId) {
  clearThreadLastError();
  if (!uniqueId) CHORUS_FAIL(chorusInvalidArgument, "chorusGetUniqueId: uniqueId is NULL");
  return bootstrapCreateRoot(uniqueId);
}

CHORUS_API chorusResult_t chorusCommInitRank(chorusComm_t* comm, int nranks, chorusUniqueId commId,
                                             int rank) {
  return initRank(comm, nranks, commId, rank, nullptr, "chorusCommInitRank");
}

CHORUS_API chorusResult_t chorusCommInitRankConfig(chorusComm_t* comm, int nranks,
                                                   chorusUniqueId commId, int rank,
                                                   chorusConfig_t* config) {
  return initRank(comm, nranks, commId, rank, config, "chorusCommInitRankConfig");
}

CHORUS_API chorusResult_t chorusCommInitAll(chorusComm_t* comms, int ndev, const int* devlist) {
  (void)devlist;
  clearThreadLastError();
  if (!comms) CHORUS_FAIL(chorusInvalidArgument, "chorusCommInitAll: comms is NULL");
  if (ndev < 1) CHORUS_FAIL(chorusInvalidArgument, "chorusCommInitAll: ndev %d must be >= 1", ndev);
  chorusUniqueId id;
  CHORUS_CHECK(bootstrapCreateRoot(&id));
  std::vector<chorusResult_t> res(static_cast<size_t>(ndev), chorusSuccess);
  std::vector<std::string> details(static_cast<size_t>(ndev));
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i)
    threads.emplace_back([&, i] {
      res[static_cast<size_t>(i)] = initRank(&comms[i], ndev, id, i, nullptr, "chorusCommInitAll");
      details[static_cast<size_t>(i)] = threadLastError();
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (res[static_cast<size_t>(i)] != chorusSuccess) {
      for (int j = 0; j < ndev; ++j) {
        commFree(comms[j]);
        comms[j] = nullptr;
      }
      return fail(res[static_cast<size_t>(i)], __FILE__, __LINE__, "rank %d: %s", i,
                  details[static_cast<size_t>(i)].c_str());
    }
  }
  return chorusSuccess;
}

CHORUS_API chorusResult_t chorusCommInitFromEnv(chorusComm_t* comm, chorusConfig_t* config) {
  clearThreadLastError();
  if (!comm) CHORUS_FAIL(chorusInvalidArgument, "chorusCommInitFromEnv: comm is NULL");
  *comm = nullptr;
  EnvRendezvous rv;
  CHORUS_CHECK(rendezvousFromEnv(&rv));
  chorusResult_t r = initRank(comm, rv.nranks, rv.id, rv.rank, config, "chorusCommInitFromEnv");
  if (r == chorusSuccess) rendezvousDone(rv);
  return r;
}

CHORUS_API chorusResult_t chorusGetLaunchInfo(const char** launcher, int* rank, int* nranks) {
  clearThreadLastError();
  const char* name = nullptr;
  int r = 0, n = 1;
  CHORUS_CHECK(launchFromEnv(&name, &r, &n));
  if (launcher) *launcher = name;
  if (rank) *rank = r;
  if (nranks) *nranks = n;
  return chorusSuccess;
}

static chorusResult_t chorusCommSplitImpl(chorusComm_t comm, int color, int key,
                                          chorusComm_t* newcomm, chorusConfig_t* config) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusCommSplit"));
  CHORUS_CHECK(checkInitDone(comm, "chorusCommSplit"));
  if (!newcomm) CHORUS_FAIL(chorusInvalidArgument, "chorusCommSplit: newcomm is NULL");
  *newcomm = nullptr;
  if (color < 0 && color != CHORUS_SPLIT_NOCOLOR)
    CHORUS_FAIL(chorusInvalidArgument,
                "chorusCommSplit: color %d must be >= 0 or CHORUS_SPLIT_NOCOLOR", color);
  CHORUS_CHECK(checkConfig(config, "chorusCommSplit"));
  SplitResult s;
  chorusResult_t r;
  {
    const std::unique_lock<std::mutex> lock = lockExec(comm);
    r = splitRendezvous(comm, color, key, &s);
  }
  if (r != chorusSuccess) {
    commRecordError(comm, r);
    return r;
  }
  if (!s.member) return chorusSuccess;
  // Without a config the child keeps the parent's reproducible mode (NCCL's children inherit
  // the parent's config), whatever CHORUS_REPRODUCIBLE says.
  chorusConfig_t inherited = CHORUS_CONFIG_INITIALIZER;
  inherited.reproducible = comm->tuning.reproducible ? 1 : 0;
  r = initRank(newcomm, s.nranks, s.id, s.rank, config ? config : &inherited, "chorusCommSplit");
  if (r != chorusSuccess && r != chorusInProgress) commRecordError(comm, r);
  return r;
}

// Makes every waiting and later operation on comm return chorusAborted (local).
static void revokeComm(chorusComm_t comm) {
  comm->abortFlag.store(1);
  for (auto& t : comm->transports) t->wakeAll();
}

static chorusResult_t chorusCommShrinkImpl(chorusComm_t comm, const int* excludeRanks,
                                           int excludeCount, chorusComm_t* newcomm,
                                           chorusConfig_t* config, int flags) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusCommShrink"));
  CHORUS_CHECK(checkInitDone(comm, "chorusCommShrink"));
  // Every call from here on is a round of the survivors' handshakes, even one that fails
  // on its arguments, so the ranks' round counts stay equal (stale messages are told apart
  // by round).
  std::unique_lock<std::mutex> ft(comm->ftMutex);
  ++comm->ftRound;
  if (!newcomm) CHORUS_FAIL(chorusInvalidArgument, "chorusCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  if (flags != CHORUS_SHRINK_DEFAULT && flags != CHORUS_SHRINK_ABORT)
    CHORUS_FAIL(chorusInvalidArgument,
                "chorusCommShrink: flags 0x%x; use CHORUS_SHRINK_DEFAULT or CHORUS_SHRINK_ABORT",
                static_cast<unsigned>(flags));
  CHORUS_CHECK(checkConfig(config, "chorusCommShrink"));
  const int n = comm->nranks;
  if (excludeCount < 0 || excludeCount >= n)
    CHORUS_FAIL(chorusInvalidArgument,
                "chorusCommShrink: excludeCount %d must be in [0, %d) (rank %d of %d)",
                excludeCount, n, comm->rank, n);
  if (excludeCount > 0 && !excludeRanks)
    CHORUS_FAIL(chorusInvalidArgument,
                "chorusCommShrink: excludeRanks is NULL but excludeCount is %d", excludeCount);
  // The survivors this rank sees, from the usable part of its list; what is wrong with the
  // rest is told to the leader, so every survivor fails at once rather than at its timeout.
  std::vector<uint8_t> excluded(static_cast<size_t>(n), 0);
  std::string bad;
  for (int i = 0; i < excludeCount; ++i) {
    const int r = excludeRanks[i];
    char why[160];
    if (r < 0 || r >= n) {
      snprintf(why, sizeof(why), "excludeRanks[%d] = %d is outside [0, %d)", i, r, n);
    } else if (excluded[static_cast<size_t>(r)]) {
      snprintf(why, sizeof(why), "excludeRanks[%d] = %d is a duplicate", i, r);
    } else {
      excluded[static_cast<size_t>(r)] = 1;
      continue;
    }
    if (bad.empty()) bad = why;
  }
  if (excluded[static_cast<size_t>(comm->rank)])
    CHORUS_FAIL(chorusInvalidArgument,
                "chorusCommShrink: rank %d excludes itself; an excluded rank does not call "
                "chorusCommShrink (the survivors go on without it)",
                comm->rank);
  if (flags == CHORUS_SHRINK_ABORT) revokeComm(comm);
  commWaitIdle(comm);  // queued work finishes (or, revoked, fails) first
  ShrinkResult s;
  chorusResult_t r;
  const int64_t start = monotonicNs();
  {
    const std::unique_lock<std::mutex> lock = lockExec(comm);
    r = shrinkRendezvous(comm, excluded, bad, &s);
  }
  ft.unlock();
  if (r != chorusSuccess) return r;
  // The new communicator keeps the parent's timeout unless the config says otherwise.
  chorusConfig_t inherited = CHORUS_CONFIG_INITIALIZER;
  inherited.timeoutSeconds = static_cast<int>(std::max<int64_t>(1, comm->timeoutNs / 1000000000ll));
  inherited.reproducible = comm->tuning.reproducible ? 1 : 0;
  r = initRank(newcomm, s.nranks, s.id, s.rank, config ? config : &inherited, "chorusCommShrink");
  if (r == chorusSuccess)
    CHORUS_INFO(kLogInit, "rank %d: shrink to %d ranks done in %.3f s; now rank %d", comm->rank,
                s.nranks, static_cast<double>(monotonicNs() - start) / 1e9, s.rank);
  return r;
}

static chorusResult_t chorusCommFailedRanksImpl(chorusComm_t comm, int* ranks, int maxRanks,
                                                int* count) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusCommFailedRanks"));
  CHORUS_CHECK(checkInitDone(comm, "chorusCommFailedRanks"));
  if (!count) CHORUS_FAIL(chorusInvalidArgument, "chorusCommFailedRanks: count is NULL");
  if (maxRanks < 0)
    CHORUS_FAIL(chorusInvalidArgument, "chorusCommFailedRanks: maxRanks %d must be >= 0", maxRanks);
  if (maxRanks > 0 && !ranks)
    CHORUS_FAIL(chorusInvalidArgument, "chorusCommFailedRanks: ranks is NULL but maxRanks is %d",
                maxRanks);
  std::vector<int> failed;
  {
    std::lock_guard<std::mutex> ft(comm->ftMutex);
    CHORUS_CHECK(failedRanksAgree(comm, &failed));
  }
  *count = static_cast<int>(failed.size());
  for (int i = 0; i < maxRanks && i < *count; ++i) ranks[i] = failed[static_cast<size_t>(i)];
  return chorusSuccess;
}

static chorusResult_t chorusCommRevokeImpl(chorusComm_t comm) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusCommRevoke"));
  CHORUS_CHECK(checkInitDone(comm, "chorusCommRevoke"));
  revokeComm(comm);
  CHORUS_INFO(kLogInit, "rank %d: communicator revoked", comm->rank);
  return chorusSuccess;
}

static chorusResult_t chorusCommFinalizeImpl(chorusComm_t comm) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusCommFinalize"));
  if (comm->initThread.joinable()) comm->initThread.join();
  // Wait for work queued on host streams, then for the operation running now.
  commWaitIdle(comm);
  const std::unique_lock<std::mutex> lock = lockExec(comm);
  frDumpIfConfigured(comm, "finalize", false);
  int err = comm->asyncError.load();
  return static_cast<chorusResult_t>(err == chorusInProgress ? chorusSuccess : err);
}

CHORUS_API chorusResult_t chorusCommDestroy(chorusComm_t comm) {
  clearThreadLastError();
  if (comm == nullptr) return chorusSuccess;
  CHORUS_CHECK(commCheck(comm, "chorusCommDestroy"));
  if (comm->initThread.joinable()) comm->initThread.join();
  commWaitIdle(comm);  // queued stream work finishes first
  { const std::unique_lock<std::mutex> lock = lockExec(comm); }
  frDumpIfConfigured(comm, "destroy", false);
  const WaitPolicy& wp = comm->waitPolicy;
  CHORUS_INFO(
      kLogInit,
      "rank %d: %llu waits outlasted the first polls, %llu of them slept (%llu because "
      "the peer was queued on this CPU, %llu on a busy machine, %llu moves off its CPU, %llu off a "
      "crowded CPU); spin budget now %lld us",
      comm->rank, static_cast<unsigned long long>(wp.slowWaits.load()),
      static_cast<unsigned long long>(wp.sleeps.load()),
      static_cast<unsigned long long>(wp.peerSleeps.load()),
      static_cast<unsigned long long>(wp.busySleeps.load()),
      static_cast<unsigned long long>(wp.unstacks.load()),
      static_cast<unsigned long long>(wp.rebalances.load()),
      static_cast<long long>(wp.spinNs.load() / 1000));
  commFree(comm);
  return chorusSuccess;
}

CHORUS_API chorusResult_t chorusCommAbort(chorusComm_t comm) {
  clearThreadLastError();
  if (comm == nullptr) return chorusSuccess;
  CHORUS_CHECK(commCheck(comm, "chorusCommAbort"));
  comm->abortFlag.store(1);
  if (comm->bootstrap) comm->bootstrap->abort();
  // A non-blocking init still running returns promptly once its bootstrap is aborted;
  // only then is the transport list stable to walk.
  if (comm->initThread.joinable()) comm->initThread.join();
  for (auto& t : comm->transports) t->wakeAll();
  // Wait for calls in flight on other threads and queued stream work: they see the flag
  // and return chorusAborted.
  commWaitIdle(comm);
  { const std::unique_lock<std::mutex> lock = lockExec(comm); }
  frDumpIfConfigured(comm, "abort", false);
  commFree(comm);
  return chorusSuccess;
}

static chorusResult_t chorusCommGetAsyncErrorImpl(chorusComm_t comm, chorusResult_t* asyncError) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusCommGetAsyncError"));
  if (!asyncError)
    CHORUS_FAIL(chorusInvalidArgument, "chorusCommGetAsyncError: asyncError is NULL");
  *asyncError = static_cast<chorusResult_t>(comm->asyncError.load());
  if (*asyncError != chorusInProgress && comm->initThread.joinable()) comm->initThread.join();
  return chorusSuccess;
}

static chorusResult_t chorusCommCountImpl(const chorusComm_t comm, int* count) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusCommCount"));
  CHORUS_CHECK(checkInitDone(comm, "chorusCommCount"));
  if (!count) CHORUS_FAIL(chorusInvalidArgument, "chorusCommCount: count is NULL");
  *count = comm->nranks;
  return chorusSuccess;
}

static chorusResult_t chorusCommUserRankImpl(const chorusComm_t comm, int* rank) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusCommUserRank"));
  CHORUS_CHECK(checkInitDone(comm, "chorusCommUserRank"));
  if (!rank) CHORUS_FAIL(chorusInvalidArgument, "chorusCommUserRank: rank is NULL");
  *rank = comm->rank;
  return chorusSuccess;
}

CHORUS_API chorusResult_t chorusCommSplit(chorusComm_t comm, int color, int key,
                                          chorusComm_t* newcomm, chorusConfig_t* config) {
  return chorus::recordOnComm(comm, chorusCommSplitImpl(comm, color, key, newcomm, config));
}

CHORUS_API chorusResult_t chorusCommShrink(chorusComm_t comm, const int* excludeRanks,
                                           int excludeCount, chorusComm_t* newcomm,
                                           chorusConfig_t* config, int flags) {
  return chorus::recordOnComm(
      comm, chorusCommShrinkImpl(comm, excludeRanks, excludeCount, newcomm, config, flags));
}

CHORUS_API chorusResult_t chorusCommFailedRanks(chorusComm_t comm, int* ranks, int maxRanks,
                                                int* count) {
  return chorus::recordOnComm(comm, chorusCommFailedRanksImpl(comm, ranks, maxRanks, count));
}

CHORUS_API chorusResult_t chorusCommRevoke(chorusComm_t comm) {
  return chorus::recordOnComm(comm, chorusCommRevokeImpl(comm));
}

CHORUS_API chorusResult_t chorusCommFinalize(chorusComm_t comm) {
  return chorus::recordOnComm(comm, chorusCommFinalizeImpl(comm));
}

CHORUS_API chorusResult_t chorusCommGetAsyncError(chorusComm_t comm, chorusResult_t* asyncError) {
  return chorus::recordOnComm(comm, chorusCommGetAsyncErrorImpl(comm, asyncError));
}

CHORUS_API chorusResult_t chorusCommCount(const chorusComm_t comm, int* count) {
  return chorus::recordOnComm(comm, chorusCommCountImpl(comm, count));
}

CHORUS_API chorusResult_t chorusCommUserRank(const chorusComm_t comm, int* rank) {
  return chorus::recordOnComm(comm, chorusCommUserRankImpl(comm, rank));
}

}  // extern "C"
