// connection.h — the two ends of a shared-memory connection.
#pragma once

#include "transports/shm/layout.h"
#include "transports/shm/transport.h"

namespace chorus {
namespace shm {

/// Where one connection lives: its area in the receiver's segment, and the doorbells of
/// both ends (the sender sleeps on its own bell when the FIFO is full, the receiver on its
/// own when it is empty; each rings the other's after making progress).
struct ConnView {
  ConnCtrl* ctrl;
  char* ll;     // the LL buffers, long then short (AreaGeometry::llLongOffset/llShortOffset)
  char* slots;  // depth slots of slotBytes
  AreaGeometry geo;
  Doorbell* localBell;
  Doorbell* remoteBell;
  int peerPid;  // the other end's process (same host): waits notice when it dies
  int peerRank;
  /// Ring remoteBell without a fence (ringDoorbellLight): this process takes part in
  /// asymmetric fences and the peer's sleepers issue the heavy one (its bell says so).
  bool lightRing = false;
};

/// Wakes the peer after a publish (its doorbell), with or without a fence (lightRing).
inline void ringPeer(const ConnView& v) {
  if (v.lightRing)
    ringDoorbellLight(v.remoteBell);
  else
    ringDoorbell(v.remoteBell);
}

/// chorusRemoteError naming the peer once its process is gone (ConnView::peerPid).
chorusResult_t peerCheck(const ConnView& v, const char* what);

class ShmSendConn final : public SendConn {
 public:
  explicit ShmSendConn(const ConnView& v) : v_(v) {}
  size_t slotBytes() const override { return v_.geo.slotBytes; }
  chorusResult_t acquire(void** slot, const WaitCtx& w) override;
  void* tryAcquire() override;
  void post(size_t bytes) override;
  size_t llMaxBytes() const override { return v_.geo.llMax; }
  chorusResult_t sendLL(const void* data, size_t bytes, const WaitCtx& w) override;
  chorusResult_t check(const char* what) override { return peerCheck(v_, what); }

 private:
  ConnView v_;
  uint64_t head_ = 0;       // slots posted (our copy)
  uint64_t tailCache_ = 0;  // last tail seen
  uint64_t llSeq_ = 0;
  uint64_t llAckCache_ = 0;
};

class ShmRecvConn final : public RecvConn {
 public:
  explicit ShmRecvConn(const ConnView& v) : v_(v) {}
  size_t slotBytes() const override { return v_.geo.slotBytes; }
  chorusResult_t wait(const void** slot, size_t* bytes, const WaitCtx& w) override;
  bool test(const void** slot, size_t* bytes) override;
  void release() override;
  size_t llMaxBytes() const override { return v_.geo.llMax; }
  chorusResult_t recvLL(void* dst, size_t bytes, const WaitCtx& w) override;
  chorusResult_t waitLL(const void** data, size_t bytes, const WaitCtx& w) override;
  void releaseLL() override;
  chorusResult_t check(const char* what) override { return peerCheck(v_, what); }

 private:
  /// Waits until message `seq` of `bytes` has arrived (every line of a short one carries
  /// its flag, or the one flag of a long one; layout.h); *at: its buffer.
  chorusResult_t awaitLL(uint64_t seq, size_t bytes, char** at, const WaitCtx& w);

  ConnView v_;
  uint64_t tail_ = 0;  // slots released (our copy)
  uint64_t headCache_ = 0;
  uint64_t llSeq_ = 0;
  alignas(64) char staging_[kLlLineMax];  // a multi-line short LL message, contiguous (waitLL)
};

}  // namespace shm
}  // namespace chorus
