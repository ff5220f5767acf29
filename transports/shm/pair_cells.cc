#include "transports/shm/pair_cells.h"

namespace chorus {
namespace shm {

void ShmPairCells::init(const AreaGeometry& geo, int rank, int k, const std::vector<char*>& bases,
                        const std::vector<int>& pids) {
  geo_ = geo;
  ready_ = false;
  exchange_ = 0;
  const int n = static_cast<int>(bases.size());
  const int peer = rank ^ (1 << k);
  if (geo.pairCell == 0 || k < 0 || k >= geo.pairs || rank < 0 || rank >= n || peer >= n) return;
  const int lowHigh[2] = {rank < peer ? rank : peer, rank < peer ? peer : rank};
  for (int c = 0; c < 2; ++c) {
    char* seg = bases[static_cast<size_t>(lowHigh[c])];
    if (seg == nullptr) return;
    char* area = seg + geo.pairOffset(n, k);
    posted_[c] = reinterpret_cast<BoardLine*>(area);
    cells_[c] = area + kPage;
    bells_[c] = &reinterpret_cast<SegmentHeader*>(seg)->bell;
  }
  side_ = rank < peer ? 0 : 1;
  peer_ = peer;
  peerPid_ = static_cast<size_t>(peer) < pids.size() ? pids[static_cast<size_t>(peer)] : 0;
  ready_ = true;
}

void ShmPairCells::post(uint64_t x) {
  posted_[side_]->epoch.store(x, std::memory_order_release);
  ringDoorbell(bells_[1 - side_]);
}

chorusResult_t ShmPairCells::waitPeer(uint64_t x, const char** cell, const WaitCtx& w) {
  chorusResult_t r =
      waitLinePosted(*posted_[1 - side_], x, w, bells_[side_], peerPid_, bells_[1 - side_]);
  if (r != chorusSuccess) return r;
  *cell = cells_[(x + static_cast<uint64_t>(1 - side_)) & 1];
  return chorusSuccess;
}

}  // namespace shm
}  // namespace chorus
