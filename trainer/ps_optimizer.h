// ps_optimizer.h — the optimizer a parameter server runs on its shard (one flat buffer).
//
// The same arithmetic as torch::optim::SGD (momentum, weight decay, no dampening or
// Nesterov) and torch::optim::Adam, element by element, so that a sync parameter-server run
// equals data-parallel training to rounding: the update of an element does not depend on
// how the parameters are cut into shards.
#pragma once

#include <torch/torch.h>

#include <string>

namespace trainer {

class ShardOptimizer {
 public:
  /// `kind`: "sgd" or "adam". `params` is the shard (updated in place).
  ShardOptimizer(const std::string& kind, torch::Tensor params, double lr, double momentum,
                 double weightDecay);
  /// One update with the gradient `grad` (same shape as the shard).
  void step(const torch::Tensor& grad);
  torch::Tensor& params() { return params_; }
  int64_t steps() const { return steps_; }

 private:
  bool adam_;
  torch::Tensor params_;
  double lr_, momentum_, weightDecay_;
  torch::Tensor buf_;     // SGD momentum buffer, or Adam's first moment
  torch::Tensor second_;  // Adam's second moment
  int64_t steps_ = 0;
};

}  // namespace trainer
