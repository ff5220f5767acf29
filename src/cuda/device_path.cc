// device_path.cc — collectives on device buffers, ordered on the user's CUDA stream.
//
// The design, chosen to be simple enough to be right without ever running on a GPU here:
//
//   user's CUDA stream:  copy in p0 | rec in0 | copy in p1 | rec in1 | ... | wait(t0) | copy out p0
//   | wait(t1) | copy out p1 | ... | rec done stream's worker:     sync in0 -> host collective on
//   p0 -> flag=t0 ; sync in1 -> ... ; sync done -> staging back to the pool
//
// - Every buffer is copied piece by piece (cudaMemcpy2DAsync, one 2D copy per buffer and
//   piece, see pieces.h) into pinned, mapped host staging; the existing host algorithms and
//   transports (shm, tcp) run each piece unchanged, so the data path across ranks is the
//   one the whole host suite tests. No device kernel touches peer data.
// - All input copies are enqueued before any output copy, so in-place calls read every
//   input before anything is written back.
// - The worker waits for piece k's input with an event, runs the collective on it, then
//   raises a mapped flag to the piece's ticket; the stream's wait kernel for that ticket
//   lets the copy back run. Piece k+1 is being copied in while piece k runs on the host and
//   piece k-1 is copied out: copy, reduce and transfer overlap.
// - The call returns as soon as this is enqueued, like NCCL. The flag is raised for every
//   piece even when a piece fails, so the user's stream never waits forever; the error is
//   reported by chorusStreamSynchronize and chorusCommGetAsyncError.
// - Several ranks on one GPU (threads or processes) work: each rank's stream waits only for
//   its own flag, and ranks exchange data through the host transports.
// - Staging and events are pooled per stream and freed only when the stream is destroyed:
//   freeing pinned memory can synchronize the whole device, which could wait on another
//   rank's wait kernel, which waits on us.
#include <cstring>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "kernels/host/host_reduce.h"
#include "src/comm/flight_recorder.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/cuda/device_guard.h"
#include "src/cuda/device_path.h"
#include "src/cuda/pieces.h"
#include "src/enqueue/ptrcheck.h"
#include "src/enqueue/stream.h"

namespace chorus {
namespace cuda {
namespace {

constexpr size_t kAlign = 256;
size_t alignUp(size_t v) { return (v + kAlign - 1) & ~(kAlign - 1); }

// Where one op's buffers sit in the staging area.
struct OpStage {
  Op op;
  CallLayout layout;
  size_t elem = 0;
  size_t inOffset = 0, outOffset = 0;  // into the staging area
  // A user buffer in host memory (pageable or pinned) is copied by the worker, not by the
  // stream: cudart performs host-to-host "async" copies synchronously at enqueue time,
  // outside stream order. The event before piece k orders the worker's read after the
  // stream's earlier work; the wait after it orders the stream's later work after the write.
  bool sendOnHost = false, recvOnHost = false;
  std::vector<Piece> pieces;
  std::vector<uint64_t> frIds;  // one flight-recorder entry per piece
};

// The caller holds b->mutex.
PinnedBlock* takeStaging(StreamBinding* b, size_t bytes, std::string* err) {
  if (bytes == 0) bytes = kAlign;
  for (PinnedBlock& p : b->staging)
    if (!p.inUse && p.bytes >= bytes) {
      p.inUse = true;
      return &p;
    }
  PinnedBlock p;
  p.bytes = bytes;
  if (!b->rt->hostAllocMapped(bytes, &p.host, &p.dev, err)) return nullptr;
  p.inUse = true;
  b->staging.push_back(p);
  return &b->staging.back();
}

void* takeEvent(StreamBinding* b, std::string* err) {
  if (!b->freeEvents.empty()) {
    void* ev = b->freeEvents.back();
    b->freeEvents.pop_back();
    return ev;
  }
  void* ev = nullptr;
  if (!b->rt->eventCreate(&ev, err)) return nullptr;
  b->allEvents.push_back(ev);
  return ev;
}

// The piece's host-side op: the same collective on the packed staging pieces.
Op pieceOp(const OpStage& st, size_t k, unsigned char* staging) {
  const Piece& pc = st.pieces[k];
  Op op = st.op;
  op.stream = nullptr;
  op.args.count = pc.count;
  op.args.frId = st.frIds[k];
  op.args.sendbuf = st.layout.send.nblocks > 0
                        ? staging + st.inOffset + st.layout.send.nblocks * pc.first * st.elem
                        : nullptr;
  op.args.recvbuf = st.layout.recv.nblocks > 0
                        ? staging + st.outOffset + st.layout.recv.nblocks * pc.first * st.elem
                        : nullptr;
  return op;
}

// `rows` rows of `width` bytes between two host buffers.
void hostCopy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, int rows) {
  for (int r = 0; r < rows; ++r)
    std::memcpy(static_cast<unsigned char*>(dst) + r * dpitch,
                static_cast<const unsigned char*>(src) + r * spitch, width);
}

// Copies piece k of a host-memory user buffer, on the worker. toStaging: user -> staging.
void hostCopyPiece(const OpStage& st, size_t k, bool toStaging, unsigned char* staging) {
  const Piece& pc = st.pieces[k];
  const int nblocks = toStaging ? st.layout.send.nblocks : st.layout.recv.nblocks;
  if (nblocks == 0 || pc.count == 0 || !(toStaging ? st.sendOnHost : st.recvOnHost)) return;
  const size_t width = pc.count * st.elem, block = st.op.args.count * st.elem;
  unsigned char* packed =
      staging + (toStaging ? st.inOffset : st.outOffset) + nblocks * pc.first * st.elem;
  if (toStaging)
    hostCopy2D(packed, width,
               static_cast<const unsigned char*>(st.op.args.sendbuf) + pc.first * st.elem, block,
               width, nblocks);
  else
    hostCopy2D(static_cast<unsigned char*>(st.op.args.recvbuf) + pc.first * st.elem, block, packed,
               width, width, nblocks);
}

// Enqueues the 2D copies of piece k of one device buffer side. toStaging: user -> staging.
bool copyPiece(const Runtime& rt, const OpStage& st, size_t k, bool toStaging,
               unsigned char* staging, void* stream, std::string* err) {
  const Piece& pc = st.pieces[k];
  const int nblocks = toStaging ? st.layout.send.nblocks : st.layout.recv.nblocks;
  if (nblocks == 0 || pc.count == 0 || (toStaging ? st.sendOnHost : st.recvOnHost)) return true;
  const size_t width = pc.count * st.elem, block = st.op.args.count * st.elem;
  unsigned char* packed =
      staging + (toStaging ? st.inOffset : st.outOffset) + nblocks * pc.first * st.elem;
  if (toStaging) {
    const auto* user = static_cast<const unsigned char*>(st.op.args.sendbuf) + pc.first * st.elem;
    return rt.memcpy2DAsync(packed, width, user, block, width, nblocks, stream, err);
  }
  auto* user = static_cast<unsigned char*>(st.op.args.recvbuf) + pc.first * st.elem;
  return rt.memcpy2DAsync(user, block, packed, width, width, nblocks, stream, err);
}

// Host memory as cudart sees it (validation already classified it successfully).
bool onHost(const Runtime& rt, const void* p) {
  PtrInfo info;
  std::string ignored;
  return !rt.classify(p, &info, &ignored) || info.kind != MemKind::Device;
}

}  // namespace

chorusResult_t enqueueDeviceOps(StreamBinding* b, chorusStream* s, const std::vector<Op>& ops,
                                DeviceExecutor::RunHostOps runHost) {
  const Runtime& rt = *b->rt;

  // One collective alone goes to the device path's job (direct.cc): the first one on this
  // (stream, communicator) agrees on the path there, without blocking; later ones wait for
  // that agreement (every rank's first call is queued by then) and go where it says. A
  // send/receive alone goes there only when its stream already agreed on the device path
  // (it cannot start the communicator-wide agreement). Groups are staged below.
  if (ops.size() == 1) {
    const Op& op = ops[0];
    const bool p2p = op.args.coll == Coll::Send || op.args.coll == Coll::Recv;
    chorusResult_t r = chorusSuccess;
    bool isNew = false;
    CommLink* L = linkFor(b, op.comm, !p2p, &isNew, &r);
    if (!L && !p2p) {
      op.comm->flight->finish(op.args.frId, r);
      return r;
    }
    if (isNew) return enqueueDirect(b, s, op, L, true, std::move(runHost));
    if (L && (r = waitAgreed(L)) == chorusSuccess) {
      switch (L->verdict) {
        case Verdict::Device:
          if (!p2p || (op.args.anyPeer == nullptr && op.args.root >= 0))
            return enqueueDirect(b, s, op, L, false, std::move(runHost));
          break;
        case Verdict::Staging: break;
        case Verdict::Mismatch:
        case Verdict::NoDevice: r = chorusInvalidUsage; break;
      }
    }
    if (r != chorusSuccess) {
      op.comm->flight->finish(op.args.frId, r);
      CHORUS_FAIL(r, "device buffers: CHORUS_CUDA_PATH: %s", L->why.c_str());
    }
  }

  // Plan: one op alone is cut into pieces; the ops of a group go whole (one piece each),
  // so a group stays one batch on the host side.
  std::vector<OpStage> stages(ops.size());
  size_t inBytes = 0, outBytes = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    OpStage& st = stages[i];
    st.op = ops[i];
    chorusComm* comm = st.op.comm;
    st.layout = callLayout(st.op.args.coll, comm->nranks, comm->rank, st.op.args.root);
    st.elem = kernels::typeSize(st.op.args.type);
    st.pieces = ops.size() == 1 ? splitPieces(st.op.args.count, st.elem, pieceBytes())
                                : std::vector<Piece>{Piece{0, st.op.args.count}};
    st.sendOnHost = st.layout.send.nblocks > 0 && onHost(rt, st.op.args.sendbuf);
    st.recvOnHost = st.layout.recv.nblocks > 0 && onHost(rt, st.op.args.recvbuf);
    st.inOffset = inBytes;
    inBytes += alignUp(st.layout.send.nblocks * st.op.args.count * st.elem);
  }
  for (OpStage& st : stages) {
    st.outOffset = inBytes + outBytes;
    outBytes += alignUp(st.layout.recv.nblocks * st.op.args.count * st.elem);
  }
  const size_t npieces = stages[0].pieces.size();  // groups: 1

  // A call that fails before anything waits on the stream ends here: its flight-recorder
  // entries are closed with the error, the error returns to the caller.
  auto failEarly = [&](chorusResult_t r) {
    for (const Op& op : ops) op.comm->flight->finish(op.args.frId, r);
    return r;
  };
  std::unique_lock<std::mutex> lock(b->mutex);
  DeviceGuard guard(rt, b->device);
  if (!guard.ok())
    return failEarly(fail(chorusInvalidUsage, __FILE__, __LINE__,
                          "device buffers: cannot make GPU %d current (%s)", b->device,
                          guard.error().c_str()));
  std::string err;
  PinnedBlock* block = takeStaging(b, inBytes + outBytes, &err);
  if (!block)
    return failEarly(fail(chorusSystemError, __FILE__, __LINE__,
                          "device buffers: %zu bytes of pinned staging: %s", inBytes + outBytes,
                          err.c_str()));
  std::vector<void*> inEvents(npieces, nullptr);
  void* doneEvent = nullptr;
  auto giveBack = [&] {
    block->inUse = false;
    for (void* ev : inEvents)
      if (ev) b->freeEvents.push_back(ev);
    if (doneEvent) b->freeEvents.push_back(doneEvent);
  };
  for (void*& ev : inEvents)
    if (!(ev = takeEvent(b, &err))) {
      giveBack();
      return failEarly(fail(chorusSystemError, __FILE__, __LINE__,
                            "device buffers: cudaEventCreate: %s", err.c_str()));
    }
  if (!(doneEvent = takeEvent(b, &err))) {
    giveBack();
    return failEarly(fail(chorusSystemError, __FILE__, __LINE__,
                          "device buffers: cudaEventCreate: %s", err.c_str()));
  }
  auto* staging = static_cast<unsigned char*>(block->host);

  // Inputs, every piece, before any output (in-place safety).
  for (size_t k = 0; k < npieces; ++k) {
    bool ok = true;
    for (const OpStage& st : stages)
      ok = ok && copyPiece(rt, st, k, true, staging, b->cudaStream, &err);
    if (!ok || !rt.eventRecord(inEvents[k], b->cudaStream, &err)) {
      // Copies already queued may still write the staging: it stays taken until the
      // stream is destroyed. Nothing waits on a ticket yet, so the stream cannot hang.
      for (void* ev : inEvents) b->freeEvents.push_back(ev);
      b->freeEvents.push_back(doneEvent);
      return failEarly(fail(chorusSystemError, __FILE__, __LINE__,
                            "device buffers: enqueueing the input copies: %s", err.c_str()));
    }
  }

  // Tickets are handed out here; from now on a job must run that raises the flag to the
  // last of them, whatever happens.
  const uint64_t firstTicket = b->issued + 1;
  b->issued += npieces;
  std::string setupError;
  bool doneRecorded = false;
  for (size_t k = 0; k < npieces && setupError.empty(); ++k) {
    bool ok = rt.waitFlag(b->flagDev, firstTicket + k, b->cudaStream, &err);
    for (const OpStage& st : stages)
      ok = ok && copyPiece(rt, st, k, false, staging, b->cudaStream, &err);
    if (!ok) setupError = err;
  }
  if (setupError.empty()) {
    if (rt.eventRecord(doneEvent, b->cudaStream, &err))
      doneRecorded = true;
    else
      setupError = err;
  }

  // Flight-recorder entries: the call's own for piece 0, one more per further piece.
  for (OpStage& st : stages) {
    st.frIds.assign(npieces, 0);
    st.frIds[0] = st.op.args.frId;
    for (size_t k = 1; k < npieces; ++k)
      st.frIds[k] = st.op.comm->flight->enqueue(static_cast<int>(st.op.args.coll), st.op.args.type,
                                                st.pieces[k].count, st.op.args.op, st.op.args.root);
    st.op.comm->activeCalls.fetch_add(1, std::memory_order_acq_rel);  // released by the job
  }

  auto job = [b, stages, staging, block, inEvents, doneEvent, doneRecorded, firstTicket, npieces,
              setupError, runHost]() mutable -> chorusResult_t {
    const Runtime& rt = *b->rt;
    DeviceGuard guard(rt, b->device);
    std::string err;
    chorusResult_t r = chorusSuccess;
    if (!setupError.empty())
      r = fail(chorusSystemError, __FILE__, __LINE__,
               "device buffers: enqueueing on CUDA stream %p failed: %s", b->cudaStream,
               setupError.c_str());
    for (size_t k = 0; k < npieces; ++k) {
      if (r == chorusSuccess && !rt.eventSynchronize(inEvents[k], &err))
        r = fail(chorusSystemError, __FILE__, __LINE__,
                 "device buffers: waiting for piece %zu's input copy: %s", k, err.c_str());
      // Host receive buffers: writable? Only now is the stream's earlier work done with them.
      if (k == 0 && r == chorusSuccess)
        for (const OpStage& st : stages)
          if (st.recvOnHost && r == chorusSuccess)
            r = checkHostBuffer(
                st.op.comm, st.op.args.recvbuf, st.layout.recv.nblocks * st.op.args.count * st.elem,
                "a call on a CUDA stream", "recvbuff", true, describeNonHostPointer);
      if (r == chorusSuccess) {
        std::vector<Op> pieceOps;
        pieceOps.reserve(stages.size());
        for (const OpStage& st : stages) {
          hostCopyPiece(st, k, true, staging);
          pieceOps.push_back(pieceOp(st, k, staging));
        }
        r = runHost(pieceOps);
        if (r == chorusSuccess)
          for (const OpStage& st : stages) hostCopyPiece(st, k, false, staging);
      } else {
        for (const OpStage& st : stages) st.op.comm->flight->finish(st.frIds[k], r);
      }
      // Always: the stream's wait for this piece must end, success or not.
      __atomic_store_n(b->flagHost, firstTicket + k, __ATOMIC_RELEASE);
    }
    bool reusable = true;
    if (doneRecorded && !rt.eventSynchronize(doneEvent, &err)) reusable = false;
    {
      std::lock_guard<std::mutex> lk(b->mutex);
      if (reusable && doneRecorded) block->inUse = false;  // else kept until the stream dies
      for (void* ev : inEvents) b->freeEvents.push_back(ev);
      b->freeEvents.push_back(doneEvent);
    }
    for (const OpStage& st : stages)
      st.op.comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
    return r;
  };
  // Pushed under b->mutex: the worker must run jobs in ticket order.
  chorusResult_t pushed = streamPush(s, std::move(job));
  lock.unlock();
  if (pushed != chorusSuccess) {
    // Only when the stream is being destroyed while this call enqueues (a user error): no
    // job will raise the flag, so raise it here rather than leave the stream waiting.
    __atomic_store_n(b->flagHost, firstTicket + npieces - 1, __ATOMIC_RELEASE);
    for (const OpStage& st : stages)
      st.op.comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
    return pushed;
  }
  if (!setupError.empty())
    CHORUS_FAIL(chorusSystemError, "device buffers: enqueueing on CUDA stream %p failed: %s",
                b->cudaStream, setupError.c_str());
  return chorusSuccess;
}

}  // namespace cuda
}  // namespace chorus
