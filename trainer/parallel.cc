#include "trainer/parallel.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "trainer/models.h"
#include "trainer/torch_chorus.h"

namespace trainer {
namespace {

// Megatron's "f": identity forward; backward sums the input gradient over the TP group
// (each rank's shard of the column-parallel layer contributes to the full input gradient).
struct CopyToTensorParallel : public torch::autograd::Function<CopyToTensorParallel> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, Comm* comm) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* comm = reinterpret_cast<Comm*>(ctx->saved_data["comm"].toInt());
    torch::Tensor g = grads[0].contiguous().clone();
    allReduceTensor(*comm, g, chorusSum);
    return {g, torch::Tensor()};
  }
};

// Megatron's "g": forward sums the partial products over the TP group; backward is the
// identity (every rank's output gradient is already the full one).
struct ReduceFromTensorParallel : public torch::autograd::Function<ReduceFromTensorParallel> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, torch::Tensor x, Comm* comm) {
    torch::Tensor y = x.contiguous().clone();
    allReduceTensor(*comm, y, chorusSum);
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

int64_t paramCount(const std::shared_ptr<torch::nn::Module>& m) {
  int64_t n = 0;
  for (auto& p : m->parameters()) n += p.numel();
  return n;
}

std::vector<int64_t> shapeWithoutBatch(const torch::Tensor& t) {
  auto s = t.sizes().vec();
  s.erase(s.begin());
  return s;
}

// Child index from a parameter name such as "3.weight".
size_t childOf(const std::string& name) {
  return size_t(std::stoul(name.substr(0, name.find('.'))));
}

}  // namespace

ParallelLinearImpl::ParallelLinearImpl(Kind kind, const torch::nn::Linear& full, Comm* comm)
    : kind_(kind), comm_(comm) {
  torch::NoGradGuard noGrad;
  const int t = comm->size(), r = comm->rank();
  const torch::Tensor& w = full->weight;
  if (kind == kColumn) {
    const int64_t k = w.size(0) / t;
    weight = register_parameter("weight", w.narrow(0, r * k, k).clone());
    bias = register_parameter("bias", full->bias.narrow(0, r * k, k).clone());
  } else {
    const int64_t k = w.size(1) / t;
    weight = register_parameter("weight", w.narrow(1, r * k, k).contiguous().clone());
    bias = register_parameter("bias", full->bias.clone());
  }
}

torch::Tensor ParallelLinearImpl::forward(const torch::Tensor& x) {
  if (kind_ == kColumn)
    return torch::nn::functional::linear(CopyToTensorParallel::apply(x, comm_), weight, bias);
  return ReduceFromTensorParallel::apply(x.matmul(weight.t()), comm_) + bias;
}

namespace {

// Microseconds of forward + backward of every child on a micro-batch of `batch` samples
// (best of 5 after a warm-up), measured in evaluation mode (no running statistics move)
// and without touching the gradients.
std::vector<int64_t> measureChildren(torch::nn::Sequential& full, int64_t batch,
                                     torch::ScalarType dtype) {
  const size_t n = full->size();
  std::vector<double> best(n, 1e30);
  full->eval();
  for (int rep = 0; rep < 6; ++rep) {
    torch::Tensor x = torch::randn({batch, 1, 28, 28}, torch::TensorOptions().dtype(dtype));
    size_t i = 0;
    for (auto it = full->begin(); it != full->end(); ++it, ++i) {
      torch::Tensor in = x.detach().requires_grad_(true);
      auto t0 = std::chrono::steady_clock::now();
      torch::Tensor y = it->forward<torch::Tensor>(in);
      torch::Tensor g = torch::ones_like(y);
      y.backward(g);
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (rep > 0) best[i] = std::min(best[i], us);
      x = y.detach();
    }
  }
  full->train();
  for (auto& p : full->parameters()) p.mutable_grad() = torch::Tensor();
  std::vector<int64_t> out;
  for (double b : best) out.push_back(std::max<int64_t>(1, int64_t(b)));
  return out;
}

}  // namespace

StageModel buildStage(const Options& opts, const Layout& layout, Comm* world, Comm* bnComm,
                      Comm* tpComm, torch::ScalarType dtype) {
  StageModel st;
  torch::manual_seed(opts.seed);
  st.full = makeModel(opts.model, opts.width, opts.syncBn, bnComm);
  st.full->to(dtype);
  const size_t n = st.full->size();

  // Activation shapes after every child (batch of 1, evaluation mode: no statistics move).
  std::vector<std::vector<int64_t>> after(n);
  {
    torch::NoGradGuard noGrad;
    st.full->eval();
    torch::Tensor x = torch::zeros({1, 1, 28, 28}, torch::TensorOptions().dtype(dtype));
    size_t i = 0;
    for (auto it = st.full->begin(); it != st.full->end(); ++it, ++i) {
      x = it->forward<torch::Tensor>(x);
      after[i] = shapeWithoutBatch(x);
    }
    st.full->train();
  }

  // Layers: a new one at every child with parameters (the first takes leading ones).
  std::vector<size_t> layerStart;
  for (size_t i = 0; i < n; ++i)
    if (paramCount(st.full->ptr(i)) > 0) layerStart.push_back(layerStart.empty() ? 0 : i);
  // Tensor parallel: the first two Linear children, column then row, in one layer.
  std::vector<size_t> linears;
  for (size_t i = 0; i < n; ++i)
    if (st.full->ptr(i)->as<torch::nn::Linear>()) linears.push_back(i);
  const int tp = layout.tp;
  size_t column = n, row = n;
  if (tp > 1) {
    if (linears.size() < 2 || !tpComm)
      throw std::invalid_argument("--tensor-parallel: model " + opts.model +
                                  " has no pair of linear layers to split");
    column = linears[0];
    row = linears[1];
    auto* c = st.full->ptr(column)->as<torch::nn::Linear>();
    auto* r = st.full->ptr(row)->as<torch::nn::Linear>();
    const int64_t width = c->weight.size(0);
    if (width % tp != 0 || r->weight.size(1) != width)
      throw std::invalid_argument("--tensor-parallel " + std::to_string(tp) +
                                  " does not divide the " + std::to_string(width) +
                                  " outputs of layer " + std::to_string(column) + " (model " +
                                  opts.model + ")");
    std::vector<size_t> merged;
    for (size_t s : layerStart)
      if (!(s > column && s <= row)) merged.push_back(s);
    layerStart = merged;
  }
  layerStart.push_back(n);
  st.layers = layerStart.size() - 1;
  // Cost of every child: parameters, or (--split time) microseconds measured on rank 0 and
  // broadcast, so that every rank splits alike.
  std::vector<int64_t> childCost(n), params(n);
  for (size_t i = 0; i < n; ++i) params[i] = paramCount(st.full->ptr(i));
  const bool byTime = opts.split == "time" && layout.pp > 1;
  if (byTime) {
    if (layout.rank == 0)
      childCost =
          measureChildren(st.full, std::max<int64_t>(1, opts.batch / opts.microBatches), dtype);
    world->broadcast(childCost.data(), n, chorusInt64, 0);
  } else {
    childCost = params;
  }
  std::vector<int64_t> cost, layerParams;
  for (size_t l = 0; l + 1 < layerStart.size(); ++l) {
    int64_t c = 0, p = 0;
    for (size_t i = layerStart[l]; i < layerStart[l + 1]; ++i) {
      c += childCost[i];
      p += params[i];
    }
    cost.push_back(c);
    layerParams.push_back(p);
  }
  std::vector<size_t> stages = splitStages(cost, layout.pp);

  // The plan: "stage 0: children 0-2 (200960 params) | stage 1: ...".
  for (int s = 0; s < layout.pp; ++s) {
    size_t a = layerStart[stages[size_t(s)]], b = layerStart[stages[size_t(s) + 1]];
    int64_t p = 0, us = 0;
    for (size_t l = stages[size_t(s)]; l < stages[size_t(s) + 1]; ++l) {
      p += layerParams[l];
      us += cost[l];
    }
    if (s) st.plan += " | ";
    st.plan += "stage " + std::to_string(s) + ": modules " + std::to_string(a) + "-" +
               std::to_string(b - 1) + " (" + std::to_string(p) + " params" +
               (byTime ? ", " + std::to_string(us) + " us" : std::string()) + ")";
  }

  const size_t first = layerStart[stages[size_t(layout.stage)]];
  const size_t last = layerStart[stages[size_t(layout.stage) + 1]];  // exclusive
  st.inShape = first == 0 ? std::vector<int64_t>{1, 28, 28} : after[first - 1];
  st.outShape = after[last - 1];
  st.logitsShape = after[n - 1];
  auto it = st.full->begin() + std::ptrdiff_t(first);
  for (size_t i = first; i < last; ++i, ++it) {
    const std::string name = std::to_string(i);
    if (i == column || i == row) {
      torch::nn::Linear holder(std::dynamic_pointer_cast<torch::nn::LinearImpl>(st.full->ptr(i)));
      st.local->push_back(
          name, torch::nn::AnyModule(ParallelLinear(
                    i == column ? ParallelLinearImpl::kColumn : ParallelLinearImpl::kRow, holder,
                    tpComm)));
    } else {
      st.local->push_back(name, *it);
    }
  }
  return st;
}

void gatherFullState(const StageModel& stage, const Layout& layout, Comm& world,
                     std::vector<std::pair<std::string, torch::Tensor>>* params,
                     std::vector<std::pair<std::string, torch::Tensor>>* buffers) {
  torch::NoGradGuard noGrad;
  auto localParams = stage.local->named_parameters();
  auto localBuffers = stage.local->named_buffers();
  auto one = [&](const std::string& name, const torch::Tensor& fullT,
                 const torch::OrderedDict<std::string, torch::Tensor>& local) -> torch::Tensor {
    torch::Tensor out = torch::zeros_like(fullT).contiguous();
    const torch::Tensor* mine = local.find(name);
    if (mine && layout.dpRank == 0) {
      ParallelLinearImpl* sharded = nullptr;
      for (auto& child : stage.local->named_children())
        if (child.key() == std::to_string(childOf(name)))
          sharded = child.value()->as<ParallelLinearImpl>();
      const bool isBias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
      if (sharded && !(sharded->kind() == ParallelLinearImpl::kRow && isBias)) {
        const int64_t dim = sharded->kind() == ParallelLinearImpl::kColumn ? 0 : 1;
        const int64_t k = mine->size(dim);
        out.narrow(dim, layout.tpRank * k, k).copy_(*mine);
      } else if (layout.tpRank == 0) {
        out.copy_(*mine);
      }
    }
    allReduceTensor(world, out, chorusSum);
    return out;
  };
  for (auto& item : stage.full->named_parameters())
    params->emplace_back(item.key(), one(item.key(), item.value(), localParams));
  for (auto& item : stage.full->named_buffers())
    buffers->emplace_back(item.key(), one(item.key(), item.value(), localBuffers));
}

}  // namespace trainer
