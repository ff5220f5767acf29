#include "transports/shm/pair_cells.h"

#include "src/core/asym_fence.h"

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
  // As the FIFO's posts (connection.h, lightRing): no fence where the peer's sleepers fence
  // for us (asym_fence.h), so a post leaves its cell's stores draining while this rank goes
  // on (its own block's copy, the next piece).
  lightRing_ =
      asymFenceReady() && bells_[1 - rank]->asymmetric.load(std::memory_order_relaxed) != 0;
  peerPid_ = pids.size() == 2 ? pids[static_cast<size_t>(1 - rank)] : 0;
  ready_ = true;
}

uint64_t ShmPairCells::nextExchange(PairRole role) {
  const uint64_t x = ++exchange_;
  // own(x) was last read by the peer at x - 2 at the latest (pair_cells.h): done once it
  // posted x - 1, or x - 2 where x - 2 was one-way (posted after the reading).
  bool& slot = swapAt_[x & 1];  // exchange x - 2's
  freeAt_ = x < 3 ? 0 : (slot ? x - 1 : x - 2);
  slot = role == PairRole::Swap;
  return x;
}

chorusResult_t ShmPairCells::waitOwnFree(uint64_t x, const WaitCtx& w) {
  (void)x;  // the latest exchange's, freeAt_
  if (__builtin_expect(peerSeen_ >= freeAt_, 1)) return chorusSuccess;
  std::atomic<uint64_t>& posted = posted_[1 - rank_]->epoch;
  const uint64_t need = freeAt_;
  uint64_t seen = 0;
  chorusResult_t r = waitUntil(
      [&posted, &seen, need] {
        seen = posted.load(std::memory_order_acquire);
        return seen >= need;
      },
      w, bells_[rank_], peerPid_, bells_[1 - rank_]);
  if (r == chorusSuccess) peerSeen_ = seen;
  return r;
}

void ShmPairCells::post(uint64_t x) {
  posted_[rank_]->epoch.store(x, std::memory_order_release);
  if (lightRing_)
    ringDoorbellLight(bells_[1 - rank_]);
  else
    ringDoorbell(bells_[1 - rank_]);
}

chorusResult_t ShmPairCells::waitPeer(uint64_t x, const char** cell, const WaitCtx& w) {
  std::atomic<uint64_t>& posted = posted_[1 - rank_]->epoch;
  uint64_t seen = 0;
  chorusResult_t r = waitUntil(
      [&posted, &seen, x] {
        seen = posted.load(std::memory_order_acquire);
        return seen >= x;
      },
      w, bells_[rank_], peerPid_, bells_[1 - rank_]);
  if (r != chorusSuccess) return r;
  peerSeen_ = seen;
  *cell = cells_[(x + static_cast<uint64_t>(1 - rank_)) & 1];
  return chorusSuccess;
}

}  // namespace shm
}  // namespace chorus
