#include "trainer/sync_batch_norm.h"

#include "trainer/torch_chorus.h"

namespace trainer {
namespace {

// Sum over ranks, differentiable: the adjoint of "every rank gets the sum of all x" is
// "every rank's input gradient is the sum of all output gradients".
struct AllReduceSum : public torch::autograd::Function<AllReduceSum> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, Comm* comm) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    torch::Tensor y = x.contiguous().clone();
    allReduceTensor(*comm, y, chorusSum);
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* comm = reinterpret_cast<Comm*>(ctx->saved_data["comm"].toInt());
    torch::Tensor g = grads[0].contiguous().clone();
    allReduceTensor(*comm, g, chorusSum);
    return {g, torch::Tensor()};
  }
};

}  // namespace

SyncBatchNormImpl::SyncBatchNormImpl(int64_t features, Comm* comm, double eps, double momentum)
    : comm_(comm), features_(features), eps_(eps), momentum_(momentum) {
  weight = register_parameter("weight", torch::ones({features}));
  bias = register_parameter("bias", torch::zeros({features}));
  running_mean = register_buffer("running_mean", torch::zeros({features}));
  running_var = register_buffer("running_var", torch::ones({features}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

torch::Tensor SyncBatchNormImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() >= 2 && x.size(1) == features_, "SyncBatchNorm: expected ", features_,
              " channels in dimension 1, got input of shape ", x.sizes());
  if (!is_training())
    return torch::batch_norm(x, weight, bias, running_mean, running_var, false, momentum_, eps_,
                             false);
  std::vector<int64_t> reduceDims = {0};
  std::vector<int64_t> shape(size_t(x.dim()), 1);
  shape[1] = features_;
  for (int64_t d = 2; d < x.dim(); ++d) reduceDims.push_back(d);
  const int64_t localCount = x.numel() / features_;

  torch::Tensor local = torch::cat({x.sum(reduceDims), (x * x).sum(reduceDims),
                                    torch::full({1}, double(localCount), x.options())});
  torch::Tensor global = AllReduceSum::apply(local, comm_);
  torch::Tensor count = global.narrow(0, 2 * features_, 1);
  torch::Tensor mean = global.narrow(0, 0, features_) / count;
  torch::Tensor var = global.narrow(0, features_, features_) / count - mean * mean;

  {
    torch::NoGradGuard noGrad;
    double n = count.item<double>();
    torch::Tensor unbiased = n > 1 ? var * (n / (n - 1)) : var;
    running_mean.mul_(1 - momentum_).add_(mean.detach() * momentum_);
    running_var.mul_(1 - momentum_).add_(unbiased.detach() * momentum_);
    num_batches_tracked.add_(1);
  }
  return (x - mean.view(shape)) * torch::rsqrt(var + eps_).view(shape) * weight.view(shape) +
         bias.view(shape);
}

}  // namespace trainer
