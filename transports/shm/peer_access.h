// shm/peer_access.h — the shared-memory transport's direct reach into same-host peers'
// memory (the PeerAccess capability, transports/peer_access.h): CMA copies and mappings of
// peers' registered chorusMemAlloc regions.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transports/peer_access.h"
#include "transports/transport.h"

namespace chorus {
namespace shm {

class ShmPeerAccess final : public PeerAccess {
 public:
  ~ShmPeerAccess() override;
  /// Learns this rank and its peers' processes (at transport setup).
  void init(const TransportContext& ctx);
  chorusResult_t probeCma(const AllGather& allGather, bool wanted, bool timeCopy,
                          CmaProbe* out) override;
  chorusResult_t read(int peer, const BufRef& ref, size_t off, void* dst, size_t bytes,
                      bool streaming) override;
  chorusResult_t write(int peer, const BufRef& ref, size_t off, const void* src, size_t bytes,
                       bool streaming) override;
  chorusResult_t mapped(int peer, const BufRef& ref, size_t off, char** p) override;

 private:
  /// A peer's region mapped here.
  struct Mapping {
    int peer = -1;
    uint64_t regionId = 0;
    char* base = nullptr;
    size_t bytes = 0;
  };
  chorusResult_t mapRegion(int peer, const BufRef& ref, char** base);
  chorusResult_t cmaMove(int peer, uint64_t remoteAddr, void* local, size_t bytes, bool write);

  int rank_ = 0;
  uint64_t commHash_ = 0;
  std::vector<pid_t> pids_;    // by rank
  uint64_t cookie_ = 0;        // read by peers during the probe
  std::vector<Mapping> maps_;  // used by the thread running operations only
};

}  // namespace shm
}  // namespace chorus
