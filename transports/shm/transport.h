// shm/transport.h — ranks of one host talk through POSIX shared memory.
//
// Each rank creates one segment (see layout.h) for everything written to it, publishes its
// name, maps every local peer's segment, and unlinks its own name as soon as all peers
// have mapped it, so nothing is left in /dev/shm even if the job dies later.
#pragma once

#include <string>
#include <vector>

#include "transports/shm/board.h"
#include "transports/shm/layout.h"
#include "transports/shm/pair_cells.h"
#include "transports/shm/peer_access.h"
#include "transports/transport.h"

namespace chorus {
namespace shm {

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(const ShmOptions& o) : opt_(o) {}
  ~ShmTransport() override;
  const char* name() const override { return "shm"; }
  /// Same host, unless CHORUS_SHM_DISABLE=1 sends those ranks over the next transport.
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override;
  chorusResult_t setup(const TransportContext& ctx, void* info) override;
  chorusResult_t connect(const TransportContext& ctx, int peer, const void* peerInfo,
                         std::unique_ptr<SendConn>* send, std::unique_ptr<RecvConn>* recv) override;
  void finishSetup() override;
  void wakeAll() override;
  bool sharesMemory() const override { return true; }
  PeerAccess* peerAccess() override { return &access_; }
  SharedBoard* sharedBoard() override { return board_.ready() ? &board_ : nullptr; }
  PairCells* pairCells(int peer) override;

 private:
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
  };
  chorusResult_t mapPeer(int peer, const void* peerInfo, size_t expectBytes);

  ShmOptions opt_;
  AreaGeometry geo_{};
  std::string ownName_;
  Mapping own_;
  std::vector<Mapping> peers_;  // by rank
  size_t sameHost_ = 1;         // ranks on this host (segments this rank maps), at setup
  bool unlinked_ = false;
  ShmPeerAccess access_;             // CMA and registered-region mappings (single copy)
  ShmBoard board_;                   // set by finishSetup where every rank's segment is mapped here
  std::vector<ShmPairCells> pairs_;  // likewise, by k: the cells with rank ^ 2^k (layout.h)
  int rank_ = 0;
  std::vector<int> pids_;  // by rank
};

/// The registry's entry: a ShmTransport with ctx.shm.
std::unique_ptr<Transport> createShmTransport(const TransportContext& ctx);

}  // namespace shm
}  // namespace chorus
