#include "src/algorithms/primitives.h"

#include <algorithm>
#include <cstring>

#include "src/algorithms/algorithms.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"

namespace chorus {

using kernels::kApplyPost;
using kernels::kApplyPre;
using kernels::kStreaming;

Prims::Prims(chorusComm* comm, const kernels::ReduceSpec& spec, const char* what, uint64_t seq,
             bool streaming)
    : comm_(comm),
      spec_(spec),
      elem_(kernels::typeSize(spec.type)),
      seq_(seq),
      streaming_(streaming) {
  w_.deadlineNs = -comm->timeoutNs;  // from when a wait goes slow: no clock read per call
  w_.abortFlag = &comm->abortFlag;
  w_.linkFailure = &comm->linkFailure;
  w_.spin = comm->tuning.spin;
  w_.policy = &comm->waitPolicy;
  w_.what = what;
}

chorusResult_t Prims::failed(chorusResult_t r, const char* doing, int peer) {
  if (r == chorusTimeout)
    return fail(r, __FILE__, __LINE__,
                "%s #%llu on rank %d timed out after %llds %s rank %d "
                "(is rank %d alive and in the same collective?)",
                w_.what, static_cast<unsigned long long>(seq_), comm_->rank,
                static_cast<long long>(comm_->timeoutNs / 1000000000ll), doing, peer, peer);
  if (r == chorusAborted)
    return fail(r, __FILE__, __LINE__, "%s #%llu on rank %d: communicator aborted", w_.what,
                static_cast<unsigned long long>(seq_), comm_->rank);
  // A transport that knows more (a closed socket's address) has said it already; shm only
  // knows that the peer's process is gone. The last error is cleared on API entry.
  if (r == chorusRemoteError)
    return fail(r, __FILE__, __LINE__, "%s #%llu on rank %d failed %s rank %d: %s", w_.what,
                static_cast<unsigned long long>(seq_), comm_->rank, doing, peer,
                *threadLastError() ? threadLastError() : "its process exited");
  return r;
}

chorusResult_t Prims::waitIn(int from, size_t bytes, const void** slot) {
  waitNote_->store(from << 1, std::memory_order_relaxed);
  size_t got = 0;
  chorusResult_t r = comm_->recvConn[static_cast<size_t>(from)]->wait(slot, &got, w_);
  if (__builtin_expect(r != chorusSuccess, 0)) return failed(r, "waiting for data from", from);
  if (__builtin_expect(got != bytes, 0))
    return fail(chorusInvalidUsage, __FILE__, __LINE__,
                "%s #%llu on rank %d: rank %d sent a %zu-byte piece where %zu were "
                "expected: the ranks called different collectives, counts or types",
                w_.what, static_cast<unsigned long long>(seq_), comm_->rank, from, got, bytes);
  return chorusSuccess;
}

chorusResult_t Prims::acquireOut(int to, void** slot) {
  waitNote_->store((to << 1) | 1, std::memory_order_relaxed);
  chorusResult_t r = comm_->sendConn[static_cast<size_t>(to)]->acquire(slot, w_);
  if (__builtin_expect(r != chorusSuccess, 0)) return failed(r, "waiting for buffer space at", to);
  return chorusSuccess;
}

void Prims::postFrom(int to, const void* src, size_t bytes, void* slot) {
  if (std::find(fromUserPeers_.begin(), fromUserPeers_.end(), to) == fromUserPeers_.end())
    fromUserPeers_.push_back(to);
  comm_->sendConn[static_cast<size_t>(to)]->postFrom(src, bytes, slot);
}

chorusResult_t Prims::settleSends(chorusResult_t r) {
  for (int to : fromUserPeers_) {
    SendConn& c = *comm_->sendConn[static_cast<size_t>(to)];
    if (r == chorusSuccess) {
      const chorusResult_t f = c.flush(w_);
      if (f == chorusSuccess) continue;
      r = failed(f, "sending its last pieces to", to);
    }
    c.abandon(w_.what, r);
  }
  fromUserPeers_.clear();
  return r;
}

chorusResult_t Prims::send(int to, const void* src, size_t count, bool pre) {
  void* out;
  CHORUS_CHECK(acquireOut(to, &out));
  const size_t bytes = count * elem_;
  if (pre && spec_.preMul) {
    kernels::reduce(spec_, out, nullptr, src, count,
                    kApplyPre | (slotStreaming_ ? kStreaming : 0u));
  } else if (fromUser(to)) {
    postFrom(to, src, bytes, out);
    return chorusSuccess;
  } else {
    slotCopy(out, src, bytes);
  }
  comm_->sendConn[static_cast<size_t>(to)]->post(bytes);
  return chorusSuccess;
}

chorusResult_t Prims::recv(int from, void* dst, size_t count) {
  const void* in;
  const size_t bytes = count * elem_;
  CHORUS_CHECK(waitIn(from, bytes, &in));
  kernels::copy(dst, in, bytes, streaming_);
  comm_->recvConn[static_cast<size_t>(from)]->release();
  return chorusSuccess;
}

chorusResult_t Prims::recvReduceSend(int from, int to, const void* local, size_t count, bool pre) {
  const void* in;
  void* out;
  const size_t bytes = count * elem_;
  CHORUS_CHECK(waitIn(from, bytes, &in));
  CHORUS_CHECK(acquireOut(to, &out));
  kernels::reduce(spec_, out, in, local, count, pre ? kApplyPre : 0u);
  comm_->sendConn[static_cast<size_t>(to)]->post(bytes);
  comm_->recvConn[static_cast<size_t>(from)]->release();
  return chorusSuccess;
}

chorusResult_t Prims::recvReduceCopy(int from, const void* local, void* dst, size_t count,
                                     bool post, bool pre) {
  const void* in;
  CHORUS_CHECK(waitIn(from, count * elem_, &in));
  unsigned flags =
      (pre ? kApplyPre : 0u) | (post ? kApplyPost : 0u) | (streaming_ ? kStreaming : 0u);
  kernels::reduce(spec_, dst, in, local, count, flags);
  comm_->recvConn[static_cast<size_t>(from)]->release();
  return chorusSuccess;
}

chorusResult_t Prims::recvReduceCopyAfter(int from, const void* first, void* dst, size_t count) {
  const void* in;
  CHORUS_CHECK(waitIn(from, count * elem_, &in));
  kernels::reduce(spec_, dst, first, in, count, kApplyPost | (streaming_ ? kStreaming : 0u));
  comm_->recvConn[static_cast<size_t>(from)]->release();
  return chorusSuccess;
}

chorusResult_t Prims::recvReduceCopySend(int from, int to, const void* local, void* dst,
                                         size_t count, bool post) {
  const void* in;
  void* out;
  const size_t bytes = count * elem_;
  CHORUS_CHECK(waitIn(from, bytes, &in));
  CHORUS_CHECK(acquireOut(to, &out));
  const unsigned flags = kApplyPre | (post ? kApplyPost : 0u);
  if (fromUser(to)) {
    // The result once, into the user's buffer (ordinary stores: the socket's copy reads it
    // next, from cache), and the socket reads it there.
    kernels::reduce(spec_, dst, in, local, count, flags);
    comm_->recvConn[static_cast<size_t>(from)]->release();
    postFrom(to, dst, bytes, out);
    return chorusSuccess;
  }
  if (slotStreaming_) {
    // The slot goes to memory with streaming stores (the peer is far away: it reads memory
    // faster than it takes lines from our cache); the result to the user's buffer first,
    // with ordinary stores, so the slot's copy reads it from L1/L2, and then the slot.
    kernels::reduce(spec_, dst, in, local, count, flags);
    comm_->recvConn[static_cast<size_t>(from)]->release();
    kernels::copy(out, dst, bytes, true);
    comm_->sendConn[static_cast<size_t>(to)]->post(bytes);
    return chorusSuccess;
  }
  if (streaming_) {
    // Large output: reduce into the outgoing slot, publish it, then stream the slot (still
    // in cache) to the user's buffer in one long run (reduceCopy in host_reduce.cc: short
    // bursts of streaming stores between the reads cost more than the second read saves).
    kernels::reduce(spec_, out, in, local, count, flags);
    comm_->recvConn[static_cast<size_t>(from)]->release();
    comm_->sendConn[static_cast<size_t>(to)]->post(bytes);
    kernels::copy(dst, out, bytes, true);
    return chorusSuccess;
  }
  // One pass: the result goes to the outgoing slot and to the user's buffer, block by block
  // while the block is in L1 (writing the whole slot first and copying it out afterwards
  // read every byte of the slot a second time; docs/PERF.md#perf-fused-reduce-copy).
  kernels::reduceCopy(spec_, out, dst, in, local, count, flags);
  comm_->recvConn[static_cast<size_t>(from)]->release();
  comm_->sendConn[static_cast<size_t>(to)]->post(bytes);
  return chorusSuccess;
}

chorusResult_t Prims::recvCopySend(int from, int to, void* dst, size_t count) {
  const void* in;
  void* out;
  const size_t bytes = count * elem_;
  CHORUS_CHECK(waitIn(from, bytes, &in));
  CHORUS_CHECK(acquireOut(to, &out));
  if (dst && fromUser(to)) {
    // One copy, into the user's buffer; the socket sends it from there.
    kernels::copy(dst, in, bytes, false);
    comm_->recvConn[static_cast<size_t>(from)]->release();
    postFrom(to, dst, bytes, out);
    return chorusSuccess;
  }
  // Forward first, then copy out: the next rank works on the piece while we copy it (fusing
  // both copies into one pass, as recvReduceCopySend does, held the piece back until both
  // were written: broadcast np 2 at 256 KiB took 18.7 us against 5.8; docs/PERF.md).
  slotCopy(out, in, bytes);
  comm_->sendConn[static_cast<size_t>(to)]->post(bytes);
  if (dst) kernels::copy(dst, in, bytes, streaming_);
  comm_->recvConn[static_cast<size_t>(from)]->release();
  return chorusSuccess;
}

chorusResult_t Prims::copySend(int to, const void* src, void* dst, size_t count) {
  void* out;
  const size_t bytes = count * elem_;
  CHORUS_CHECK(acquireOut(to, &out));
  if (fromUser(to)) {
    postFrom(to, src, bytes, out);
  } else {
    slotCopy(out, src, bytes);  // send first, then our own copy (see recvCopySend)
    comm_->sendConn[static_cast<size_t>(to)]->post(bytes);
  }
  if (dst && dst != src) kernels::copy(dst, src, bytes, streaming_);
  return chorusSuccess;
}

chorusResult_t Prims::sendMany(const int* to, int nto, const void* src, size_t count) {
  for (int i = 0; i < nto; ++i) CHORUS_CHECK(send(to[i], src, count, false));
  return chorusSuccess;
}

chorusResult_t Prims::recvCopySendMany(int from, const int* to, int nto, void* dst, size_t count) {
  const void* in;
  const size_t bytes = count * elem_;
  CHORUS_CHECK(waitIn(from, bytes, &in));
  // Where every child's connection sends from the user's memory: one copy, into dst.
  bool copied = false;
  if (dst && nto > 0 && fromUser(to[0])) {
    kernels::copy(dst, in, bytes, false);
    copied = true;
  }
  for (int i = 0; i < nto; ++i) {
    void* out;
    CHORUS_CHECK(acquireOut(to[i], &out));
    if (copied && fromUser(to[i])) {
      postFrom(to[i], dst, bytes, out);
      continue;
    }
    std::memcpy(out, in, bytes);
    comm_->sendConn[static_cast<size_t>(to[i])]->post(bytes);
  }
  if (dst && !copied) kernels::copy(dst, in, bytes, streaming_);
  comm_->recvConn[static_cast<size_t>(from)]->release();
  return chorusSuccess;
}

chorusResult_t Prims::sendLL(int to, const void* src, size_t bytes) {
  waitNote_->store((to << 1) | 1, std::memory_order_relaxed);
  chorusResult_t r = comm_->sendConn[static_cast<size_t>(to)]->sendLL(src, bytes, w_);
  if (__builtin_expect(r != chorusSuccess, 0)) return failed(r, "waiting for LL space at", to);
  return chorusSuccess;
}

chorusResult_t Prims::recvLL(int from, void* dst, size_t bytes) {
  waitNote_->store(from << 1, std::memory_order_relaxed);
  chorusResult_t r = comm_->recvConn[static_cast<size_t>(from)]->recvLL(dst, bytes, w_);
  if (__builtin_expect(r != chorusSuccess, 0)) return failed(r, "waiting for LL data from", from);
  return chorusSuccess;
}

chorusResult_t Prims::waitLL(int from, const void** data, size_t bytes) {
  waitNote_->store(from << 1, std::memory_order_relaxed);
  chorusResult_t r = comm_->recvConn[static_cast<size_t>(from)]->waitLL(data, bytes, w_);
  if (__builtin_expect(r != chorusSuccess, 0)) return failed(r, "waiting for LL data from", from);
  return chorusSuccess;
}

chorusResult_t runWithSlotStores(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p,
                                 SlotStoreUse use, size_t bytes, bool inPlace, FifoSteps steps) {
  if (!comm->peerMem.allShm) return steps(comm, a, plan, p);
  SlotStoreChooser& ch = comm->slotStores[use];
  if (!ch.fixed() && slotStoresUntimed(use, comm->nranks, bytes)) {
    p.setSlotStreaming(false);
    return steps(comm, a, plan, p);
  }
  const SlotStores way = ch.choose(bytes, inPlace);
  p.setSlotStreaming(way == SlotStores::Streaming);
  const int64_t t0 = nowNs();
  const chorusResult_t r = steps(comm, a, plan, p);
  if (r != chorusSuccess) return r;
  if (ch.record(bytes, inPlace, way, static_cast<double>(nowNs() - t0)) &&
      comm->slotStoreLogs < 32) {
    ++comm->slotStoreLogs;
    const SlotStores now = ch.choose(bytes, inPlace);
    CHORUS_INFO(kLogTuning,
                "rank %d: %s of %zu B%s: slot stores now %s (recent calls %.1f us temporal, "
                "%.1f us streaming; CHORUS_SLOT_STORES=auto)%s",
                comm->rank, collName(a.coll), bytes, inPlace ? " in place" : "",
                slotStoresName(now), ch.ewmaNs(bytes, inPlace, SlotStores::Temporal) / 1e3,
                ch.ewmaNs(bytes, inPlace, SlotStores::Streaming) / 1e3,
                comm->slotStoreLogs == 32 ? "; no more of these lines" : "");
  }
  return r;
}

}  // namespace chorus
