#include "transports/shm/board.h"

namespace chorus {
namespace shm {

void ShmBoard::init(const AreaGeometry& geo, int rank, int nranks, const std::vector<char*>& bases,
                    const std::vector<int>& pids) {
  geo_ = geo;
  rank_ = rank;
  nranks_ = nranks;
  stride_ = AreaGeometry::roundUp(geo.boardBuffer, kPage);
  boards_.clear();
  if (geo.boardBuffer == 0) return;
  for (int r = 0; r < nranks; ++r) {
    char* seg = bases[static_cast<size_t>(r)];
    if (seg == nullptr) {  // a rank this transport does not map: no boards at all
      boards_.clear();
      return;
    }
    char* b = seg + geo.boardOffset(nranks);
    boards_.push_back(Board{reinterpret_cast<BoardLine*>(b), b + geo.boardCtrlBytes(),
                            &reinterpret_cast<SegmentHeader*>(seg)->bell,
                            pids[static_cast<size_t>(r)]});
  }
}

void ShmBoard::post(uint64_t epoch) {
  boards_[static_cast<size_t>(rank_)].posted->epoch.store(epoch, std::memory_order_release);
  for (int k = 1; k < nranks_; ++k)
    ringDoorbell(boards_[static_cast<size_t>((rank_ + k) % nranks_)].bell);
}

chorusResult_t ShmBoard::waitPosted(int rank, uint64_t epoch, const char** buf, const WaitCtx& w) {
  const Board& owner = boards_[static_cast<size_t>(rank)];
  chorusResult_t res = waitLinePosted(
      *owner.posted, epoch, w, boards_[static_cast<size_t>(rank_)].bell, owner.pid, owner.bell);
  if (res != chorusSuccess) return res;
  *buf = buffer(rank, epoch);
  return chorusSuccess;
}

chorusResult_t ShmBoard::waitAnyPosted(const int* ranks, int count, uint64_t epoch, int* which,
                                       const char** buf, const WaitCtx& w) {
  int found = -1;
  auto anyPosted = [&] {
    for (int i = 0; i < count; ++i) {
      const Board& b = boards_[static_cast<size_t>(ranks[i])];
      if (b.posted->epoch.load(std::memory_order_acquire) >= epoch) {
        found = i;
        return true;
      }
    }
    return false;
  };
  const Board& first = boards_[static_cast<size_t>(ranks[0])];
  chorusResult_t res =
      waitUntil(anyPosted, w, boards_[static_cast<size_t>(rank_)].bell, first.pid, first.bell);
  if (res != chorusSuccess) return res;
  *which = found;
  *buf = buffer(ranks[found], epoch);
  return chorusSuccess;
}

}  // namespace shm
}  // namespace chorus
