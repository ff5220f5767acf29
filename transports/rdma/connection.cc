#include "rdma/connection.h"

#include <algorithm>
#include <cstring>

#include "core/checks.h"
#include "core/debug.h"
#include "rdma/proxy.h"

namespace chorus {
namespace rdma {

// ---------------------------------------------------------------------------------------
// Send

chorusResult_t RdmaSendConn::acquire(void** slot, const WaitCtx& w) {
  const uint64_t depth = static_cast<uint64_t>(c_->sendRing.depth);
  if (head_ - freeCache_ >= depth) {
    // Credit exhaustion (the peer has not freed the slot) or the previous write from this
    // staging slot is still in flight: wait for the progress thread to say otherwise.
    Channel* c = c_;
    const uint64_t want = head_ - depth + 1;
    chorusResult_t r = waitUntil(
        [c, want, this] {
          freeCache_ = c->sendFree.load(std::memory_order_acquire);
          return freeCache_ >= want || !c->healthy();
        },
        w, c->bell);
    if (r != chorusSuccess) return r;
  }
  // Nothing posted to a broken queue pair arrives: stop the caller now.
  if (!c_->healthy()) return c_->raise(w.what);
  *slot = c_->sendRing.slot(head_);
  return chorusSuccess;
}

void* RdmaSendConn::tryAcquire() {
  const uint64_t depth = static_cast<uint64_t>(c_->sendRing.depth);
  if (head_ - freeCache_ >= depth) {
    freeCache_ = c_->sendFree.load(std::memory_order_acquire);
    if (head_ - freeCache_ >= depth) return nullptr;
  }
  // No error channel here: a broken connection looks like a full FIFO, and the caller's
  // deadline reports it.
  if (!c_->healthy()) return nullptr;
  return c_->sendRing.slot(head_);
}

void RdmaSendConn::publish(size_t bytes, uint8_t flags) {
  const size_t i = c_->sendRing.index(head_);
  c_->sendRing.sizes[i] = static_cast<uint32_t>(bytes);
  c_->sendRing.flags[i] = flags;
  ++head_;
  c_->sendHead.store(head_, std::memory_order_release);
  c_->proxy->kick(c_);
}

chorusResult_t RdmaSendConn::sendLL(const void* data, size_t bytes, const WaitCtx& w) {
  size_t off = 0;
  do {
    void* slot;
    CHORUS_CHECK(acquire(&slot, w));
    const size_t n = std::min(c_->sendRing.slotBytes, bytes - off);
    if (n) std::memcpy(slot, static_cast<const char*>(data) + off, n);
    publish(n, kMsgLL);
    off += n;
  } while (off < bytes);
  return chorusSuccess;
}

// ---------------------------------------------------------------------------------------
// Receive

chorusResult_t RdmaRecvConn::next(const WaitCtx& w) {
  if (headCache_ > tail_) return chorusSuccess;
  Channel* c = c_;
  chorusResult_t r = waitUntil(
      [c, this] {
        headCache_ = c->recvHead.load(std::memory_order_acquire);
        return headCache_ > tail_ || !c->healthy();
      },
      w, c->bell);
  if (r != chorusSuccess) return r;
  // Messages that arrived whole before a failure are still delivered.
  if (headCache_ <= tail_) {
    headCache_ = c->recvHead.load(std::memory_order_acquire);
    if (headCache_ <= tail_) return c->raise(w.what);
  }
  return chorusSuccess;
}

chorusResult_t RdmaRecvConn::wrongKind(bool wantLL, const WaitCtx& w) const {
  return fail(chorusInvalidUsage, __FILE__, __LINE__,
              "%s sent a %s message where %s was expected during %s: the ranks' sequences of "
              "calls differ",
              c_->peerDesc.c_str(), wantLL ? "FIFO-slot" : "low-latency",
              wantLL ? "a low-latency one" : "a FIFO slot", w.what ? w.what : "a transfer");
}

chorusResult_t RdmaRecvConn::wait(const void** slot, size_t* bytes, const WaitCtx& w) {
  chorusResult_t r = next(w);
  if (r != chorusSuccess) return r;
  const size_t i = c_->recvRing.index(tail_);
  if (c_->recvRing.flags[i] & kMsgLL) return wrongKind(false, w);
  *slot = c_->recvRing.slot(tail_);
  *bytes = c_->recvRing.sizes[i];
  return chorusSuccess;
}

bool RdmaRecvConn::test(const void** slot, size_t* bytes) {
  if (headCache_ <= tail_) {
    headCache_ = c_->recvHead.load(std::memory_order_acquire);
    if (headCache_ <= tail_) return false;
  }
  const size_t i = c_->recvRing.index(tail_);
  if (c_->recvRing.flags[i] & kMsgLL) {
    if (!warnedKind_) {
      CHORUS_WARN(kLogNet, "%s sent a low-latency message where a FIFO slot was expected: the "
                  "ranks' sequences of calls differ", c_->peerDesc.c_str());
      warnedKind_ = true;
    }
    return false;
  }
  *slot = c_->recvRing.slot(tail_);
  *bytes = c_->recvRing.sizes[i];
  return true;
}

void RdmaRecvConn::release() {
  ++tail_;
  c_->recvReleased.store(tail_, std::memory_order_release);
  c_->proxy->kick(c_);  // the progress thread returns the slot to the peer as a credit
}

chorusResult_t RdmaRecvConn::takeLL(void* dst, size_t bytes, const WaitCtx& w) {
  size_t off = 0;
  do {
    chorusResult_t r = next(w);
    if (r != chorusSuccess) return r;
    const size_t i = c_->recvRing.index(tail_);
    if (!(c_->recvRing.flags[i] & kMsgLL)) return wrongKind(true, w);
    const size_t want = std::min(c_->recvRing.slotBytes, bytes - off);
    if (c_->recvRing.sizes[i] != want)
      return fail(chorusInvalidUsage, __FILE__, __LINE__,
                  "%s sent a %u-byte low-latency message (piece) where %zu bytes were expected "
                  "during %s: the ranks called different collectives, counts or types",
                  c_->peerDesc.c_str(), c_->recvRing.sizes[i], want,
                  w.what ? w.what : "a transfer");
    if (want) std::memcpy(static_cast<char*>(dst) + off, c_->recvRing.slot(tail_), want);
    release();
    off += want;
  } while (off < bytes);
  return chorusSuccess;
}

chorusResult_t RdmaRecvConn::recvLL(void* dst, size_t bytes, const WaitCtx& w) {
  return takeLL(dst, bytes, w);
}

chorusResult_t RdmaRecvConn::waitLL(const void** data, size_t bytes, const WaitCtx& w) {
  if (llCopy_.size() < bytes || llCopy_.empty()) llCopy_.resize(std::max<size_t>(bytes, 64));
  chorusResult_t r = takeLL(llCopy_.data(), bytes, w);
  if (r != chorusSuccess) return r;
  *data = llCopy_.data();
  return chorusSuccess;
}

}  // namespace rdma
}  // namespace chorus
