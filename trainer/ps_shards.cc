#include "trainer/ps_shards.h"

#include <stdexcept>

namespace trainer {

PsRoles makePsRoles(const Options& o, int world, int rank) {
  PsRoles r;
  r.colocated = o.psColocated;
  if (o.psColocated) {
    r.servers = r.workers = world;
    r.serves = r.works = true;
    r.workerIndex = rank;
    return r;
  }
  if (o.psServers >= world)
    throw std::invalid_argument("--ps-servers " + std::to_string(o.psServers) + " with " +
                                std::to_string(world) +
                                " rank(s): no rank left to work (need K < world size)");
  r.servers = o.psServers;
  r.workers = world - o.psServers;
  r.serves = rank < o.psServers;
  r.works = !r.serves;
  r.workerIndex = r.works ? rank - o.psServers : -1;
  return r;
}

std::vector<size_t> Sharded::denseShardsOf(int k) const {
  std::vector<size_t> out;
  for (size_t i : plan.shardsOf(k))
    if (!isTable(i)) out.push_back(i);
  return out;
}

int Sharded::tableShardOf(int k) const {
  for (size_t i : plan.shardsOf(k))
    if (isTable(i)) return int(i);
  return -1;
}

int64_t Sharded::denseCount(int k) const {
  int64_t n = 0;
  for (size_t i : denseShardsOf(k)) n += plan.shards[i].count;
  return n;
}

torch::Tensor Sharded::view(size_t i, bool grad) const {
  const PsShard& s = plan.shards[i];
  const int64_t rowSize = plan.tensors[s.tensor].rowSize;
  torch::Tensor t = grad ? params[s.tensor].grad() : params[s.tensor];
  return t.view(-1).slice(0, s.rowBegin * rowSize, s.rowEnd * rowSize);
}

torch::Tensor Sharded::gather(int k, bool grad, bool all) const {
  std::vector<torch::Tensor> parts;
  for (size_t i : all ? plan.shardsOf(k) : denseShardsOf(k)) parts.push_back(view(i, grad));
  if (parts.empty()) return torch::empty({0}, params[0].options());
  return torch::cat(parts);
}

void Sharded::scatter(int k, const torch::Tensor& flat) {
  torch::NoGradGuard noGrad;
  int64_t at = 0;
  for (size_t i : denseShardsOf(k)) {
    const int64_t n = plan.shards[i].count;
    view(i, false).copy_(flat.slice(0, at, at + n));
    at += n;
  }
}

Sharded shardModel(torch::nn::Sequential& model, int servers, bool sparseTable) {
  Sharded sh;
  std::vector<PsTensor> shapes;
  for (auto& item : model->named_parameters()) {
    torch::Tensor p = item.value();
    sh.params.push_back(p);
    PsTensor t;
    t.name = item.key();
    t.rows = p.dim() == 0 ? 1 : p.size(0);
    t.rowSize = p.numel() / t.rows;
    shapes.push_back(t);
  }
  sh.plan = makePsPlan(shapes, servers);
  if (sparseTable) {
    sh.table = 0;  // makeHashedModel: the table is the first parameter
    sh.dim = shapes[0].rowSize;
  }
  return sh;
}

}  // namespace trainer
