#include "tcp/connection.h"

#include <algorithm>
#include <cstring>

#include "core/checks.h"
#include "core/debug.h"
#include "tcp/proxy.h"

namespace chorus {
namespace tcp {

// ---------------------------------------------------------------------------------------
// Send

chorusResult_t TcpSendConn::acquire(void** slot, const WaitCtx& w) {
  const uint64_t depth = static_cast<uint64_t>(c_->ring.depth);
  if (head_ - tailCache_ >= depth) {
    SendChannel* c = c_;
    const uint64_t want = head_ - depth + 1;
    chorusResult_t r = waitUntil(
        [c, want, this] {
          tailCache_ = c->tail.load(std::memory_order_acquire);
          return tailCache_ >= want || !c->healthy();
        },
        w, c->bell);
    if (r != chorusSuccess) return r;
  }
  // Nothing we post to a dead peer can arrive: stop the caller now rather than at its
  // next wait for the peer's answer.
  if (!c_->healthy()) return c_->raise(w.what);
  *slot = c_->ring.slot(head_);
  return chorusSuccess;
}

void* TcpSendConn::tryAcquire() {
  const uint64_t depth = static_cast<uint64_t>(c_->ring.depth);
  if (head_ - tailCache_ >= depth) {
    tailCache_ = c_->tail.load(std::memory_order_acquire);
    if (head_ - tailCache_ >= depth) return nullptr;
  }
  // No error channel here: a dead peer looks like a full FIFO, and the caller's deadline
  // reports it.
  if (!c_->healthy()) return nullptr;
  return c_->ring.slot(head_);
}

void TcpSendConn::publish(size_t bytes, uint8_t flags) {
  const size_t i = c_->ring.index(head_);
  c_->ring.sizes[i] = static_cast<uint32_t>(bytes);
  c_->ring.flags[i] = flags;
  ++head_;
  c_->head.store(head_, std::memory_order_release);
  c_->proxy->kick(c_);
}

chorusResult_t TcpSendConn::sendLL(const void* data, size_t bytes, const WaitCtx& w) {
  // One FIFO for both kinds keeps their order. A message larger than a slot (an LL
  // threshold above the TCP slot size) goes in pieces; the receiver knows `bytes` too.
  size_t off = 0;
  do {
    void* slot;
    CHORUS_CHECK(acquire(&slot, w));
    const size_t n = std::min(c_->ring.slotBytes, bytes - off);
    if (n) std::memcpy(slot, static_cast<const char*>(data) + off, n);
    publish(n, kMsgLL);
    off += n;
  } while (off < bytes);
  return chorusSuccess;
}

// ---------------------------------------------------------------------------------------
// Receive

chorusResult_t TcpRecvConn::next(const WaitCtx& w) {
  if (headCache_ > tail_) return chorusSuccess;
  RecvChannel* c = c_;
  chorusResult_t r = waitUntil(
      [c, this] {
        headCache_ = c->head.load(std::memory_order_acquire);
        return headCache_ > tail_ || !c->healthy();
      },
      w, c->bell);
  if (r != chorusSuccess) return r;
  // Messages that arrived whole before a failure are still delivered.
  if (headCache_ <= tail_) {
    headCache_ = c->head.load(std::memory_order_acquire);
    if (headCache_ <= tail_) return c->raise(w.what);
  }
  return chorusSuccess;
}

chorusResult_t TcpRecvConn::wrongKind(bool wantLL, const WaitCtx& w) const {
  return fail(chorusInvalidUsage, __FILE__, __LINE__,
              "%s sent a %s message where %s was expected during %s: the ranks' sequences of "
              "calls differ",
              c_->peerDesc.c_str(), wantLL ? "FIFO-slot" : "low-latency",
              wantLL ? "a low-latency one" : "a FIFO slot", w.what ? w.what : "a transfer");
}

chorusResult_t TcpRecvConn::wait(const void** slot, size_t* bytes, const WaitCtx& w) {
  chorusResult_t r = next(w);
  if (r != chorusSuccess) return r;
  const size_t i = c_->ring.index(tail_);
  if (c_->ring.flags[i] & kMsgLL) return wrongKind(false, w);
  *slot = c_->ring.slot(tail_);
  *bytes = c_->ring.sizes[i];
  return chorusSuccess;
}

bool TcpRecvConn::test(const void** slot, size_t* bytes) {
  if (headCache_ <= tail_) {
    headCache_ = c_->head.load(std::memory_order_acquire);
    if (headCache_ <= tail_) return false;
  }
  const size_t i = c_->ring.index(tail_);
  if (c_->ring.flags[i] & kMsgLL) {
    // test() cannot return an error; leave the message where it is so the caller's
    // deadline names the stuck operation, and say why once.
    if (!warnedKind_) {
      CHORUS_WARN(kLogNet, "%s sent a low-latency message where a FIFO slot was expected: the "
                  "ranks' sequences of calls differ", c_->peerDesc.c_str());
      warnedKind_ = true;
    }
    return false;
  }
  *slot = c_->ring.slot(tail_);
  *bytes = c_->ring.sizes[i];
  return true;
}

void TcpRecvConn::release() {
  ++tail_;
  c_->released.store(tail_, std::memory_order_seq_cst);
  // The progress thread stopped reading for want of a free slot: this is the one.
  if (c_->stalled.load(std::memory_order_seq_cst)) {
    c_->stalled.store(false, std::memory_order_relaxed);
    c_->proxy->kick(c_);
  }
}

chorusResult_t TcpRecvConn::takeLL(void* dst, size_t bytes, const WaitCtx& w) {
  size_t off = 0;
  do {
    chorusResult_t r = next(w);
    if (r != chorusSuccess) return r;
    const size_t i = c_->ring.index(tail_);
    if (!(c_->ring.flags[i] & kMsgLL)) return wrongKind(true, w);
    const size_t want = std::min(c_->ring.slotBytes, bytes - off);
    if (c_->ring.sizes[i] != want)
      return fail(chorusInvalidUsage, __FILE__, __LINE__,
                  "%s sent a %u-byte low-latency message (piece) where %zu bytes were expected "
                  "during %s: the ranks called different collectives, counts or types",
                  c_->peerDesc.c_str(), c_->ring.sizes[i], want, w.what ? w.what : "a transfer");
    if (want) std::memcpy(static_cast<char*>(dst) + off, c_->ring.slot(tail_), want);
    release();
    off += want;
  } while (off < bytes);
  return chorusSuccess;
}

chorusResult_t TcpRecvConn::recvLL(void* dst, size_t bytes, const WaitCtx& w) {
  return takeLL(dst, bytes, w);
}

chorusResult_t TcpRecvConn::waitLL(const void** data, size_t bytes, const WaitCtx& w) {
  // Copied out so the slot goes back at once: a caller holding this message while it
  // waits for the next one on the same connection can never starve the FIFO.
  if (llCopy_.size() < bytes || llCopy_.empty()) llCopy_.resize(std::max<size_t>(bytes, 64));
  chorusResult_t r = takeLL(llCopy_.data(), bytes, w);
  if (r != chorusSuccess) return r;
  *data = llCopy_.data();
  return chorusSuccess;
}

}  // namespace tcp
}  // namespace chorus
