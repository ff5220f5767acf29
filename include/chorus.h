/*
 * chorus.h — the public C API of Chorus, a collective communication library.
 *
 * Shaped like NCCL's API so a framework can switch with a rename: opaque handles,
 * every call returns a chorusResult_t, collectives take (sendbuff, recvbuff, count,
 * datatype, [op], [root], comm, stream). Nothing here throws; nothing here aborts.
 *
 * Streams: a NULL stream means "run now, on the calling thread, and return when done".
 * A host stream (chorusStreamCreate) is an ordered queue run by a worker thread; calls
 * on it return at once and chorusStreamSynchronize waits for them.
 *
 * This header compiles as C99 and as C++.
 */
#ifndef CHORUS_H_
#define CHORUS_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define CHORUS_API
#elif defined(CHORUS_BUILDING_LIBRARY)
#define CHORUS_API __attribute__((visibility("default")))
#else
#define CHORUS_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CHORUS_MAJOR 0
#define CHORUS_MINOR 1
#define CHORUS_PATCH 0
/** Single integer version: major*10000 + minor*100 + patch. */
#define CHORUS_VERSION_CODE (CHORUS_MAJOR * 10000 + CHORUS_MINOR * 100 + CHORUS_PATCH)

/* ------------------------------------------------------------------------- */
/* Results                                                                   */
/* ------------------------------------------------------------------------- */

/** Every call returns one of these. Values are fixed forever; new ones go before
 *  chorusNumResults. chorusInProgress is not an error. */
typedef enum {
  chorusSuccess = 0,
  chorusUnhandledError = 1,  /* an internal invariant broke: a bug in Chorus */
  chorusSystemError = 2,     /* a system call failed (errno in the detail) */
  chorusInternalError = 3,   /* resource exhaustion or an unexpected internal state */
  chorusInvalidArgument = 4, /* a bad pointer, count, type, op, root or peer */
  chorusInvalidUsage = 5, /* a valid argument used wrongly (destroyed comm, device pointer, ...) */
  chorusRemoteError = 6,  /* a peer died, closed its connection or reported an error */
  chorusInProgress = 7,   /* a non-blocking call has not finished yet */
  chorusTimeout = 8,      /* a wait passed its deadline (CHORUS_TIMEOUT_S) */
  chorusAborted = 9,      /* chorusCommAbort was called on this communicator */
  chorusNumResults = 10
} chorusResult_t;

/* ------------------------------------------------------------------------- */
/* Handles                                                                   */
/* ------------------------------------------------------------------------- */

/** Opaque communicator: one rank's view of a group of ranks. */
typedef struct chorusComm* chorusComm_t;

/** Opaque stream: NULL = blocking on the calling thread. */
typedef struct chorusStream* chorusStream_t;

#define CHORUS_UNIQUE_ID_BYTES 128
/** Made by chorusGetUniqueId on one rank and handed to all others (by MPI, a file, ...).
 *  Holds the bootstrap root's address and a 128-bit random secret that every
 *  connection must present. Treat it as a password. */
typedef struct {
  char internal[CHORUS_UNIQUE_ID_BYTES];
} chorusUniqueId;

/* ------------------------------------------------------------------------- */
/* Types and reduction operations                                            */
/* ------------------------------------------------------------------------- */

typedef enum {
  chorusInt8 = 0,
  chorusChar = 0,
  chorusUint8 = 1,
  chorusInt32 = 2,
  chorusInt = 2,
  chorusUint32 = 3,
  chorusInt64 = 4,
  chorusUint64 = 5,
  chorusFloat16 = 6,
  chorusHalf = 6,
  chorusFloat32 = 7,
  chorusFloat = 7,
  chorusFloat64 = 8,
  chorusDouble = 8,
  chorusBfloat16 = 9,
  chorusNumTypes = 10
} chorusDataType_t;

/** Built-in reductions. chorusAvg divides the sum by the number of ranks (integer
 *  types: truncating division of the exact sum). Values from chorusRedOpCreatePreMulSum
 *  are >= chorusNumOps. min/max propagate NaN. */
typedef enum {
  chorusSum = 0,
  chorusProd = 1,
  chorusMax = 2,
  chorusMin = 3,
  chorusAvg = 4,
  chorusNumOps = 5,
  chorusMaxRedOp = 0x7fffffff
} chorusRedOp_t;

/** Where the pre-multiplication scalar of a PreMulSum op lives. */
typedef enum {
  chorusScalarDevice = 0, /* not supported on host-only builds */
  chorusScalarHostImmediate = 1
} chorusScalarResidence_t;

/* ------------------------------------------------------------------------- */
/* Configuration                                                             */
/* ------------------------------------------------------------------------- */

/** Versioned, append-only. Always start from CHORUS_CONFIG_INITIALIZER; fields
 *  left at CHORUS_CONFIG_UNDEF_INT take their default (or their CHORUS_* variable). */
typedef struct {
  size_t size;          /* sizeof(chorusConfig_t) as the caller compiled it */
  unsigned int magic;   /* CHORUS_CONFIG_MAGIC */
  unsigned int version; /* CHORUS_VERSION_CODE */
  int blocking;         /* 1 (default): init returns when done; 0: returns chorusInProgress,
                           poll chorusCommGetAsyncError */
  int timeoutSeconds;   /* deadline for every wait; default CHORUS_TIMEOUT_S */
  const char* commName; /* shown in logs; may be NULL */
  int reproducible;     /* 1: every float sum/prod/avg reduction adds in rank order, the same bits
                           whatever the algorithm, transport or layout (docs/REPRODUCIBLE.md);
                           0: the fastest plan; default CHORUS_REPRODUCIBLE (0). Every rank
                           must give the same value (init fails otherwise). */
} chorusConfig_t;

#define CHORUS_CONFIG_MAGIC 0xc40c0a11u
#define CHORUS_CONFIG_UNDEF_INT (-2147483647 - 1)
#define CHORUS_CONFIG_INITIALIZER                                                              \
  {                                                                                            \
    sizeof(chorusConfig_t), CHORUS_CONFIG_MAGIC, CHORUS_VERSION_CODE, CHORUS_CONFIG_UNDEF_INT, \
        CHORUS_CONFIG_UNDEF_INT, NULL, CHORUS_CONFIG_UNDEF_INT                                 \
  }

/** chorusCommSplit color that leaves the rank out of every new communicator. */
#define CHORUS_SPLIT_NOCOLOR (-1)

/* ------------------------------------------------------------------------- */
/* Version and errors                                                        */
/* ------------------------------------------------------------------------- */

/** Writes CHORUS_VERSION_CODE of the library actually loaded. */
CHORUS_API chorusResult_t chorusGetVersion(int* version);

/** A short, static, human description of a result code. Never NULL. */
CHORUS_API const char* chorusGetErrorString(chorusResult_t result);

/** The detail of the last error seen on this communicator (or, for comm == NULL, the
 *  last error of a call on this thread that had no communicator): what and where.
 *  Never NULL; "" when there was none. Valid until the next call on that comm/thread. */
CHORUS_API const char* chorusGetLastError(chorusComm_t comm);

/* ------------------------------------------------------------------------- */
/* Communicator lifecycle                                                    */
/* ------------------------------------------------------------------------- */

/** Creates a unique id on this process and starts the bootstrap root that listens on
 *  the address it names. Call once per communicator, hand the id to every rank. */
CHORUS_API chorusResult_t chorusGetUniqueId(chorusUniqueId* uniqueId);

/** Collective over nranks processes/threads: every rank calls it with the same id. */
CHORUS_API chorusResult_t chorusCommInitRank(chorusComm_t* comm, int nranks, chorusUniqueId commId,
                                             int rank);

/** As chorusCommInitRank, with a config (blocking or not, timeout, name). */
CHORUS_API chorusResult_t chorusCommInitRankConfig(chorusComm_t* comm, int nranks,
                                                   chorusUniqueId commId, int rank,
                                                   chorusConfig_t* config);

/** Creates ndev communicators in this process, one per rank, as threads would.
 *  comms[i] is rank i. devlist is ignored on host builds and may be NULL. The comms
 *  must then be used from different threads (or inside one group call). */
CHORUS_API chorusResult_t chorusCommInitAll(chorusComm_t* comms, int ndev, const int* devlist);

/** Finds rank, size and rendezvous from the environment, in this order:
 *  CHORUS_RANK/CHORUS_WORLD_SIZE (chorusrun), RANK/WORLD_SIZE (torchrun),
 *  OMPI_COMM_WORLD_RANK/SIZE (Open MPI), PMI_RANK/PMI_SIZE (PMI),
 *  SLURM_PROCID/SLURM_NTASKS (Slurm) (chorusGetLaunchInfo tells which, joining nothing);
 *  the rendezvous is CHORUS_INIT=tcp://host:port | file:///path, else
 *  MASTER_ADDR/MASTER_PORT, else a file keyed by the launcher's job id (one host). */
CHORUS_API chorusResult_t chorusCommInitFromEnv(chorusComm_t* comm, chorusConfig_t* config);

/** Which launcher started this process, and its place in the job, read from the
 *  environment exactly as chorusCommInitFromEnv reads it; creates nothing, contacts no one.
 *  For programs that run either under a launcher or alone (nccl-tests style):
 *
 *    const char* launcher; int rank, nranks;
 *    if (chorusGetLaunchInfo(&launcher, &rank, &nranks) != chorusSuccess) ...error...
 *    if (launcher) chorusCommInitFromEnv(&comm, NULL);             (rank of nranks)
 *    else { chorusGetUniqueId(&id); chorusCommInitRank(&comm, 1, id, 0); }  (alone)
 *
 *  A launcher started the process when one of these rank variables is set, tried in this
 *  order: CHORUS_RANK (chorusrun), RANK (torchrun), OMPI_COMM_WORLD_RANK (Open MPI),
 *  PMI_RANK (PMI), SLURM_PROCID (Slurm). Then *launcher is its name ("chorusrun",
 *  "torchrun", "Open MPI", "PMI", "Slurm"; static storage) and *rank / *nranks come from
 *  the first pair with either variable set (CHORUS_WORLD_SIZE, WORLD_SIZE,
 *  OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS). With none of the rank variables set:
 *  chorusSuccess, *launcher = NULL, *rank = 0, *nranks = 1. A rank or size that is not a
 *  number, or a rank outside the size: chorusInvalidArgument (chorusGetLastError(NULL)
 *  names the variables). Any of the pointers may be NULL. */
CHORUS_API chorusResult_t chorusGetLaunchInfo(const char** launcher, int* rank, int* nranks);

/** Collective over comm: ranks with the same color form a new communicator, ordered by
 *  key then by old rank. color CHORUS_SPLIT_NOCOLOR gives *newcomm = NULL. */
CHORUS_API chorusResult_t chorusCommSplit(chorusComm_t comm, int color, int key,
                                          chorusComm_t* newcomm, chorusConfig_t* config);

/** chorusCommShrink flags. DEFAULT: comm is healthy; operations queued on it finish
 *  first. ABORT: comm saw a failure; it is revoked first (see chorusCommRevoke), so what is
 *  in flight returns chorusAborted instead of waiting for a dead rank. */
#define CHORUS_SHRINK_DEFAULT 0x00
#define CHORUS_SHRINK_ABORT 0x01

/** Collective over the ranks of comm that are not in excludeRanks (the survivors; the
 *  excluded ranks, dead or alive, call nothing): every survivor passes the same list, in
 *  any order, and gets a new communicator of nranks - excludeCount ranks that keeps comm's
 *  rank order with the excluded ranks removed. Works when the excluded ranks are dead or
 *  unreachable (it uses neither the bootstrap root nor any excluded rank: the lowest
 *  surviving rank leads). A bad list (a rank out of range, a duplicate, this rank itself)
 *  or lists that differ between survivors give an error on every survivor (naming what and
 *  whose), never a hang. config as for chorusCommInitRankConfig (non-blocking: *newcomm
 *  is set and chorusInProgress returned once the survivors have agreed); NULL inherits
 *  comm's timeout. comm itself stays as it was (revoked with CHORUS_SHRINK_ABORT): destroy
 *  or abort it when done. */
CHORUS_API chorusResult_t chorusCommShrink(chorusComm_t comm, const int* excludeRanks,
                                           int excludeCount, chorusComm_t* newcomm,
                                           chorusConfig_t* config, int flags);

/** Collective over the ranks of comm still alive: the ranks that have failed, agreed by all
 *  callers, so each survivor may pass the same list to chorusCommShrink. Every caller probes
 *  every rank's bootstrap listener (a dead process's is refused at once; one unreachable
 *  within the communicator's timeout T counts as failed), then the lowest live rank merges
 *  the views and hands every caller the same sorted list. The callers may arrive up to about
 *  T apart (as they notice the failure); a live rank that has not called it 2 T + 2 s after
 *  the lowest live rank did is counted as failed (and gets chorusRemoteError). Writes at most
 *  maxRanks ranks; *count is the number of failed ranks (which may exceed maxRanks). */
CHORUS_API chorusResult_t chorusCommFailedRanks(chorusComm_t comm, int* ranks, int maxRanks,
                                                int* count);

/** Local: marks comm revoked. Every operation waiting on it returns chorusAborted, and so
 *  does every later one; chorusCommFailedRanks, chorusCommShrink and chorusCommDestroy
 *  still work. Other ranks are not told (each survivor revokes its own, or shrinks with
 *  CHORUS_SHRINK_ABORT). Safe to call from another thread while a collective is blocked. */
CHORUS_API chorusResult_t chorusCommRevoke(chorusComm_t comm);

/** Waits for every operation queued on comm to finish. Collective-safe: after it, the
 *  communicator can be destroyed without losing work. */
CHORUS_API chorusResult_t chorusCommFinalize(chorusComm_t comm);

/** Frees the communicator's resources. Local: it does not talk to other ranks. */
CHORUS_API chorusResult_t chorusCommDestroy(chorusComm_t comm);

/** Marks comm aborted: every waiter on it returns chorusAborted, then it is freed.
 *  Safe to call from another thread while a collective is blocked. */
CHORUS_API chorusResult_t chorusCommAbort(chorusComm_t comm);

/** The first asynchronous error on comm (a failed stream operation, a dead peer, a
 *  non-blocking init still running: chorusInProgress), or chorusSuccess. */
CHORUS_API chorusResult_t chorusCommGetAsyncError(chorusComm_t comm, chorusResult_t* asyncError);

CHORUS_API chorusResult_t chorusCommCount(const chorusComm_t comm, int* count);
CHORUS_API chorusResult_t chorusCommUserRank(const chorusComm_t comm, int* rank);

/* ------------------------------------------------------------------------- */
/* Streams                                                                   */
/* ------------------------------------------------------------------------- */

/** A host stream: an ordered queue executed by a worker thread that sleeps when idle. */
CHORUS_API chorusResult_t chorusStreamCreate(chorusStream_t* stream);
/** Waits until every operation on the stream has finished; returns the first error
 *  any of them had since the last synchronize. */
CHORUS_API chorusResult_t chorusStreamSynchronize(chorusStream_t stream);
/** chorusSuccess when the stream is idle, chorusInProgress when it still has work. */
CHORUS_API chorusResult_t chorusStreamQuery(chorusStream_t stream);
/** Synchronizes, then frees the stream. */
CHORUS_API chorusResult_t chorusStreamDestroy(chorusStream_t stream);
/** Wraps a cudaStream_t. Only in builds with CUDA and a GPU present; elsewhere it returns
 *  chorusInvalidUsage with the reason. */
CHORUS_API chorusResult_t chorusStreamFromCuda(void* cudaStream, chorusStream_t* stream);

/* ------------------------------------------------------------------------- */
/* Reduction operations                                                      */
/* ------------------------------------------------------------------------- */

/** A sum where each rank's input is first multiplied by *scalar (of type datatype). */
CHORUS_API chorusResult_t chorusRedOpCreatePreMulSum(chorusRedOp_t* op, void* scalar,
                                                     chorusDataType_t datatype,
                                                     chorusScalarResidence_t residence,
                                                     chorusComm_t comm);
CHORUS_API chorusResult_t chorusRedOpDestroy(chorusRedOp_t op, chorusComm_t comm);

/* ------------------------------------------------------------------------- */
/* Collectives. count is in elements. In-place: sendbuff == recvbuff, or for      */
/* all-gather sendbuff == recvbuff + rank*count, for reduce-scatter                */
/* recvbuff == sendbuff + rank*recvcount (NCCL's rules).                          */
/* ------------------------------------------------------------------------- */

CHORUS_API chorusResult_t chorusAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          chorusDataType_t datatype, chorusRedOp_t op,
                                          chorusComm_t comm, chorusStream_t stream);

CHORUS_API chorusResult_t chorusBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                          chorusDataType_t datatype, int root, chorusComm_t comm,
                                          chorusStream_t stream);

/** Result only on root; recvbuff may be NULL elsewhere. */
CHORUS_API chorusResult_t chorusReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       chorusDataType_t datatype, chorusRedOp_t op, int root,
                                       chorusComm_t comm, chorusStream_t stream);

/** recvbuff holds nranks*sendcount elements, rank r's block at r*sendcount. */
CHORUS_API chorusResult_t chorusAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          chorusDataType_t datatype, chorusComm_t comm,
                                          chorusStream_t stream);

/** sendbuff holds nranks*recvcount elements; rank r receives the reduction of block r. */
CHORUS_API chorusResult_t chorusReduceScatter(const void* sendbuff, void* recvbuff,
                                              size_t recvcount, chorusDataType_t datatype,
                                              chorusRedOp_t op, chorusComm_t comm,
                                              chorusStream_t stream);

/** Root's sendbuff holds nranks*count elements; rank r receives block r. In-place on
 *  root: recvbuff == sendbuff + root*count. sendbuff is ignored off root. */
CHORUS_API chorusResult_t chorusScatter(const void* sendbuff, void* recvbuff, size_t count,
                                        chorusDataType_t datatype, int root, chorusComm_t comm,
                                        chorusStream_t stream);

/** Root's recvbuff receives nranks*count elements, rank r's block at r*count. In-place
 *  on root: sendbuff == recvbuff + root*count. recvbuff is ignored off root. */
CHORUS_API chorusResult_t chorusGather(const void* sendbuff, void* recvbuff, size_t count,
                                       chorusDataType_t datatype, int root, chorusComm_t comm,
                                       chorusStream_t stream);

/** Block j of sendbuff (count elements) goes to rank j; block i of recvbuff comes from
 *  rank i. In-place (sendbuff == recvbuff) is allowed. */
CHORUS_API chorusResult_t chorusAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                         chorusDataType_t datatype, chorusComm_t comm,
                                         chorusStream_t stream);

/** Returns when every rank has entered the barrier. */
CHORUS_API chorusResult_t chorusBarrier(chorusComm_t comm, chorusStream_t stream);

/** Point to point. Outside a group a send may wait for its matching receive; inside
 *  chorusGroupStart/End any set of sends and receives completes without deadlock. Within
 *  one group a send buffer must not overlap a receive buffer (they progress at the same
 *  time, as in NCCL). */
CHORUS_API chorusResult_t chorusSend(const void* sendbuff, size_t count, chorusDataType_t datatype,
                                     int peer, chorusComm_t comm, chorusStream_t stream);
CHORUS_API chorusResult_t chorusRecv(void* recvbuff, size_t count, chorusDataType_t datatype,
                                     int peer, chorusComm_t comm, chorusStream_t stream);
/** Receives `count` elements from whichever other rank's send arrives first (MPI's
 *  MPI_ANY_SOURCE); *peer is that rank once the receive has completed (for a stream: after
 *  chorusStreamSynchronize). The matching send is a plain chorusSend of the same size.
 *  Not inside chorusGroupStart/End; count must be > 0 (zero-byte sends carry nothing). */
CHORUS_API chorusResult_t chorusRecvAnySource(void* recvbuff, size_t count,
                                              chorusDataType_t datatype, int* peer,
                                              chorusComm_t comm, chorusStream_t stream);

/** Group calls: between Start and End, calls are recorded, not run; End runs them
 *  together (send/recv pairs progress concurrently; several communicators driven by one
 *  thread progress in parallel). Groups nest; only the outermost End runs. */
CHORUS_API chorusResult_t chorusGroupStart(void);
CHORUS_API chorusResult_t chorusGroupEnd(void);

/** Buffer registration (NCCL's shapes). chorusMemAlloc returns `size` bytes (rounded up to
 *  pages) of library-owned shared memory that other ranks on the host can map; free it
 *  with chorusMemFree. It is a memfd: nothing is ever left in /dev/shm. */
CHORUS_API chorusResult_t chorusMemAlloc(void** ptr, size_t size);
CHORUS_API chorusResult_t chorusMemFree(void* ptr);

/** Registers [buff, buff + size) on `comm` (local: no communication). Collectives whose
 *  buffers lie in a registered chorusMemAlloc region copy straight between the ranks'
 *  buffers, peers mapping the region; other registered memory is treated like unregistered
 *  memory (single copy through process_vm_readv where the kernel allows it). *handle is
 *  valid until chorusCommDeregister on the same communicator. Deregister before freeing. */
CHORUS_API chorusResult_t chorusCommRegister(const chorusComm_t comm, void* buff, size_t size,
                                             void** handle);
CHORUS_API chorusResult_t chorusCommDeregister(const chorusComm_t comm, void* handle);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHORUS_H_ */
