#include "transports/shm/connection.h"

#include <cstring>

#include "src/core/checks.h"

namespace chorus {
namespace shm {

chorusResult_t peerCheck(const ConnView& v, const char* what) {
  if (v.peerPid <= 0 || !processGone(v.peerPid)) return chorusSuccess;
  return fail(chorusRemoteError, __FILE__, __LINE__,
              "rank %d (pid %d, same host) is gone: its process exited or was killed during %s",
              v.peerRank, v.peerPid, what ? what : "a transfer");
}

namespace {

inline std::atomic<uint64_t>* llFlag(char* buf, size_t bytes) {
  return reinterpret_cast<std::atomic<uint64_t>*>(buf + llFlagOffset(bytes));
}

}  // namespace

chorusResult_t ShmSendConn::acquire(void** slot, const WaitCtx& w) {
  const uint64_t depth = static_cast<uint64_t>(v_.geo.depth);
  if (head_ - tailCache_ >= depth) {
    ConnCtrl* c = v_.ctrl;
    uint64_t want = head_ - depth + 1;
    chorusResult_t r = waitUntil(
        [c, want, this] {
          tailCache_ = c->tail.tail.load(std::memory_order_acquire);
          return tailCache_ >= want;
        },
        w, v_.localBell, v_.peerPid, v_.remoteBell);
    if (r != chorusSuccess) return r;
  }
  *slot = v_.slots + (head_ % depth) * v_.geo.slotBytes;
  return chorusSuccess;
}

void* ShmSendConn::tryAcquire() {
  const uint64_t depth = static_cast<uint64_t>(v_.geo.depth);
  if (head_ - tailCache_ >= depth) {
    tailCache_ = v_.ctrl->tail.tail.load(std::memory_order_acquire);
    if (head_ - tailCache_ >= depth) return nullptr;
  }
  return v_.slots + (head_ % depth) * v_.geo.slotBytes;
}

void ShmSendConn::post(size_t bytes) {
  const uint64_t depth = static_cast<uint64_t>(v_.geo.depth);
  __atomic_store_n(&v_.ctrl->head.sizes[head_ % depth], static_cast<uint32_t>(bytes),
                   __ATOMIC_RELAXED);
  ++head_;
  v_.ctrl->head.head.store(head_, std::memory_order_release);
  ringDoorbell(v_.remoteBell);
}

chorusResult_t ShmSendConn::sendLL(const void* data, size_t bytes, const WaitCtx& w) {
  const uint64_t seq = ++llSeq_;
  // The buffer we are about to write was last used by seq - kLlDepth: the receiver must
  // have consumed it.
  if (seq > static_cast<uint64_t>(kLlDepth) && llAckCache_ < seq - kLlDepth) {
    ConnCtrl* c = v_.ctrl;
    uint64_t want = seq - kLlDepth;
    chorusResult_t r = waitUntil(
        [c, want, this] {
          llAckCache_ = c->llAck.consumed.load(std::memory_order_acquire);
          return llAckCache_ >= want;
        },
        w, v_.localBell, v_.peerPid, v_.remoteBell);
    if (r != chorusSuccess) return r;
  }
  char* buf = v_.ll + (seq % kLlDepth) * v_.geo.llStride();
  if (bytes) std::memcpy(buf, data, bytes);
  llFlag(buf, bytes)->store(llFlagValue(seq), std::memory_order_release);
  ringDoorbell(v_.remoteBell);
  return chorusSuccess;
}

chorusResult_t ShmRecvConn::wait(const void** slot, size_t* bytes, const WaitCtx& w) {
  if (headCache_ <= tail_) {
    ConnCtrl* c = v_.ctrl;
    chorusResult_t r = waitUntil(
        [c, this] {
          headCache_ = c->head.head.load(std::memory_order_acquire);
          return headCache_ > tail_;
        },
        w, v_.localBell, v_.peerPid, v_.remoteBell);
    if (r != chorusSuccess) return r;
  }
  const uint64_t i = tail_ % static_cast<uint64_t>(v_.geo.depth);
  *slot = v_.slots + i * v_.geo.slotBytes;
  *bytes = __atomic_load_n(&v_.ctrl->head.sizes[i], __ATOMIC_RELAXED);
  return chorusSuccess;
}

bool ShmRecvConn::test(const void** slot, size_t* bytes) {
  if (headCache_ <= tail_) {
    headCache_ = v_.ctrl->head.head.load(std::memory_order_acquire);
    if (headCache_ <= tail_) return false;
  }
  const uint64_t i = tail_ % static_cast<uint64_t>(v_.geo.depth);
  *slot = v_.slots + i * v_.geo.slotBytes;
  *bytes = __atomic_load_n(&v_.ctrl->head.sizes[i], __ATOMIC_RELAXED);
  return true;
}

void ShmRecvConn::release() {
  ++tail_;
  v_.ctrl->tail.tail.store(tail_, std::memory_order_release);
  ringDoorbell(v_.remoteBell);
}

chorusResult_t ShmRecvConn::waitLL(const void** data, size_t bytes, const WaitCtx& w) {
  const uint64_t seq = llSeq_ + 1;
  char* buf = v_.ll + (seq % kLlDepth) * v_.geo.llStride();
  std::atomic<uint64_t>* flag = llFlag(buf, bytes);
  const uint64_t want = llFlagValue(seq);
  if (flag->load(std::memory_order_acquire) != want) {
    chorusResult_t r =
        waitUntil([flag, want] { return flag->load(std::memory_order_acquire) == want; }, w,
                  v_.localBell, v_.peerPid, v_.remoteBell);
    if (r != chorusSuccess) return r;
  }
  *data = buf;
  return chorusSuccess;
}

void ShmRecvConn::releaseLL() {
  ++llSeq_;
  v_.ctrl->llAck.consumed.store(llSeq_, std::memory_order_release);
  ringDoorbell(v_.remoteBell);
}

chorusResult_t ShmRecvConn::recvLL(void* dst, size_t bytes, const WaitCtx& w) {
  const void* data;
  chorusResult_t r = waitLL(&data, bytes, w);
  if (r != chorusSuccess) return r;
  if (bytes) std::memcpy(dst, data, bytes);
  releaseLL();
  return chorusSuccess;
}

}  // namespace shm
}  // namespace chorus
