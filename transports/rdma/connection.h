// rdma/connection.h — the application's ends of an RDMA connection.
//
// Thin handles over a channel owned by the transport (the progress thread may still touch
// a channel after the communicator dropped its handles). Like tcp, there is no separate
// low-latency channel: LL messages ride the slot FIFO with a flag in the immediate, so the
// two kinds keep their order; a receiver copies an LL message out and frees its slot at
// once.
#pragma once

#include <vector>

#include "rdma/channel.h"
#include "transports/transport.h"  // the interface; a bare "transport.h" is rdma/transport.h

namespace chorus {
namespace rdma {

class RdmaSendConn final : public SendConn {
 public:
  RdmaSendConn(Channel* c, size_t llMax) : c_(c), llMax_(llMax) {}
  size_t slotBytes() const override { return c_->sendRing.slotBytes; }
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

  Channel* c_;
  size_t llMax_;
  uint64_t head_ = 0;       // posted (our copy)
  uint64_t freeCache_ = 0;  // last sendFree seen
};

class RdmaRecvConn final : public RecvConn {
 public:
  RdmaRecvConn(Channel* c, size_t llMax) : c_(c), llMax_(llMax) {}
  size_t slotBytes() const override { return c_->recvRing.slotBytes; }
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
  chorusResult_t next(const WaitCtx& w);
  chorusResult_t takeLL(void* dst, size_t bytes, const WaitCtx& w);
  chorusResult_t wrongKind(bool wantLL, const WaitCtx& w) const;

  Channel* c_;
  size_t llMax_;
  uint64_t tail_ = 0;       // released (our copy)
  uint64_t headCache_ = 0;  // last recvHead seen
  std::vector<char> llCopy_;
  bool warnedKind_ = false;
};

}  // namespace rdma
}  // namespace chorus
