// tcp/transport.h — ranks on different hosts (or any ranks, with CHORUS_SHM_DISABLE=1)
// talk over TCP sockets.
//
// Each rank listens on one socket (interface chosen like the bootstrap's, by
// CHORUS_SOCKET_IFNAME, passed in as TcpOptions::ifname) and publishes its address with a
// random token. For every peer it opens CHORUS_NSOCKS sockets to the peer's listener — its
// send direction — and the peer's sockets to it arrive through its own listener as its
// receive direction. One exception: the higher rank of a pair sends messages that fit one
// TCP segment on the lower rank's socket 0 (the pair lane, CHORUS_TCP_PAIR_LANE), so small
// messages of both directions share a socket and their ACKs ride on data. Opening never
// waits for the peer (the kernel completes connections into the listen backlog) and
// accepting happens on the progress thread, so the per-peer connect order of init can not
// deadlock. Large messages are striped over the sockets (see wire.h).
//
// Slots live in local memory on both sides; the progress thread (proxy.h) moves them. A
// slot is at least the communicator's slot size (CHORUS_CHUNKSIZE), because algorithms
// cut their pieces to that and a piece never spans slots.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "src/net/socket.h"
#include "transports/tcp/channel.h"
#include "transports/tcp/proxy.h"
#include "transports/transport.h"  // the interface; a bare "transport.h" is tcp/transport.h

namespace chorus {
namespace tcp {

/// The transport's settings (TransportContext::tcp; see transports/transport.h).
using Options = TcpOptions;

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(const Options& o) : opt_(o) {}
  /// Stops the progress thread (after flushing posted slots unless wakeAll() was called,
  /// which means abort) and closes every socket. Handles to this transport's connections
  /// must be gone by then.
  ~TcpTransport() override;
  const char* name() const override { return "tcp"; }
  /// TCP reaches everyone: it is the fallback after the transports listed before it.
  bool canConnect(const PeerInfo&, const PeerInfo&) const override { return true; }
  chorusResult_t setup(const TransportContext& ctx, void* info) override;
  chorusResult_t connect(const TransportContext& ctx, int peer, const void* peerInfo,
                         std::unique_ptr<SendConn>* send, std::unique_ptr<RecvConn>* recv) override;
  /// Waits (up to the timeout) for every peer's sockets, then closes the listener.
  void finishSetup() override;
  void wakeAll() override;

  /// The listener address published in `info` (for tests and diagnostics).
  static bool infoAddress(const void* info, SockAddr* out);
  /// Pair lanes this rank sends on (one per lower-ranked peer once set up; for tests).
  int pairLanes() const { return pairLanes_; }

 private:
  Options opt_;
  int rank_ = -1;
  size_t slotBytes_ = 0;
  int depth_ = 0;
  size_t llMax_ = 0;
  std::atomic<bool> aborted_{false};
  std::vector<std::unique_ptr<SendChannel>> send_;  // by peer rank
  std::vector<std::unique_ptr<RecvChannel>> recv_;
  /// finishSetup, on the higher rank of each pair: small messages to the lower rank go on
  /// the lower rank's socket 0 (TcpOptions::pairLane).
  void openPairLanes();
  int pairLanes_ = 0;
  /// Faults a ring's pages in at connect while this transport's rings come to at most
  /// kPopulateMaxBytes, as the shm transport caps its segments (8 MiB per peer by default:
  /// the rings of the first 8 peers; a larger job's later rings fault on first touch).
  static constexpr size_t kPopulateMaxBytes = size_t{64} << 20;
  size_t populated_ = 0;
  void populateRing(SlotRing* ring) {
    if (populated_ + ring->bytes() > kPopulateMaxBytes) return;
    populated_ += ring->bytes();
    ring->populate();
  }
  std::unique_ptr<Proxy> proxy_;  // declared last: stopped first (see the destructor)
};

/// The registry's entry: a TcpTransport with ctx.tcp.
std::unique_ptr<Transport> createTcpTransport(const TransportContext& ctx);

}  // namespace tcp
}  // namespace chorus
