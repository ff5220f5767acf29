// evaluate.h — distributed evaluation: each rank predicts its shard of the test set; the
// predictions are all-gathered, put back in dataset order and trimmed to the true size
// (the sampler pads the shards to equal length).
#pragma once

#include <torch/torch.h>

#include <functional>

#include "trainer/comm.h"

namespace trainer {

struct EvalResult {
  int64_t correct = 0;
  int64_t total = 0;
  double accuracy() const { return total ? double(correct) / double(total) : 0.0; }
};

/// `images` [N,1,28,28], `labels` [N] (int64), the same on every rank.
EvalResult evaluate(torch::nn::Sequential& model, const torch::Tensor& images,
                    const torch::Tensor& labels, Comm& comm);

/// The same with any forward: `logits` maps a batch of images to its logits (for a
/// pipeline or tensor-parallel model, a collective call over the replica's ranks, all of
/// which pass the same batch). `comm` is the data-parallel group: each replica predicts its
/// shard of the test set.
EvalResult evaluate(const std::function<torch::Tensor(const torch::Tensor&)>& logits,
                    const torch::Tensor& images, const torch::Tensor& labels, Comm& comm);

}  // namespace trainer
