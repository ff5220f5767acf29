#include "trainer/ps_optimizer.h"

#include <cmath>

namespace trainer {

ShardOptimizer::ShardOptimizer(const std::string& kind, torch::Tensor params, double lr,
                               double momentum, double weightDecay)
    : adam_(kind == "adam"),
      params_(std::move(params)),
      lr_(lr),
      momentum_(momentum),
      weightDecay_(weightDecay) {}

void ShardOptimizer::step(const torch::Tensor& grad) {
  torch::NoGradGuard noGrad;
  ++steps_;
  torch::Tensor d = grad;
  if (weightDecay_ != 0) d = d.add(params_, weightDecay_);
  if (!adam_) {
    // torch::optim::SGD: buf = d on the first step, then buf = momentum * buf + d.
    if (momentum_ != 0) {
      if (!buf_.defined())
        buf_ = d.clone();
      else
        buf_.mul_(momentum_).add_(d);
      d = buf_;
    }
    params_.add_(d, -lr_);
    return;
  }
  // torch::optim::Adam with its defaults (betas 0.9, 0.999; eps 1e-8).
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  if (!buf_.defined()) {
    buf_ = torch::zeros_like(params_);
    second_ = torch::zeros_like(params_);
  }
  buf_.mul_(beta1).add_(d, 1 - beta1);
  second_.mul_(beta2).addcmul_(d, d, 1 - beta2);
  const double c1 = 1 - std::pow(beta1, double(steps_));
  const double c2 = 1 - std::pow(beta2, double(steps_));
  torch::Tensor denom = (second_.sqrt() / std::sqrt(c2)).add_(eps);
  params_.addcdiv_(buf_, denom, -lr_ / c1);
}

}  // namespace trainer
