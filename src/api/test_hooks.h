// test_hooks.h — what tests in this tree may ask the library beyond its public API. Not part
// of the API (include/chorus.h): no compatibility promise, exported only so that test
// programs linked against the shared library can reach it.
#pragma once

#include "chorus.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The last collective a communicator ran with more than one rank: the plan it was given
/// (src/tuning/choose_plan.cc, as logged at TRACE) and what the algorithm that ran recorded.
/// Names are static strings: algorithms "direct", "ring", "tree", "doubling", "halving";
/// protocols "LL", "Simple"; routes "FIFO", "single copy"; paths "FIFO", "mapped", "CMA".
typedef struct {
  unsigned long long seq; /* the call's sequence number on the communicator; 0: none yet */
  const char* coll;       /* "all_reduce", ... (collName) */
  size_t bytes;           /* the whole result buffer */
  const char* planAlgo;
  const char* planProto;
  const char* planRoute;
  int planCma;      /* single copy may use CMA (this rank's view) */
  int planFallback; /* CHORUS_ALGO / CHORUS_PROTO cannot run the call: the default plan */
  int ran;          /* an algorithm recorded itself (0: the call failed before one started) */
  const char* ranAlgo;
  const char* ranProto;
  const char* ranPath;
  /* Facts of the communicator the plan was made on (not choices): */
  int allShm;      /* one host, every pair joined by a transport that shares memory */
  int networkHops; /* some pair is joined over a network transport (tcp, rdma) */
  /* Reproducible mode (docs/REPRODUCIBLE.md): */
  int reproducible; /* the communicator's mode (CHORUS_REPRODUCIBLE / chorusConfig_t) */
  int planOrdered;  /* the plan is the rank-order one (src/tuning/ordered_plan.cc) */
  int ranOrdered;   /* a rank-order schedule ran it (src/algorithms/ordered.cc) */
  /* The shared boards (transports/board.h, src/algorithms/board.cc): */
  int planBoard; /* the plan runs on them */
  int ranBoard;  /* a schedule on them ran it */
  /* Halving on the pair cells (src/algorithms/pair_halving.cc): */
  int planPairCells; /* the plan runs on them */
  int ranPairCells;  /* halving on them ran it */
} chorusTestPlanRecord;

CHORUS_API chorusResult_t chorusTestLastPlan(chorusComm_t comm, chorusTestPlanRecord* out);

/// The exec lock's bias (src/comm/exec_lock.h), read without taking the lock: 0 no thread
/// holds it yet, 1 the thread that made the blocking calls holds it, 2 revoked (or never
/// taken: no asymmetric fences here). *ownedByCaller: 1 if the calling thread holds it.
CHORUS_API chorusResult_t chorusTestExecBias(chorusComm_t comm, int* state, int* ownedByCaller);

#ifdef __cplusplus
}
#endif
