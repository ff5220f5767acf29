#include "connection.h"

#include <immintrin.h>

#include <cstring>

namespace chorus {
namespace shm {
namespace {

// Single 16-byte moves; see LlItem for why they must not be split.
inline void storeItem(LlItem* p, uint64_t data, uint64_t flag) {
  __m128i v = _mm_set_epi64x(static_cast<long long>(flag), static_cast<long long>(data));
  asm volatile("movdqa %1, %0" : "=m"(*p) : "x"(v) : "memory");
}

inline __m128i loadItem(const LlItem* p) {
  __m128i v;
  asm volatile("movdqa %1, %0" : "=x"(v) : "m"(*p) : "memory");
  return v;
}

inline uint64_t itemFlag(__m128i v) {
  return static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v)));
}
inline uint64_t itemData(__m128i v) { return static_cast<uint64_t>(_mm_cvtsi128_si64(v)); }

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
        w, v_.localBell);
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
        w, v_.localBell);
    if (r != chorusSuccess) return r;
  }
  LlItem* buf = v_.ll + (seq % kLlDepth) * v_.geo.llItems;
  const char* src = static_cast<const char*>(data);
  size_t full = bytes / 8;
  for (size_t i = 0; i < full; ++i) {
    uint64_t d;
    std::memcpy(&d, src + i * 8, 8);
    storeItem(buf + i, d, seq);
  }
  if (bytes % 8 || bytes == 0) {  // an empty message still carries its flag
    uint64_t d = 0;
    std::memcpy(&d, src + full * 8, bytes % 8);
    storeItem(buf + full, d, seq);
  }
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
        w, v_.localBell);
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

chorusResult_t ShmRecvConn::recvLL(void* dst, size_t bytes, const WaitCtx& w) {
  const uint64_t seq = ++llSeq_;
  const LlItem* buf = v_.ll + (seq % kLlDepth) * v_.geo.llItems;
  char* out = static_cast<char*>(dst);
  const size_t items = bytes == 0 ? 1 : (bytes + 7) / 8;
  for (size_t i = 0; i < items; ++i) {
    __m128i v = loadItem(buf + i);
    if (itemFlag(v) != seq) {
      const LlItem* p = buf + i;
      chorusResult_t r = waitUntil(
          [p, seq, &v] {
            v = loadItem(p);
            return itemFlag(v) == seq;
          },
          w, v_.localBell);
      if (r != chorusSuccess) return r;
    }
    uint64_t d = itemData(v);
    size_t n = (i + 1) * 8 <= bytes ? 8 : bytes - i * 8;
    if (bytes) std::memcpy(out + i * 8, &d, n);
  }
  v_.ctrl->llAck.consumed.store(seq, std::memory_order_release);
  ringDoorbell(v_.remoteBell);
  return chorusSuccess;
}

}  // namespace shm
}  // namespace chorus
