// tcp/connection.h — the application's ends of a TCP connection.
//
// Thin handles over a channel owned by the transport (the progress thread may still touch
// a channel after the communicator dropped its handles, so the handles own nothing). TCP
// has no separate low-latency channel: LL messages travel through the same slot FIFO,
// flagged, so they can never overtake or be overtaken by slot messages. A receiver copies
// an LL message out and frees its slot at once, so holding one (waitLL .. releaseLL) never
// keeps a slot from the sender.
#pragma once

#include <vector>

#include "tcp/channel.h"
#include "transports/transport.h"  // the interface; a bare "transport.h" is tcp/transport.h

namespace chorus {
namespace tcp {

class TcpSendConn final : public SendConn {
 public:
  TcpSendConn(SendChannel* c, size_t llMax) : c_(c), llMax_(llMax) {}
  size_t slotBytes() const override { return c_->ring.slotBytes; }
  chorusResult_t acquire(void** slot, const WaitCtx& w) override;
  void* tryAcquire() override;
  void post(size_t bytes) override { publish(bytes, 0); }
  size_t llMaxBytes() const override { return llMax_; }
  chorusResult_t sendLL(const void* data, size_t bytes, const WaitCtx& w) override;
  chorusResult_t check(const char* what) override {
    return c_->healthy() ? chorusSuccess : c_->raise(what);
  }

 private:
  void publish(size_t bytes, uint8_t flags);

  SendChannel* c_;
  size_t llMax_;
  uint64_t head_ = 0;       // posted (our copy)
  uint64_t tailCache_ = 0;  // last tail seen
};

class TcpRecvConn final : public RecvConn {
 public:
  TcpRecvConn(RecvChannel* c, size_t llMax) : c_(c), llMax_(llMax) {}
  size_t slotBytes() const override { return c_->ring.slotBytes; }
  chorusResult_t wait(const void** slot, size_t* bytes, const WaitCtx& w) override;
  bool test(const void** slot, size_t* bytes) override;
  void release() override;
  size_t llMaxBytes() const override { return llMax_; }
  chorusResult_t recvLL(void* dst, size_t bytes, const WaitCtx& w) override;
  chorusResult_t waitLL(const void** data, size_t bytes, const WaitCtx& w) override;
  void releaseLL() override {}
  chorusResult_t check(const char* what) override {
    return c_->healthy() ? chorusSuccess : c_->raise(what);
  }

 private:
  /// Waits for the next message, whatever its kind.
  chorusResult_t next(const WaitCtx& w);
  /// Receives an LL message of `bytes` into dst, piece by piece.
  chorusResult_t takeLL(void* dst, size_t bytes, const WaitCtx& w);
  chorusResult_t wrongKind(bool wantLL, const WaitCtx& w) const;

  RecvChannel* c_;
  size_t llMax_;
  uint64_t tail_ = 0;       // released (our copy)
  uint64_t headCache_ = 0;  // last head seen
  std::vector<char> llCopy_;
  bool warnedKind_ = false;
};

}  // namespace tcp
}  // namespace chorus
