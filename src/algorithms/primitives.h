// primitives.h — the steps every algorithm is built from.
//
// Each primitive moves at most one slot: it waits for the input slot from one peer and/or
// a free output slot to another, combines with the local input in a single pass, and
// publishes. Fusing receive + reduce + copy + send in one pass is what keeps the number of
// bytes touched per element near the minimum (see docs/ARCHITECTURE.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/comm/comm.h"
#include "kernels/host/host_reduce.h"
#include "transports/transport.h"

namespace chorus {

class Prims {
 public:
  /// `what` names the operation in timeout messages ("all_reduce #7").
  Prims(chorusComm* comm, const kernels::ReduceSpec& spec, const char* what, uint64_t seq,
        bool streaming);

  size_t elemSize() const { return elem_; }
  const kernels::ReduceSpec& spec() const { return spec_; }
  const WaitCtx& waitCtx() const { return w_; }

  /// Where to note the peer each step is about to wait on ((peer << 1) | 1 for buffer
  /// space at it, << 1 alone for data from it): the flight recorder's entry for this call.
  /// One relaxed store per step; read only by a dump.
  void noteWaitsIn(std::atomic<int32_t>* slot) { waitNote_ = slot; }

  /// Write the slots of send(), copySend(), recvCopySend() and recvReduceCopySend() with
  /// streaming stores, so the peer reads them from memory rather than from this core's
  /// cache (src/tuning/slot_stores.h: faster where the two cores are far apart; the ring
  /// all-reduce, the ring all-gather and all-to-all choose per call: runWithSlotStores).
  void setSlotStreaming(bool on) { slotStreaming_ = on; }
  bool slotStreaming() const { return slotStreaming_; }
  /// Write the caller's buffers (recv(), recvReduceCopy() and the other copies out of a
  /// slot) with streaming stores or not, from here on (the constructor's `streaming`).
  void setStreaming(bool on) { streaming_ = on; }

  /// Lets sends leave their bytes in the caller's memory where the connection can send
  /// from it (SendConn::postFrom: tcp): whoever allows it must call settleSends() before
  /// the call returns. The algorithms write no byte they sent before the call ends, except
  /// bytes whose replacement the peer computes from them (so the kernel has them already).
  void allowSendFromUser() { fromUserAllowed_ = true; }
  /// The end of a call that allowed sends from the caller's memory (`r`: how it went):
  /// waits until the connections hold none of it, or, after a failure, makes sure they
  /// never read it again (SendConn::abandon). Returns r, or the error that waiting met.
  chorusResult_t settleSends(chorusResult_t r);

  /// slot(to) = pre?(src)
  chorusResult_t send(int to, const void* src, size_t count, bool pre);
  /// dst = slot(from)
  chorusResult_t recv(int from, void* dst, size_t count);
  /// slot(to) = slot(from) OP pre?(local)
  chorusResult_t recvReduceSend(int from, int to, const void* local, size_t count, bool pre = true);
  /// dst = post?(slot(from) OP pre?(local))
  chorusResult_t recvReduceCopy(int from, const void* local, void* dst, size_t count, bool post,
                                bool pre = true);
  /// dst = post(first OP slot(from)): the slot's operand second (first is used as it is)
  chorusResult_t recvReduceCopyAfter(int from, const void* first, void* dst, size_t count);
  /// slot(to) = dst = post?(slot(from) OP pre(local))
  chorusResult_t recvReduceCopySend(int from, int to, const void* local, void* dst, size_t count,
                                    bool post);
  /// slot(to) = dst = slot(from); dst may be null (pure forwarding)
  chorusResult_t recvCopySend(int from, int to, void* dst, size_t count);
  /// slot(to) = src, and dst = src when dst is non-null and differs from src
  chorusResult_t copySend(int to, const void* src, void* dst, size_t count);
  /// Sends the same slot content to several peers (tree fan-out): slot(to_i) = src
  chorusResult_t sendMany(const int* to, int nto, const void* src, size_t count);
  /// slot(to_i) = dst = slot(from) for every i
  chorusResult_t recvCopySendMany(int from, const int* to, int nto, void* dst, size_t count);

  /// Low-latency path.
  chorusResult_t sendLL(int to, const void* src, size_t bytes);
  chorusResult_t recvLL(int from, void* dst, size_t bytes);
  /// The error a failed wait returns, with the message that names the call, this rank and
  /// the peer (`doing` "waiting for data from"); also for the waits of schedules that wait
  /// outside Prims on the same WaitCtx (the boards, board.cc).
  chorusResult_t failed(chorusResult_t r, const char* doing, int peer);

  /// Zero-copy receive: the message stays readable at *data until releaseLL(from).
  chorusResult_t waitLL(int from, const void** data, size_t bytes);
  void releaseLL(int from) { comm_->recvConn[static_cast<size_t>(from)]->releaseLL(); }

 private:
  chorusResult_t waitIn(int from, size_t bytes, const void** slot);
  chorusResult_t acquireOut(int to, void** slot);
  /// Whether a send to `to` may leave its bytes where they are (allowSendFromUser).
  bool fromUser(int to) const {
    return fromUserAllowed_ && comm_->sendConn[static_cast<size_t>(to)]->sendsFromUser();
  }
  /// Posts the acquired `slot` to `to` with its bytes read from `src` (fromUser(to)).
  void postFrom(int to, const void* src, size_t bytes, void* slot);
  /// A slot's bytes, written the way setSlotStreaming() said.
  void slotCopy(void* slot, const void* src, size_t bytes) const {
    if (slotStreaming_)
      kernels::copy(slot, src, bytes, true);
    else
      std::memcpy(slot, src, bytes);
  }

  chorusComm* comm_;
  kernels::ReduceSpec spec_;
  size_t elem_;
  WaitCtx w_;
  uint64_t seq_;
  bool streaming_;
  bool slotStreaming_ = false;
  bool fromUserAllowed_ = false;
  std::vector<int> fromUserPeers_;  // peers posted to with postFrom, to settle
  std::atomic<int32_t> ownNote_{-1};
  std::atomic<int32_t>* waitNote_ = &ownNote_;
};

}  // namespace chorus
