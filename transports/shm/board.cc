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
    boards_.push_back(Board{reinterpret_cast<BoardLine*>(b), b + geo.boardCtrlBytes(nranks),
                            &reinterpret_cast<SegmentHeader*>(seg)->bell,
                            pids[static_cast<size_t>(r)]});
  }
}

chorusResult_t ShmBoard::beginWrite(uint64_t epoch, const WaitCtx& w, int* waitedFor) {
  if (epoch <= 2) return chorusSuccess;
  const Board& mine = boards_[static_cast<size_t>(rank_)];
  const uint64_t want = epoch - 2;
  for (int k = 1; k < nranks_; ++k) {
    const int r = (rank_ + k) % nranks_;
    std::atomic<uint64_t>& read = mine.lines[1 + r].epoch;
    const Board& peer = boards_[static_cast<size_t>(r)];
    chorusResult_t res =
        waitUntil([&read, want] { return read.load(std::memory_order_acquire) >= want; }, w,
                  mine.bell, peer.pid, peer.bell);
    if (res != chorusSuccess) {
      *waitedFor = r;
      return res;
    }
  }
  return chorusSuccess;
}

void ShmBoard::post(uint64_t epoch) {
  boards_[static_cast<size_t>(rank_)].lines[0].epoch.store(epoch, std::memory_order_release);
  for (int k = 1; k < nranks_; ++k)
    ringDoorbell(boards_[static_cast<size_t>((rank_ + k) % nranks_)].bell);
}

chorusResult_t ShmBoard::waitPosted(int rank, uint64_t epoch, const char** buf, const WaitCtx& w) {
  const Board& owner = boards_[static_cast<size_t>(rank)];
  std::atomic<uint64_t>& posted = owner.lines[0].epoch;
  chorusResult_t res =
      waitUntil([&posted, epoch] { return posted.load(std::memory_order_acquire) >= epoch; }, w,
                boards_[static_cast<size_t>(rank_)].bell, owner.pid, owner.bell);
  if (res != chorusSuccess) return res;
  *buf = buffer(rank, epoch);
  return chorusSuccess;
}

void ShmBoard::done(int rank, uint64_t epoch) {
  const Board& owner = boards_[static_cast<size_t>(rank)];
  owner.lines[1 + rank_].epoch.store(epoch, std::memory_order_release);
  ringDoorbell(owner.bell);
}

}  // namespace shm
}  // namespace chorus
