// rdma/transport.h — ranks on different hosts over InfiniBand or RoCE (libibverbs).
//
// Discovery happens when the transport is created (once per communicator): with
// CHORUS_IB_DISABLE=1, no device, or no usable port, it logs one INFO line saying so and
// that tcp is used, and canConnect() is false for every pair, so the registry's next
// entry (tcp) takes them. Otherwise setup() opens the chosen port (CHORUS_IB_HCA,
// CHORUS_IB_GID_INDEX) and starts the progress thread; connect() creates one RC queue
// pair per peer, registers the receive FIFO, swaps PairInfo (wire.h) with the peer
// through the context's PeerExchange and moves the queue pair to RTS. Every message is
// written straight into the peer's FIFO slot (see proxy.h); the peer's credits bound what
// is in flight.
//
// All verbs go through the Verbs interface (verbs.h): libchorus binds libibverbs; the
// tests bind the in-memory stand-in to run this same logic without hardware.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "transports/rdma/channel.h"
#include "transports/rdma/proxy.h"
#include "transports/rdma/verbs.h"
#include "transports/transport.h"  // the interface; a bare "transport.h" is rdma/transport.h

namespace chorus {
namespace rdma {

/// The transport's settings (TransportContext::rdma; see transports/transport.h).
using Options = RdmaOptions;

class RdmaTransport final : public Transport {
 public:
  RdmaTransport(std::unique_ptr<Verbs> verbs, const Options& o);
  /// Stops the progress thread (after draining unless wakeAll() was called), then
  /// destroys queue pairs, deregisters memory and closes the device.
  ~RdmaTransport() override;
  const char* name() const override { return "rdma"; }
  /// True for every pair when this rank has a usable port (shm, listed before, keeps
  /// same-host pairs). Ranks must agree: a peer without a device fails connect clearly.
  bool canConnect(const PeerInfo&, const PeerInfo&) const override { return usable_; }
  chorusResult_t setup(const TransportContext& ctx, void* info) override;
  chorusResult_t connect(const TransportContext& ctx, int peer, const void* peerInfo,
                         std::unique_ptr<SendConn>* send, std::unique_ptr<RecvConn>* recv) override;
  void finishSetup() override {}
  void wakeAll() override;

  /// For tests and logs: whether discovery found a usable port, and why not.
  bool usable() const { return usable_; }
  const std::string& whyNot() const { return whyNot_; }

 private:
  std::unique_ptr<Verbs> verbs_;
  Options opt_;
  QpTiming timing_;
  bool usable_ = false;
  std::string whyNot_;
  DeviceInfo dev_;
  PortInfo port_;
  bool useGrh_ = false;
  int gidIndex_ = 0;

  int rank_ = -1;
  size_t slotBytes_ = 0;
  int depth_ = 0;
  size_t llMax_ = 0;
  std::atomic<bool> aborted_{false};
  std::unique_ptr<VerbsContext> ctx_;
  std::vector<std::unique_ptr<Channel>> channels_;  // by peer rank
  std::unique_ptr<Proxy> proxy_;                    // stopped first (see the destructor)
};

/// The shipped entry: RdmaTransport over libibverbs (verbs_ibv.cc) with ctx.rdma.
std::unique_ptr<Transport> createRdmaTransport(const TransportContext& ctx);

}  // namespace rdma
}  // namespace chorus
