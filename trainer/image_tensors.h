// image_tensors.h — Fashion-MNIST images as normalized tensors, shared by the data-parallel
// loop (train.cc), the parameter-server workers (ps_worker.cc) and the hashed model
// (ps_sparse.cc), so that every training style sees the same inputs.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>

#include "trainer/dataset.h"

namespace trainer {

/// Pixel mean and standard deviation of the Fashion-MNIST training set, in [0,1].
constexpr double kPixelMean = 0.2860, kPixelStd = 0.3530;

struct Split {
  torch::Tensor images;  // [n,1,rows,cols], normalized
  torch::Tensor labels;  // [n], int64
};

/// The first `limit` images (all when limit <= 0) of `s`, in `type`, normalized. The tensors
/// view `s`'s memory until converted: `s` must outlive the call.
Split toTensors(const ImageSet& s, int64_t limit, torch::ScalarType type);

inline double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace trainer
