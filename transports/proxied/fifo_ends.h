// proxied/fifo_ends.h — the application's ends of a slot FIFO that a progress thread
// drives (tcp: sockets, rdma: queue pairs).
//
// Thin handles over a channel owned by the transport (the progress thread may still touch
// a channel after the communicator dropped its handles, so the handles own nothing). There
// is no separate low-latency channel: LL messages travel through the same slot FIFO,
// flagged, so they can never overtake or be overtaken by slot messages. A receiver copies
// an LL message out and frees its slot at once, so holding one (waitLL .. releaseLL) never
// keeps a slot from the sender.
//
// What differs between the transports is which counters the two threads share and how the
// progress thread is woken; a Side policy names them:
//
//   struct SendSide {                      struct RecvSide {
//     using Channel = ...;                   using Channel = ...;
//     static Ring& ring(Channel*);           static Ring& ring(Channel*);
//     static uint64_t freed(Channel*);       static uint64_t arrived(Channel*);   // acquire
//     static void posted(Channel*, u64);     static void released(Channel*, u64);
//     static bool sendsFromUser(Channel*);   };
//     static void abandon(Channel*, const char* what, chorusResult_t why);
//   };
//
// sendsFromUser: the channel reads a message posted with postFrom from the caller's memory
// (Ring::data), not its slot; abandon: fail the channel so that it reads none of it again.
//
// Ring: slotBytes, depth, index(seq), slot(seq), sizes[], flags[]. Channel derives from
// proxied::ChannelHealth. posted/released publish the new count and wake the progress
// thread as the transport needs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"
#include "transports/proxied/channel_health.h"
#include "transports/transport.h"

namespace chorus {
namespace proxied {

constexpr uint8_t kMsgLL = 1;  // the slot carries (part of) a low-latency message

template <class Side>
class SendEnd final : public SendConn {
 public:
  using Channel = typename Side::Channel;
  SendEnd(Channel* c, size_t llMax) : c_(c), llMax_(llMax) {}
  size_t slotBytes() const override { return Side::ring(c_).slotBytes; }
  /// An LL message takes one slot per slotBytes piece: an empty FIFO holds depth of them.
  size_t llBufferedBytes() const override {
    return Side::ring(c_).slotBytes * static_cast<size_t>(Side::ring(c_).depth);
  }

  chorusResult_t acquire(void** slot, const WaitCtx& w) override {
    const uint64_t depth = static_cast<uint64_t>(Side::ring(c_).depth);
    if (head_ - freedCache_ >= depth) {
      chorusResult_t r = waitFreed(head_ - depth + 1, w);
      if (r != chorusSuccess) return r;
    }
    // Nothing posted to a dead peer can arrive: stop the caller now rather than at its
    // next wait for the peer's answer.
    if (!c_->healthy()) return c_->raise(w.what);
    *slot = Side::ring(c_).slot(head_);
    return chorusSuccess;
  }

  void* tryAcquire() override {
    const uint64_t depth = static_cast<uint64_t>(Side::ring(c_).depth);
    if (head_ - freedCache_ >= depth) {
      freedCache_ = Side::freed(c_);
      if (head_ - freedCache_ >= depth) return nullptr;
    }
    // No error channel here: a dead peer looks like a full FIFO; check() tells.
    if (!c_->healthy()) return nullptr;
    return Side::ring(c_).slot(head_);
  }

  void post(size_t bytes) override { publish(bytes, 0); }

  bool sendsFromUser() const override { return Side::sendsFromUser(c_); }
  void postFrom(const void* src, size_t bytes, void* slot) override {
    if (!Side::sendsFromUser(c_)) {
      std::memcpy(slot, src, bytes);
      publish(bytes, 0);
      return;
    }
    publish(bytes, 0, static_cast<const char*>(src));
  }
  /// Everything posted is in the transport's hands (tcp: the kernel's) once freed.
  chorusResult_t flush(const WaitCtx& w) override {
    if (freedCache_ >= head_) return chorusSuccess;
    chorusResult_t r = waitFreed(head_, w);
    if (r != chorusSuccess) return r;
    return freedCache_ >= head_ ? chorusSuccess : c_->raise(w.what);
  }
  /// The Side looks, under its own lock, whether anything is still unsent.
  void abandon(const char* what, chorusResult_t why) override { Side::abandon(c_, what, why); }
  size_t llMaxBytes() const override { return llMax_; }

  chorusResult_t sendLL(const void* data, size_t bytes, const WaitCtx& w) override {
    // A message larger than a slot (an LL threshold above the slot size) goes in pieces;
    // the receiver knows `bytes` too.
    size_t off = 0;
    do {
      void* slot = nullptr;
      CHORUS_CHECK(acquire(&slot, w));
      const size_t n = std::min(Side::ring(c_).slotBytes, bytes - off);
      if (n) std::memcpy(slot, static_cast<const char*>(data) + off, n);
      publish(n, kMsgLL);
      off += n;
    } while (off < bytes);
    return chorusSuccess;
  }

  chorusResult_t check(const char* what) override {
    return c_->healthy() ? chorusSuccess : c_->raise(what);
  }

 private:
  /// Waits until `want` messages are freed or the channel fails (freedCache_ says which).
  chorusResult_t waitFreed(uint64_t want, const WaitCtx& w) {
    Channel* c = c_;
    return waitUntil(
        [c, want, this] {
          freedCache_ = Side::freed(c);
          return freedCache_ >= want || !c->healthy();
        },
        w, c->bell);
  }

  void publish(size_t bytes, uint8_t flags, const char* from = nullptr) {
    auto& ring = Side::ring(c_);
    const size_t i = ring.index(head_);
    ring.sizes[i] = static_cast<uint32_t>(bytes);
    ring.flags[i] = flags;
    ring.refs[i] = from;
    ++head_;
    Side::posted(c_, head_);
  }

  Channel* c_;
  size_t llMax_;
  uint64_t head_ = 0;        // posted (our copy)
  uint64_t freedCache_ = 0;  // last Side::freed seen
};

template <class Side>
class RecvEnd final : public RecvConn {
 public:
  using Channel = typename Side::Channel;
  RecvEnd(Channel* c, size_t llMax) : c_(c), llMax_(llMax) {}
  size_t slotBytes() const override { return Side::ring(c_).slotBytes; }

  chorusResult_t wait(const void** slot, size_t* bytes, const WaitCtx& w) override {
    chorusResult_t r = next(w);
    if (r != chorusSuccess) return r;
    auto& ring = Side::ring(c_);
    const size_t i = ring.index(tail_);
    if (ring.flags[i] & kMsgLL) return wrongKind(false, w);
    *slot = ring.slot(tail_);
    *bytes = ring.sizes[i];
    return chorusSuccess;
  }

  bool test(const void** slot, size_t* bytes) override {
    if (arrivedCache_ <= tail_) {
      arrivedCache_ = Side::arrived(c_);
      if (arrivedCache_ <= tail_) return false;
    }
    auto& ring = Side::ring(c_);
    const size_t i = ring.index(tail_);
    if (ring.flags[i] & kMsgLL) {
      // test() cannot return an error; leave the message where it is so the caller's
      // deadline names the stuck operation, and say why once.
      if (!warnedKind_) {
        CHORUS_WARN(kLogNet,
                    "%s sent a low-latency message where a FIFO slot was expected: "
                    "the ranks' sequences of calls differ",
                    c_->peerDesc.c_str());
        warnedKind_ = true;
      }
      return false;
    }
    *slot = ring.slot(tail_);
    *bytes = ring.sizes[i];
    return true;
  }

  void release() override {
    ++tail_;
    Side::released(c_, tail_);
  }

  size_t llMaxBytes() const override { return llMax_; }
  chorusResult_t recvLL(void* dst, size_t bytes, const WaitCtx& w) override {
    return takeLL(dst, bytes, w);
  }
  chorusResult_t waitLL(const void** data, size_t bytes, const WaitCtx& w) override {
    // Copied out so the slot goes back at once: a caller holding this message while it
    // waits for the next one on the same connection can never starve the FIFO.
    if (llCopy_.size() < bytes || llCopy_.empty()) llCopy_.resize(std::max<size_t>(bytes, 64));
    chorusResult_t r = takeLL(llCopy_.data(), bytes, w);
    if (r != chorusSuccess) return r;
    *data = llCopy_.data();
    return chorusSuccess;
  }
  void releaseLL() override {}

  /// Called after test() found nothing: what arrived before a failure is delivered first.
  chorusResult_t check(const char* what) override {
    return c_->healthy() ? chorusSuccess : c_->raise(what);
  }

 private:
  /// Waits for the next message, whatever its kind.
  chorusResult_t next(const WaitCtx& w) {
    if (arrivedCache_ > tail_) return chorusSuccess;
    Channel* c = c_;
    chorusResult_t r = waitUntil(
        [c, this] {
          arrivedCache_ = Side::arrived(c);
          return arrivedCache_ > tail_ || !c->healthy();
        },
        w, c->bell);
    if (r != chorusSuccess) return r;
    // Messages that arrived whole before a failure are still delivered.
    if (arrivedCache_ <= tail_) {
      arrivedCache_ = Side::arrived(c);
      if (arrivedCache_ <= tail_) return c->raise(w.what);
    }
    return chorusSuccess;
  }

  /// Receives an LL message of `bytes` into dst, piece by piece.
  chorusResult_t takeLL(void* dst, size_t bytes, const WaitCtx& w) {
    size_t off = 0;
    do {
      chorusResult_t r = next(w);
      if (r != chorusSuccess) return r;
      auto& ring = Side::ring(c_);
      const size_t i = ring.index(tail_);
      if (!(ring.flags[i] & kMsgLL)) return wrongKind(true, w);
      const size_t want = std::min(ring.slotBytes, bytes - off);
      if (ring.sizes[i] != want)
        return fail(chorusInvalidUsage, __FILE__, __LINE__,
                    "%s sent a %u-byte low-latency message (piece) where %zu bytes were "
                    "expected during %s: the ranks called different collectives, counts or types",
                    c_->peerDesc.c_str(), ring.sizes[i], want, w.what ? w.what : "a transfer");
      if (want) std::memcpy(static_cast<char*>(dst) + off, ring.slot(tail_), want);
      release();
      off += want;
    } while (off < bytes);
    return chorusSuccess;
  }

  chorusResult_t wrongKind(bool wantLL, const WaitCtx& w) const {
    return fail(chorusInvalidUsage, __FILE__, __LINE__,
                "%s sent a %s message where %s was expected during %s: the ranks' sequences "
                "of calls differ",
                c_->peerDesc.c_str(), wantLL ? "FIFO-slot" : "low-latency",
                wantLL ? "a low-latency one" : "a FIFO slot", w.what ? w.what : "a transfer");
  }

  Channel* c_;
  size_t llMax_;
  uint64_t tail_ = 0;          // released (our copy)
  uint64_t arrivedCache_ = 0;  // last Side::arrived seen
  std::vector<char> llCopy_;
  bool warnedKind_ = false;
};

}  // namespace proxied
}  // namespace chorus
