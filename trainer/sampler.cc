#include "trainer/sampler.h"

#include <numeric>
#include <stdexcept>

namespace trainer {
namespace {

// splitmix64: a tiny generator with a fixed definition, so every rank (and every build)
// makes the same permutation; std::shuffle's algorithm is implementation-defined.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by rejection, free of modulo bias.
  uint64_t below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
};

}  // namespace

DistributedSampler::DistributedSampler(int64_t datasetSize, int rank, int worldSize, bool shuffle,
                                       uint64_t seed)
    : size_(datasetSize), rank_(rank), world_(worldSize), shuffle_(shuffle), seed_(seed) {
  if (datasetSize <= 0) throw std::invalid_argument("sampler: empty dataset");
  if (worldSize <= 0 || rank < 0 || rank >= worldSize)
    throw std::invalid_argument("sampler: rank out of range");
  perRank_ = (size_ + world_ - 1) / world_;
}

std::vector<int64_t> DistributedSampler::paddedOrder() const {
  std::vector<int64_t> order(size_t(size_), 0);
  std::iota(order.begin(), order.end(), int64_t(0));
  if (shuffle_) {
    SplitMix64 g{seed_ * 0x100000001b3ull + uint64_t(epoch_)};
    for (int64_t i = size_ - 1; i > 0; --i)
      std::swap(order[size_t(i)], order[g.below(uint64_t(i) + 1)]);
  }
  // Pad by wrapping so that every rank gets the same number of samples.
  int64_t total = perRank_ * world_;
  for (int64_t i = size_; i < total; ++i) order.push_back(order[size_t(i - size_)]);
  return order;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order = paddedOrder();
  std::vector<int64_t> mine;
  mine.reserve(size_t(perRank_));
  for (int64_t i = rank_; i < int64_t(order.size()); i += world_) mine.push_back(order[size_t(i)]);
  return mine;
}

}  // namespace trainer
