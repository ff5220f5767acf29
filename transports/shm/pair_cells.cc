#include "transports/shm/pair_cells.h"

namespace chorus {
namespace shm {

void ShmPairCells::init(const AreaGeometry& geo, int rank, const std::vector<char*>& bases,
                        const std::vector<int>& pids) {
  geo_ = geo;
  rank_ = rank;
  ready_ = false;
  if (geo.pairCell == 0 || bases.size() != 2 || bases[0] == nullptr || bases[1] == nullptr) return;
  for (int r = 0; r < 2; ++r) {
    char* seg = bases[static_cast<size_t>(r)];
    char* area = seg + geo.pairOffset(2);
    posted_[r] = reinterpret_cast<BoardLine*>(area);
    cells_[r] = area + kPage;
    bells_[r] = &reinterpret_cast<SegmentHeader*>(seg)->bell;
  }
  peerPid_ = pids.size() == 2 ? pids[static_cast<size_t>(1 - rank)] : 0;
  ready_ = true;
}

void ShmPairCells::post(uint64_t x) {
  posted_[rank_]->epoch.store(x, std::memory_order_release);
  ringDoorbell(bells_[1 - rank_]);
}

chorusResult_t ShmPairCells::waitPeer(uint64_t x, const char** cell, const WaitCtx& w) {
  chorusResult_t r =
      waitLinePosted(*posted_[1 - rank_], x, w, bells_[rank_], peerPid_, bells_[1 - rank_]);
  if (r != chorusSuccess) return r;
  *cell = cells_[(x + static_cast<uint64_t>(1 - rank_)) & 1];
  return chorusSuccess;
}

}  // namespace shm
}  // namespace chorus
