// shm/pair_cells.h — the shared-memory transport's pair cells (transports/pair_cells.h) for
// a communicator of two ranks: cell c sits at the end of rank c's segment (layout.h), after
// the line where rank c says which exchange it last posted.
#pragma once

#include <vector>

#include "transports/pair_cells.h"
#include "transports/shm/layout.h"

namespace chorus {
namespace shm {

class ShmPairCells final : public PairCells {
 public:
  /// bases[r]: rank r's segment as mapped here; pids[r]: its process. Not ready (no cells)
  /// unless there are exactly two ranks and the geometry has a cell.
  void init(const AreaGeometry& geo, int rank, const std::vector<char*>& bases,
            const std::vector<int>& pids);
  bool ready() const { return ready_; }

  size_t cellBytes() const override { return geo_.pairCell; }
  uint64_t nextExchange() override { return ++exchange_; }
  char* own(uint64_t x) override { return cells_[(x + static_cast<uint64_t>(rank_)) & 1]; }
  void post(uint64_t x) override;
  chorusResult_t waitPeer(uint64_t x, const char** cell, const WaitCtx& w) override;
  int peer() const override { return 1 - rank_; }

 private:
  AreaGeometry geo_{};
  bool ready_ = false;
  int rank_ = 0;
  uint64_t exchange_ = 0;
  char* cells_[2] = {nullptr, nullptr};
  BoardLine* posted_[2] = {nullptr, nullptr};  // by rank
  Doorbell* bells_[2] = {nullptr, nullptr};    // by rank
  int peerPid_ = 0;
};

}  // namespace shm
}  // namespace chorus
