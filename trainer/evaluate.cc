#include "trainer/evaluate.h"

#include <cstring>
#include <stdexcept>

#include "trainer/sampler.h"

namespace trainer {

EvalResult evaluate(torch::nn::Sequential& model, const torch::Tensor& images,
                    const torch::Tensor& labels, Comm& comm) {
  model->eval();
  EvalResult r;
  try {
    r = evaluate([&](const torch::Tensor& x) { return model->forward(x); }, images, labels, comm);
  } catch (...) {
    model->train();
    throw;
  }
  model->train();
  return r;
}

EvalResult evaluate(const std::function<torch::Tensor(const torch::Tensor&)>& logits,
                    const torch::Tensor& images, const torch::Tensor& labels, Comm& comm) {
  constexpr int64_t kEvalBatch = 500;
  const int64_t n = images.size(0);
  const int world = comm.size();
  DistributedSampler sampler(n, comm.rank(), world, /*shuffle=*/false, 0);
  std::vector<int64_t> mine = sampler.indices();
  const int64_t perRank = sampler.samplesPerRank();

  std::vector<int32_t> predictions(static_cast<size_t>(perRank));
  {
    torch::NoGradGuard noGrad;
    for (int64_t at = 0; at < perRank; at += kEvalBatch) {
      int64_t len = std::min(kEvalBatch, perRank - at);
      torch::Tensor idx = torch::from_blob(mine.data() + at, {len}, torch::kLong);
      torch::Tensor pred = logits(images.index_select(0, idx)).argmax(1).to(torch::kInt);
      std::memcpy(predictions.data() + at, pred.data_ptr<int32_t>(), size_t(len) * 4);
    }
  }
  std::vector<int32_t> all(size_t(perRank) * size_t(world));
  comm.allGather(predictions.data(), all.data(), size_t(perRank), chorusInt32);

  // Rank r's j-th sample sits at position r + world*j of the padded order; positions
  // past n are padding (repeats) and are dropped.
  std::vector<int64_t> order = sampler.paddedOrder();
  std::vector<int32_t> byIndex(size_t(n), -1);
  for (int r = 0; r < world; ++r)
    for (int64_t j = 0; j < perRank; ++j) {
      int64_t position = r + int64_t(world) * j;
      if (position < n) byIndex[size_t(order[size_t(position)])] = all[size_t(r * perRank + j)];
    }
  auto lab = labels.accessor<int64_t, 1>();
  EvalResult res;
  for (int64_t i = 0; i < n; ++i) {
    if (byIndex[size_t(i)] < 0) throw std::logic_error("evaluation: sample without prediction");
    res.correct += byIndex[size_t(i)] == lab[i];
  }
  res.total = n;
  return res;
}

}  // namespace trainer
