// peer_exchange.h — the transports' PeerExchange (transports/transport.h) over a
// communicator's Bootstrap: tagged point-to-point messages during connect. It lives in
// src/comm, which sees both layers, so the bootstrap never includes the transports.
#pragma once

#include <cstddef>

#include "chorus.h"
#include "src/bootstrap/bootstrap.h"
#include "transports/transport.h"

namespace chorus {

class BootstrapPeerExchange final : public PeerExchange {
 public:
  explicit BootstrapPeerExchange(Bootstrap* b) : b_(b) {}
  chorusResult_t send(int peer, int tag, const void* data, size_t bytes) override {
    return b_->send(peer, tag, data, bytes);
  }
  chorusResult_t recv(int peer, int tag, void* data, size_t bytes) override {
    return b_->recv(peer, tag, data, bytes);
  }

 private:
  Bootstrap* const b_;
};

}  // namespace chorus
