#include "trainer/ps_sparse.h"

#include "trainer/image_tensors.h"  // kPixelMean/kPixelStd: undo the normalization

namespace trainer {

torch::nn::Sequential makeHashedModel(int64_t buckets) {
  using namespace torch::nn;
  Sequential net;
  net->push_back(Embedding(EmbeddingOptions(buckets, kHashedDim)));
  net->push_back(Linear(kHashedDim, 64));
  net->push_back(ReLU());
  net->push_back(Linear(64, 10));
  {
    // Small initial rows: the mean of 784 unit-variance rows would start the head far from
    // its linear range.
    torch::NoGradGuard noGrad;
    net->parameters()[0].mul_(0.05);
  }
  return net;
}

torch::Tensor hashedKeys(const torch::Tensor& images, int64_t buckets) {
  const int64_t n = images.size(0);
  torch::Tensor pixel =
      (images.reshape({n, 784}).to(torch::kDouble) * kPixelStd + kPixelMean).mul_(255).round_();
  torch::Tensor level = pixel.clamp(0, 255).to(torch::kLong).div(64, "floor");
  torch::Tensor feature = torch::arange(784, torch::kLong).mul(4).unsqueeze(0) + level;
  // Multiplicative hashing modulo a prime, then into the table: distinct features may share
  // a row (as in any hashed-feature model).
  return feature.mul(int64_t(2654435761)).remainder(int64_t(4294967291)).remainder(buckets);
}

torch::Tensor hashedForward(torch::nn::Sequential& model, const torch::Tensor& rows,
                            const torch::Tensor& inverse, int64_t n) {
  torch::Tensor h = rows.index_select(0, inverse).view({n, 784, kHashedDim}).sum(1);
  h = model[1]->as<torch::nn::Linear>()->forward(h);
  h = torch::relu(h);
  return model[3]->as<torch::nn::Linear>()->forward(h);
}

torch::Tensor hashedLogits(torch::nn::Sequential& model, const torch::Tensor& images,
                           int64_t buckets) {
  torch::Tensor table = model->parameters()[0];
  std::vector<torch::Tensor> out;
  for (int64_t at = 0; at < images.size(0); at += 256) {
    torch::Tensor x = images.slice(0, at, std::min(images.size(0), at + 256));
    torch::Tensor keys = hashedKeys(x, buckets).flatten();
    out.push_back(hashedForward(model, table, keys, x.size(0)));
  }
  return torch::cat(out);
}

}  // namespace trainer
