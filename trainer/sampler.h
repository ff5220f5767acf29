// sampler.h — which samples each rank trains on (the DistributedSampler of DDP).
//
// Every rank builds the same permutation of the dataset from a shared seed and the epoch
// number (so each epoch is reshuffled identically everywhere, with no communication), pads
// it by wrapping around to a multiple of the world size, and takes every world-th index
// starting at its rank. Because the shard is strided, the first b samples of every rank
// together are exactly the first b*world samples of the permutation: one rank with batch
// 64 and two ranks with batch 32 see the same global batches, step by step.
#pragma once

#include <cstdint>
#include <vector>

namespace trainer {

class DistributedSampler {
 public:
  DistributedSampler(int64_t datasetSize, int rank, int worldSize, bool shuffle, uint64_t seed);

  /// Reshuffles for `epoch` (a no-op without shuffling).
  void setEpoch(int64_t epoch) { epoch_ = epoch; }
  /// Samples per rank per epoch (ceil(datasetSize / worldSize), equal on every rank).
  int64_t samplesPerRank() const { return perRank_; }
  /// This rank's dataset indices for the current epoch, in order.
  std::vector<int64_t> indices() const;
  /// The whole padded permutation (every rank's indices, interleaved), for distributed
  /// evaluation, which must put the gathered predictions back in dataset order.
  std::vector<int64_t> paddedOrder() const;

 private:
  int64_t size_;
  int rank_, world_;
  bool shuffle_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  int64_t perRank_;
};

}  // namespace trainer
