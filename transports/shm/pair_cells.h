// shm/pair_cells.h — the shared-memory transport's pair cells (transports/pair_cells.h) for
// one pair of ranks of a host: rank r and its partner r ^ 2^k (two ranks: k = 0, the peer).
// The pair's cell c sits in pair area k at the end of the segment of the pair's c-th rank
// (c = 0 the lower rank; layout.h), after the line where that rank says which exchange it
// last posted on the pair.
#pragma once

#include <vector>

#include "transports/pair_cells.h"
#include "transports/shm/layout.h"

namespace chorus {
namespace shm {

class ShmPairCells final : public PairCells {
 public:
  /// bases[r]: rank r's segment as mapped here (every rank of the communicator); pids[r]:
  /// its process. The cells of pair area k, shared with rank ^ 2^k. Not ready (no cells)
  /// unless the geometry has area k and both segments are mapped.
  void init(const AreaGeometry& geo, int rank, int k, const std::vector<char*>& bases,
            const std::vector<int>& pids);
  bool ready() const { return ready_; }

  size_t cellBytes() const override { return geo_.pairCell; }
  uint64_t nextExchange() override { return ++exchange_; }
  char* own(uint64_t x) override { return cells_[(x + static_cast<uint64_t>(side_)) & 1]; }
  void post(uint64_t x) override;
  chorusResult_t waitPeer(uint64_t x, const char** cell, const WaitCtx& w) override;
  int peer() const override { return peer_; }

 private:
  AreaGeometry geo_{};
  bool ready_ = false;
  int side_ = 0;  // 0: this rank is the pair's lower rank
  int peer_ = 0;
  uint64_t exchange_ = 0;
  char* cells_[2] = {nullptr, nullptr};
  BoardLine* posted_[2] = {nullptr, nullptr};  // by side
  Doorbell* bells_[2] = {nullptr, nullptr};    // by side
  int peerPid_ = 0;
};

}  // namespace shm
}  // namespace chorus
