// shm/board.h — the shared-memory transport's boards (transports/board.h): each rank's
// board sits at the end of its own segment (layout.h), which every same-host peer maps.
#pragma once

#include <vector>

#include "transports/board.h"
#include "transports/shm/layout.h"

namespace chorus {
namespace shm {

class ShmBoard final : public SharedBoard {
 public:
  /// One rank's view of every board: bases[r] is rank r's segment as mapped here (all
  /// ranks), pids[r] its process.
  void init(const AreaGeometry& geo, int rank, int nranks, const std::vector<char*>& bases,
            const std::vector<int>& pids);
  bool ready() const { return !boards_.empty(); }

  size_t bufferBytes() const override { return geo_.boardBuffer; }
  uint64_t nextEpoch() override { return ++epoch_; }
  char* own(uint64_t epoch) override { return buffer(rank_, epoch); }
  void post(uint64_t epoch) override;
  chorusResult_t waitPosted(int rank, uint64_t epoch, const char** buf, const WaitCtx& w) override;
  const Doorbell* bellOf(int rank) const override {
    return boards_[static_cast<size_t>(rank)].bell;
  }
  chorusResult_t waitAnyPosted(const int* ranks, int count, uint64_t epoch, int* which,
                               const char** buf, const WaitCtx& w) override;

 private:
  struct Board {
    BoardLine* posted;  // the owner's last posted epoch
    char* buffers;      // two, stride_ apart
    Doorbell* bell;     // its owner's doorbell (segment header)
    int pid;
  };
  char* buffer(int rank, uint64_t epoch) const {
    return boards_[static_cast<size_t>(rank)].buffers + (epoch & 1) * stride_;
  }

  AreaGeometry geo_{};
  int rank_ = 0, nranks_ = 0;
  size_t stride_ = 0;
  uint64_t epoch_ = 0;
  std::vector<Board> boards_;  // by rank
};

}  // namespace shm
}  // namespace chorus
