// collectives.cc — the collective entry points: check every argument, resolve the op,
// hand a validated call to the enqueue layer.
#include <cstring>

#include "src/api/resolve.h"
#include "chorus.h"
#include "src/comm/comm.h"
#include "src/comm/exec_lock.h"
#include "kernels/host/host_reduce.h"
#include "src/core/checks.h"
#include "src/core/live_handles.h"
#include "src/core/debug.h"
#include "src/cuda/device_path.h"
#include "src/enqueue/enqueue.h"
#include "src/enqueue/ptrcheck.h"
#include "src/enqueue/stream.h"

namespace chorus {
namespace {

struct Call {
  Coll coll;
  const char* api;
  const void* sendbuf;
  void* recvbuf;
  size_t count;
  int type;  // raw values: a C caller may pass any int, and loading an out-of-range
  int op;    // value through the enum type would be undefined behaviour

  int root;  // root or peer; -1 when unused
  chorusComm* comm;
  chorusStream_t stream;
  int* anyPeer = nullptr;  // chorusRecvAnySource: where the sender's rank goes
};

// The bits of an enum argument as an int, without an enum-typed load (see Call).
template <class E>
int raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

bool isReducing(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}
bool hasRoot(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Scatter || c == Coll::Gather ||
         c == Coll::Send || c == Coll::Recv;
}

chorusResult_t validate(const Call& c, CollArgs* out) {
  chorusComm* comm = c.comm;
  CHORUS_CHECK(commCheck(comm, c.api));
  if (comm->abortFlag.load(std::memory_order_relaxed))
    CHORUS_FAIL(chorusAborted, "%s: rank %d's communicator was aborted", c.api, comm->rank);
  if (__builtin_expect(comm->asyncError.load(std::memory_order_acquire) == chorusInProgress, 0))
    CHORUS_FAIL(chorusInvalidUsage,
                "%s: the communicator is still initializing (non-blocking init): poll "
                "chorusCommGetAsyncError until it is no longer chorusInProgress",
                c.api);
  if (__builtin_expect(comm->initFailed.load(std::memory_order_relaxed), 0))
    CHORUS_FAIL(chorusInvalidUsage,
                "%s: the communicator's non-blocking init failed (chorusCommGetAsyncError says "
                "why); it can only be destroyed",
                c.api);
  if (c.stream) CHORUS_CHECK(streamCheck(c.stream, c.api));
  if (c.type < 0 || c.type >= chorusNumTypes)
    CHORUS_FAIL(chorusInvalidArgument, "%s: datatype %d is not a chorusDataType_t", c.api, c.type);
  const auto type = static_cast<chorusDataType_t>(c.type);
  const int n = comm->nranks;
  if (c.anyPeer) {
    if (inGroup())
      CHORUS_FAIL(chorusInvalidUsage,
                  "%s: not allowed between chorusGroupStart and chorusGroupEnd "
                  "(the sender must be known before the group's other operations are matched)",
                  c.api);
    if (n < 2)
      CHORUS_FAIL(chorusInvalidUsage, "%s: rank %d has no other rank to receive from", c.api,
                  comm->rank);
    if (c.count == 0)
      CHORUS_FAIL(chorusInvalidArgument,
                  "%s: count is 0 (a zero-byte send carries nothing to match)", c.api);
  } else if (hasRoot(c.coll) && (c.root < 0 || c.root >= n))
    CHORUS_FAIL(chorusInvalidArgument, "%s: %s %d is outside [0, %d)", c.api,
                (c.coll == Coll::Send || c.coll == Coll::Recv) ? "peer" : "root", c.root, n);
  const size_t elem = kernels::typeSize(type);
  const size_t maxCount = SIZE_MAX / elem / static_cast<size_t>(n);
  if (c.count > maxCount)
    CHORUS_FAIL(chorusInvalidArgument, "%s: count %zu of %zu-byte elements overflows size_t", c.api,
                c.count, elem);
  kernels::ReduceSpec spec;
  spec.type = type;
  if (isReducing(c.coll)) {
    if (c.op < 0)
      CHORUS_FAIL(chorusInvalidArgument, "%s: op %d is not a chorusRedOp_t", c.api, c.op);
    CHORUS_CHECK(resolveReduceSpec(comm, static_cast<chorusRedOp_t>(c.op), type, c.api, &spec));
  }

  const size_t one = c.count * elem, all = one * static_cast<size_t>(n);
  const bool isRoot = comm->rank == c.root;
  size_t sendBytes = one, recvBytes = one;
  switch (c.coll) {
    case Coll::AllReduce: break;
    case Coll::Broadcast: sendBytes = isRoot ? one : 0; break;
    case Coll::Reduce: recvBytes = isRoot ? one : 0; break;
    case Coll::AllGather: recvBytes = all; break;
    case Coll::ReduceScatter: sendBytes = all; break;
    case Coll::Scatter: sendBytes = isRoot ? all : 0; break;
    case Coll::Gather: recvBytes = isRoot ? all : 0; break;
    case Coll::AllToAll: sendBytes = recvBytes = all; break;
    case Coll::Send: recvBytes = 0; break;
    case Coll::Recv: sendBytes = 0; break;
    case Coll::Barrier: sendBytes = recvBytes = 0; break;
  }
  if (__builtin_expect(c.stream != nullptr && c.stream->device != nullptr, 0)) {
    // A CUDA stream: device, pinned or host buffers (src/cuda/device_path.h).
    CHORUS_CHECK(
        c.stream->device->checkBuffer(comm, c.sendbuf, sendBytes, c.api, "sendbuff", false));
    CHORUS_CHECK(
        c.stream->device->checkBuffer(comm, c.recvbuf, recvBytes, c.api, "recvbuff", true));
  } else {
    CHORUS_CHECK(checkHostBuffer(comm, c.sendbuf, sendBytes, c.api, "sendbuff", false,
                                 cuda::describeNonHostPointer));
    CHORUS_CHECK(checkHostBuffer(comm, c.recvbuf, recvBytes, c.api, "recvbuff", true,
                                 cuda::describeNonHostPointer));
  }
  *out = CollArgs{c.coll, c.sendbuf, c.recvbuf, c.count,
                  type,   spec,      c.root,    isReducing(c.coll) ? c.op : -1};
  out->anyPeer = c.anyPeer;
  return chorusSuccess;
}

// Under the exec lock (runBlocking): the last call's resolved arguments, in place, when
// this call is the same one, else a full validation into `scratch`, remembered for next
// time. In place, not copied: the compiler made the copy a `rep movs`, and a profile of
// the 512 B gather put the call's wait on the first load of a field of the copy (a string
// store is not forwarded to a later load either: the load waits as below).
chorusResult_t prepareBlocking(const void* ctx, CollArgs* scratch, CollArgs** out) {
  const Call& c = *static_cast<const Call*>(ctx);
  LastCall& last = c.comm->lastCall;
  // The caller stored `c` a moment ago, each int on its own; its loads must be of the same
  // width. Left to itself the compiler compares type and op with one 8-byte load, which the
  // store buffer cannot forward from two 4-byte stores: the load then waits until every
  // earlier store has left the buffer, on the LL send path the last call's stores into lines
  // the peer holds, a cross-core round trip per call (docs/PERF.md#perf-g512). An atomic
  // load is never widened or merged.
  const int type = __atomic_load_n(&c.type, __ATOMIC_RELAXED);
  const int op = __atomic_load_n(&c.op, __ATOMIC_RELAXED);
  const int root = __atomic_load_n(&c.root, __ATOMIC_RELAXED);
  if (last.valid && last.coll == c.coll && last.sendbuf == c.sendbuf && last.recvbuf == c.recvbuf &&
      last.count == c.count && last.type == type && last.op == op && last.root == root &&
      !c.comm->abortFlag.load(std::memory_order_relaxed)) {
    *out = &last.args;
    return chorusSuccess;
  }
  CHORUS_CHECK(validate(c, scratch));
  *out = scratch;
  // User ops can be destroyed (and their slot reused): those calls validate every time.
  last.valid = !isReducing(c.coll) || c.op < chorusNumOps;
  last.coll = c.coll;
  last.sendbuf = c.sendbuf;
  last.recvbuf = c.recvbuf;
  last.count = c.count;
  last.type = c.type;
  last.op = c.op;
  last.root = c.root;
  last.args = *scratch;
  return chorusSuccess;
}

chorusResult_t submit(const Call& c) {
  clearThreadLastError();
  const bool commOk = liveHandleHas(HandleKind::Comm, c.comm);
  if (commOk) setLogRank(c.comm->rank);
  // A blocking collective is validated (or found identical to the last one) and run under
  // one lock; everything else is validated here, then run, queued or recorded in the group.
  const bool blocking = commOk && c.stream == nullptr && c.anyPeer == nullptr &&
                        c.coll != Coll::Send && c.coll != Coll::Recv && !inGroup();
  if (blocking && enterBiased(c.comm)) {
    // This thread holds the exec lock's bias: no lock, no activeCalls (src/comm/exec_lock.h).
    const chorusResult_t r = runBlockingBiased(c.comm, prepareBlocking, &c);
    if (r != chorusSuccess) commRecordError(c.comm, r);
    leaveBiased(c.comm);
    return r;
  }
  CollArgs args;
  chorusResult_t r = blocking ? chorusSuccess : validate(c, &args);
  if (r != chorusSuccess) {
    if (commOk) commRecordError(c.comm, r);
    return r;
  }
  // From here until the decrement, chorusCommAbort/Destroy on another thread waits for us.
  c.comm->activeCalls.fetch_add(1, std::memory_order_acq_rel);
  r = blocking ? runBlocking(c.comm, prepareBlocking, &c) : enqueueOp(Op{c.comm, args, c.stream});
  if (r != chorusSuccess) commRecordError(c.comm, r);
  c.comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
  return r;
}

}  // namespace
}  // namespace chorus

using chorus::Coll;
using chorus::raw;

extern "C" {

CHORUS_API chorusResult_t chorusAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          chorusDataType_t datatype, chorusRedOp_t op,
                                          chorusComm_t comm, chorusStream_t stream) {
  return chorus::submit({Coll::AllReduce, "chorusAllReduce", sendbuff, recvbuff, count,
                         raw(datatype), raw(op), -1, comm, stream});
}

CHORUS_API chorusResult_t chorusBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                          chorusDataType_t datatype, int root, chorusComm_t comm,
                                          chorusStream_t stream) {
  return chorus::submit({Coll::Broadcast, "chorusBroadcast", sendbuff, recvbuff, count,
                         raw(datatype), chorusSum, root, comm, stream});
}

CHORUS_API chorusResult_t chorusReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       chorusDataType_t datatype, chorusRedOp_t op, int root,
                                       chorusComm_t comm, chorusStream_t stream) {
  return chorus::submit({Coll::Reduce, "chorusReduce", sendbuff, recvbuff, count, raw(datatype),
                         raw(op), root, comm, stream});
}

CHORUS_API chorusResult_t chorusAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          chorusDataType_t datatype, chorusComm_t comm,
                                          chorusStream_t stream) {
  return chorus::submit({Coll::AllGather, "chorusAllGather", sendbuff, recvbuff, sendcount,
                         raw(datatype), chorusSum, -1, comm, stream});
}

CHORUS_API chorusResult_t chorusReduceScatter(const void* sendbuff, void* recvbuff,
                                              size_t recvcount, chorusDataType_t datatype,
                                              chorusRedOp_t op, chorusComm_t comm,
                                              chorusStream_t stream) {
  return chorus::submit({Coll::ReduceScatter, "chorusReduceScatter", sendbuff, recvbuff, recvcount,
                         raw(datatype), raw(op), -1, comm, stream});
}

CHORUS_API chorusResult_t chorusScatter(const void* sendbuff, void* recvbuff, size_t count,
                                        chorusDataType_t datatype, int root, chorusComm_t comm,
                                        chorusStream_t stream) {
  return chorus::submit({Coll::Scatter, "chorusScatter", sendbuff, recvbuff, count, raw(datatype),
                         chorusSum, root, comm, stream});
}

CHORUS_API chorusResult_t chorusGather(const void* sendbuff, void* recvbuff, size_t count,
                                       chorusDataType_t datatype, int root, chorusComm_t comm,
                                       chorusStream_t stream) {
  return chorus::submit({Coll::Gather, "chorusGather", sendbuff, recvbuff, count, raw(datatype),
                         chorusSum, root, comm, stream});
}

CHORUS_API chorusResult_t chorusAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                         chorusDataType_t datatype, chorusComm_t comm,
                                         chorusStream_t stream) {
  return chorus::submit({Coll::AllToAll, "chorusAllToAll", sendbuff, recvbuff, count, raw(datatype),
                         chorusSum, -1, comm, stream});
}

CHORUS_API chorusResult_t chorusBarrier(chorusComm_t comm, chorusStream_t stream) {
  return chorus::submit({Coll::Barrier, "chorusBarrier", nullptr, nullptr, 0, chorusInt8, chorusSum,
                         -1, comm, stream});
}

CHORUS_API chorusResult_t chorusSend(const void* sendbuff, size_t count, chorusDataType_t datatype,
                                     int peer, chorusComm_t comm, chorusStream_t stream) {
  return chorus::submit({Coll::Send, "chorusSend", sendbuff, nullptr, count, raw(datatype),
                         chorusSum, peer, comm, stream});
}

CHORUS_API chorusResult_t chorusRecv(void* recvbuff, size_t count, chorusDataType_t datatype,
                                     int peer, chorusComm_t comm, chorusStream_t stream) {
  return chorus::submit({Coll::Recv, "chorusRecv", nullptr, recvbuff, count, raw(datatype),
                         chorusSum, peer, comm, stream});
}

CHORUS_API chorusResult_t chorusRecvAnySource(void* recvbuff, size_t count,
                                              chorusDataType_t datatype, int* peer,
                                              chorusComm_t comm, chorusStream_t stream) {
  if (!peer) {
    chorus::clearThreadLastError();
    CHORUS_FAIL(chorusInvalidArgument, "chorusRecvAnySource: peer is NULL");
  }
  *peer = -1;
  chorus::Call c{Coll::Recv, "chorusRecvAnySource",
                 nullptr,    recvbuff,
                 count,      raw(datatype),
                 chorusSum,  -1,
                 comm,       stream};
  c.anyPeer = peer;
  return chorus::submit(c);
}

CHORUS_API chorusResult_t chorusGroupStart(void) {
  chorus::clearThreadLastError();
  return chorus::groupStart();
}

CHORUS_API chorusResult_t chorusGroupEnd(void) {
  chorus::clearThreadLastError();
  return chorus::groupEnd();
}

}  // extern "C"
