// sync_batch_norm.h — batch norm whose training statistics cover the whole global batch.
//
// Each rank sums x and x*x over its part of the batch; one all-reduce (sum) of
// [sum, sum of squares, count] gives every rank the global mean and variance. The
// all-reduce is an autograd function whose backward is again an all-reduce (sum), so the
// gradient of every rank's loss reaches the inputs on all ranks, as in PyTorch's
// SyncBatchNorm. Evaluation uses the running statistics, with no communication.
// Parameter and buffer names match torch::nn::BatchNorm, so checkpoints look alike.
#pragma once

#include <torch/torch.h>

#include "trainer/comm.h"

namespace trainer {

class SyncBatchNormImpl : public torch::nn::Module {
 public:
  SyncBatchNormImpl(int64_t features, Comm* comm, double eps = 1e-5, double momentum = 0.1);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  Comm* comm_;
  int64_t features_;
  double eps_, momentum_;
};
TORCH_MODULE(SyncBatchNorm);

}  // namespace trainer
