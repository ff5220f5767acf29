#include "trainer/ps_train.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/dataset.h"
#include "trainer/evaluate.h"
#include "trainer/models.h"
#include "trainer/progress.h"
#include "trainer/ps_optimizer.h"
#include "trainer/ps_plan.h"
#include "trainer/sampler.h"
#include "trainer/state_io.h"

namespace trainer {
namespace {

// Fashion-MNIST pixel mean and standard deviation (as in train.cc).
constexpr double kPixelMean = 0.2860, kPixelStd = 0.3530;

struct Split {
  torch::Tensor images, labels;
};

Split toTensors(const ImageSet& s, int64_t limit, torch::ScalarType type) {
  int64_t n = limit > 0 ? std::min(limit, s.count) : s.count;
  auto* pixels = const_cast<uint8_t*>(s.pixels.data());
  auto* labels = const_cast<uint8_t*>(s.labels.data());
  Split out;
  out.images = torch::from_blob(pixels, {n, 1, s.rows, s.cols}, torch::kUInt8)
                   .to(type)
                   .div_(255.0)
                   .sub_(kPixelMean)
                   .div_(kPixelStd);
  out.labels = torch::from_blob(labels, {n}, torch::kUInt8).to(torch::kLong);
  return out;
}

// Who does what. Server k is rank k in both layouts; worker w is rank w (colocated) or
// K + w (dedicated servers).
struct Roles {
  int servers = 0, workers = 0;
  bool colocated = false;
  bool serves = false, works = false;
  int workerIndex = -1;
  int workerRank(int w) const { return colocated ? w : servers + w; }
};

Roles makeRoles(const Options& o, int world, int rank) {
  Roles r;
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

enum : int64_t { kPush = 1, kDone = 2 };
constexpr size_t kHeader = 4;  // kind, worker clock, payload elements, unused

chorusDataType_t chorusType(torch::ScalarType t) {
  return t == torch::kDouble ? chorusFloat64 : chorusFloat32;
}

// The model's parameters as the plan sees them, and the views of each shard.
struct Sharded {
  PsPlan plan;
  std::vector<torch::Tensor> params;  // model order
  // The flat view of shard i in `params[shard.tensor]` (or its gradient).
  torch::Tensor view(size_t i, bool grad) const {
    const PsShard& s = plan.shards[i];
    const int64_t rowSize = plan.tensors[s.tensor].rowSize;
    torch::Tensor t = grad ? params[s.tensor].grad() : params[s.tensor];
    return t.view(-1).slice(0, s.rowBegin * rowSize, s.rowEnd * rowSize);
  }
  // Server k's part of the parameters or gradients, as one flat tensor.
  torch::Tensor gather(int k, bool grad) const {
    std::vector<torch::Tensor> parts;
    for (size_t i : plan.shardsOf(k)) parts.push_back(view(i, grad));
    return torch::cat(parts);
  }
  // Copies server k's flat buffer back into the parameters.
  void scatter(int k, const torch::Tensor& flat) {
    torch::NoGradGuard noGrad;
    for (size_t i : plan.shardsOf(k)) {
      const PsShard& s = plan.shards[i];
      view(i, false).copy_(flat.slice(0, s.serverOffset, s.serverOffset + s.count));
    }
  }
};

Sharded shardModel(torch::nn::Sequential& model, int servers) {
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
  return sh;
}

// Bytes a rank moved in push/pull traffic, and the steps they were spread over.
struct Traffic {
  double bytes = 0;
  int64_t steps = 0;
};

// ---- Dedicated server loop -------------------------------------------------------------

void serve(const Options& opts, Comm& comm, const Roles& roles, Sharded& sh, Traffic* traffic) {
  const int k = comm.rank();
  torch::Tensor flat = sh.gather(k, false).clone();
  ShardOptimizer opt(opts.psOptimizer, flat, opts.lr, opts.momentum, opts.weightDecay);
  const chorusDataType_t type = chorusType(flat.scalar_type());
  const size_t count = size_t(flat.numel());
  const double elemBytes = double(flat.element_size());
  const int W = roles.workers;
  std::vector<bool> done(size_t(W), false);
  std::vector<int64_t> clock(size_t(W), 0);
  auto slot = std::vector<torch::Tensor>(size_t(W));
  std::vector<int> pending;  // ssp: workers waiting for their pull
  int live = W;
  int64_t header[kHeader];
  auto reply = [&](int w) {
    comm.exchange({{true, flat.data_ptr(), count, type, roles.workerRank(w)}}, "ps pull reply");
    traffic->bytes += double(count) * elemBytes;
  };
  // Takes the next push or done from any worker; returns its worker index (-1: a done).
  auto take = [&](torch::Tensor* payload) {
    int peer = comm.recvAny(header, kHeader, chorusInt64, "ps push header (any worker)");
    int w = peer - (roles.colocated ? 0 : roles.servers);
    if (w < 0 || w >= W || done[size_t(w)])
      throw std::runtime_error("parameter server " + std::to_string(k) +
                               ": unexpected message from rank " + std::to_string(peer));
    traffic->bytes += double(kHeader * sizeof(int64_t));
    if (header[0] == kDone) {
      done[size_t(w)] = true;
      --live;
      return -1;
    }
    if (header[2] != int64_t(count))
      throw std::runtime_error("parameter server " + std::to_string(k) + ": push of " +
                               std::to_string(header[2]) + " elements, expected " +
                               std::to_string(count));
    *payload = torch::empty_like(flat);
    comm.exchange({{false, payload->data_ptr(), count, type, peer}}, "ps push payload");
    traffic->bytes += double(count) * elemBytes;
    if (opts.psTestDropPushFrom == peer) payload->zero_();  // negative control only
    ++clock[size_t(w)];
    return w;
  };

  if (opts.psMode == "sync") {
    while (live > 0) {
      int pushes = 0;
      std::vector<int> from;
      while (pushes + (W - live) < W) {  // one message from every worker still training
        torch::Tensor g;
        int w = take(&g);
        if (w < 0) {
          if (live == 0) break;
          continue;
        }
        slot[size_t(w)] = g;
        from.push_back(w);
        ++pushes;
      }
      if (pushes == 0) break;
      // The average in worker order, whatever order the pushes arrived in.
      std::sort(from.begin(), from.end());
      torch::Tensor sum = slot[size_t(from[0])].clone();
      for (size_t i = 1; i < from.size(); ++i) sum.add_(slot[size_t(from[i])]);
      sum.div_(double(pushes));
      opt.step(sum);
      traffic->steps += pushes;
      std::vector<Comm::P2p> replies;
      for (int w : from)
        replies.push_back({true, flat.data_ptr(), count, type, roles.workerRank(w)});
      comm.exchange(replies, "ps pull replies");
      traffic->bytes += double(from.size() * count) * elemBytes;
    }
    return;
  }
  const bool ssp = opts.psMode == "ssp";
  auto release = [&]() {
    int64_t slowest = INT64_MAX;
    for (int w = 0; w < W; ++w)
      if (!done[size_t(w)]) slowest = std::min(slowest, clock[size_t(w)]);
    std::vector<int> still;
    for (int w : pending) {
      if (clock[size_t(w)] - slowest <= opts.staleness)
        reply(w);
      else
        still.push_back(w);
    }
    pending.swap(still);
  };
  while (live > 0) {
    torch::Tensor g;
    int w = take(&g);
    if (w >= 0) {
      opt.step(g);  // applied on arrival: the worker's own mean gradient
      ++traffic->steps;
      if (ssp)
        pending.push_back(w);
      else
        reply(w);
    }
    if (ssp) release();
  }
}

}  // namespace

namespace {

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// ---- Worker side -----------------------------------------------------------------------

// Pushes this worker's gradients and pulls fresh parameters: one group per step with the
// dedicated servers; two all-pairs groups when colocated (this rank serves shard `rank`).
class Pusher {
 public:
  Pusher(const Options& opts, Comm& comm, const Roles& roles, Sharded& sh)
      : opts_(opts), comm_(comm), roles_(roles), sh_(sh) {
    type_ = chorusType(sh.params[0].scalar_type());
    elemBytes_ = double(sh.params[0].element_size());
    for (int k = 0; k < roles.servers; ++k)
      pulled_.push_back(torch::empty({sh.plan.serverElements[size_t(k)]}, sh.params[0].options()));
    if (roles.colocated) {
      torch::Tensor mine = sh.gather(comm.rank(), false).clone();
      opt_.reset(
          new ShardOptimizer(opts.psOptimizer, mine, opts.lr, opts.momentum, opts.weightDecay));
    }
  }

  void step(int64_t clock) {
    if (roles_.colocated)
      colocatedStep();
    else
      dedicatedStep(clock);
    traffic.steps += 1;
  }

  // Tells every server this worker is finished (dedicated servers).
  void finish() {
    if (roles_.colocated) return;
    std::vector<Comm::P2p> ops;
    std::vector<int64_t> headers(kHeader * size_t(roles_.servers), 0);
    for (int k = 0; k < roles_.servers; ++k) {
      headers[size_t(k) * kHeader] = kDone;
      ops.push_back({true, &headers[size_t(k) * kHeader], kHeader, chorusInt64, k});
    }
    guarded([&] { comm_.exchange(ops, "ps done"); });
  }

  Traffic traffic;

 private:
  template <class F>
  void guarded(F f) {
    try {
      f();
    } catch (const std::exception& e) {
      // Name the servers: a failed push or pull means one of them is gone.
      throw std::runtime_error("lost contact with parameter server(s) " +
                               std::string(roles_.servers == 1
                                               ? "rank 0"
                                               : "ranks 0-" + std::to_string(roles_.servers - 1)) +
                               ": " + e.what());
    }
  }

  void dedicatedStep(int64_t clock) {
    std::vector<torch::Tensor> grads;
    std::vector<int64_t> headers(kHeader * size_t(roles_.servers), 0);
    std::vector<Comm::P2p> ops;
    for (int k = 0; k < roles_.servers; ++k) {
      grads.push_back(sh_.gather(k, true).contiguous());
      int64_t* h = &headers[size_t(k) * kHeader];
      h[0] = kPush;
      h[1] = clock;
      h[2] = grads.back().numel();
    }
    for (int k = 0; k < roles_.servers; ++k) {
      const size_t n = size_t(grads[size_t(k)].numel());
      ops.push_back({true, &headers[size_t(k) * kHeader], kHeader, chorusInt64, k});
      ops.push_back({true, grads[size_t(k)].data_ptr(), n, type_, k});
      ops.push_back({false, pulled_[size_t(k)].data_ptr(), n, type_, k});
      traffic.bytes += double(kHeader * sizeof(int64_t)) + 2 * double(n) * elemBytes_;
    }
    guarded([&] { comm_.exchange(ops, "ps push/pull"); });
    for (int k = 0; k < roles_.servers; ++k) sh_.scatter(k, pulled_[size_t(k)]);
  }

  void colocatedStep() {
    const int me = comm_.rank(), n = roles_.servers;
    auto grads = std::vector<torch::Tensor>(size_t(n)), inbox = grads;
    std::vector<Comm::P2p> ops;
    for (int k = 0; k < n; ++k) {
      grads[size_t(k)] = sh_.gather(k, true).contiguous();
      if (k == me) continue;
      inbox[size_t(k)] = torch::empty_like(opt_->params());
      ops.push_back(
          {true, grads[size_t(k)].data_ptr(), size_t(grads[size_t(k)].numel()), type_, k});
      ops.push_back({false, inbox[size_t(k)].data_ptr(), size_t(opt_->params().numel()), type_, k});
      traffic.bytes += double(grads[size_t(k)].numel() + opt_->params().numel()) * elemBytes_;
    }
    inbox[size_t(me)] = grads[size_t(me)];
    comm_.exchange(ops, "ps colocated push");
    torch::Tensor sum = inbox[0].clone();
    for (int k = 1; k < n; ++k)
      if (opts_.psTestDropPushFrom != k) sum.add_(inbox[size_t(k)]);
    if (opts_.psTestDropPushFrom == 0) sum.sub_(inbox[0]);
    sum.div_(double(n));
    opt_->step(sum);
    ops.clear();
    for (int k = 0; k < n; ++k) {
      if (k == me) continue;
      ops.push_back({true, opt_->params().data_ptr(), size_t(opt_->params().numel()), type_, k});
      ops.push_back(
          {false, pulled_[size_t(k)].data_ptr(), size_t(pulled_[size_t(k)].numel()), type_, k});
      traffic.bytes += double(opt_->params().numel() + pulled_[size_t(k)].numel()) * elemBytes_;
    }
    comm_.exchange(ops, "ps colocated pull");
    pulled_[size_t(me)].copy_(opt_->params());
    for (int k = 0; k < n; ++k) sh_.scatter(k, pulled_[size_t(k)]);
  }

  const Options& opts_;
  Comm& comm_;
  const Roles& roles_;
  Sharded& sh_;
  chorusDataType_t type_;
  double elemBytes_ = 0;
  std::vector<torch::Tensor> pulled_;
  std::unique_ptr<ShardOptimizer> opt_;  // colocated: this rank's shard
};

struct WorkResult {
  Progress progress;
};

Progress work(const Options& opts, Comm& world, Comm& workers, const Roles& roles,
              torch::nn::Sequential& model, Sharded& sh, Pusher& pusher) {
  const bool talk = roles.workerIndex == 0;
  const torch::ScalarType dtype = opts.useDouble ? torch::kDouble : torch::kFloat;
  Split trainSet = toTensors(loadFashionMnist(opts.dataDir, "train"), opts.trainLimit, dtype);
  Split testSet;
  if (opts.eval) testSet = toTensors(loadFashionMnist(opts.dataDir, "t10k"), opts.testLimit, dtype);
  const int64_t n = trainSet.images.size(0);
  DistributedSampler sampler(n, roles.workerIndex, roles.workers, /*shuffle=*/true, opts.seed);
  const int64_t stepsPerEpoch = sampler.samplesPerRank() / opts.batch;
  if (stepsPerEpoch == 0)
    throw std::invalid_argument("--batch " + std::to_string(opts.batch) + " exceeds the " +
                                std::to_string(sampler.samplesPerRank()) +
                                " samples of each worker");
  if (talk)
    std::printf(
        "chorus-train: parameter server, model %s, %d server(s)%s, %d worker(s), mode "
        "%s%s, optimizer %s, batch %lld per worker, %lld steps/epoch, %s\n",
        opts.model.c_str(), roles.servers, roles.colocated ? " (colocated)" : "", roles.workers,
        opts.psMode.c_str(),
        opts.psMode == "ssp" ? (" S=" + std::to_string(opts.staleness)).c_str() : "",
        opts.psOptimizer.c_str(), (long long)opts.batch, (long long)stepsPerEpoch,
        opts.useDouble ? "float64" : "float32");
  torch::manual_seed(opts.seed + 1000003ull * uint64_t(world.rank() + 1));
  Progress progress;
  bool stop = false;
  for (int64_t epoch = 0; epoch < opts.epochs && !stop; ++epoch) {
    sampler.setEpoch(epoch);
    std::vector<int64_t> mine = sampler.indices();
    ProgressBar bar(talk && opts.progress, stepsPerEpoch,
                    "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(opts.epochs));
    double lossSum = 0, correct = 0, samples = 0, commSeconds = 0;
    const auto epochStart = std::chrono::steady_clock::now();
    int64_t steps = 0;
    for (int64_t step = 0; step < stepsPerEpoch; ++step) {
      if (opts.maxSteps > 0 && progress.steps >= opts.maxSteps) {
        stop = true;
        break;
      }
      torch::Tensor idx =
          torch::from_blob(mine.data() + step * opts.batch, {opts.batch}, torch::kLong);
      torch::Tensor x = trainSet.images.index_select(0, idx);
      torch::Tensor y = trainSet.labels.index_select(0, idx);
      for (auto& p : sh.params)
        if (p.grad().defined()) p.mutable_grad().zero_();
      torch::Tensor out = model->forward(x);
      torch::Tensor loss = torch::nn::functional::cross_entropy(out, y);
      loss.backward();
      lossSum += loss.item<double>() * double(opts.batch);
      correct += out.argmax(1).eq(y).sum().item<double>();
      samples += double(opts.batch);
      const auto t = std::chrono::steady_clock::now();
      pusher.step(progress.steps);
      commSeconds += secondsSince(t);
      ++progress.steps;
      progress.microSteps += 1;
      ++steps;
      bar.update(step + 1, lossSum / samples);
    }
    bar.finish();
    const double seconds = secondsSince(epochStart);
    torch::Tensor sums =
        torch::tensor({lossSum, correct, samples, seconds, commSeconds}, torch::kDouble);
    workers.allReduce(sums.data_ptr(), 5, chorusFloat64, chorusSum);
    std::string testAcc = "-";
    if (opts.eval) {
      model->eval();
      EvalResult r = evaluate(model, testSet.images, testSet.labels, workers);
      model->train();
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * r.accuracy());
      testAcc = buf;
    }
    if (steps > 0) progress.epochsDone = epoch + 1;
    const double total = sums[2].item<double>(), wall = sums[3].item<double>() / roles.workers;
    if (talk && total > 0)
      std::printf(
          "epoch %lld/%lld  loss %.4f  train-acc %.2f%%  test-acc %s  samples/s %.0f  "
          "push/pull %.2fs  compute %.2fs  (%lld steps)\n",
          (long long)epoch + 1, (long long)opts.epochs, sums[0].item<double>() / total,
          100.0 * sums[1].item<double>() / total, testAcc.c_str(), total / wall,
          sums[4].item<double>() / roles.workers, wall - sums[4].item<double>() / roles.workers,
          (long long)steps);
    std::fflush(stdout);
  }
  pusher.finish();
  return progress;
}

}  // namespace

void trainPs(const Options& opts, Comm& comm) {
  // Checked on every rank before any communication: a bad layout fails everywhere at once.
  const Roles roles = makeRoles(opts, comm.size(), comm.rank());
  const torch::ScalarType dtype = opts.useDouble ? torch::kDouble : torch::kFloat;
  torch::manual_seed(opts.seed);  // the same initial weights on every rank
  torch::nn::Sequential model = makeModel(opts.model, opts.width, /*syncBn=*/false, nullptr);
  model->to(dtype);
  Sharded sh = shardModel(model, roles.servers);
  if (comm.rank() == 0)
    std::printf("parameter-server plan (%d server(s), the same on every rank):\n%s", roles.servers,
                sh.plan.describe().c_str());
  std::fflush(stdout);
  // The workers' own group (evaluation, epoch sums); dedicated servers split off too.
  std::unique_ptr<Comm> split;
  if (!roles.colocated) split.reset(new Comm(comm, roles.works ? 0 : 1, comm.rank(), "ps"));
  Comm& workers = roles.colocated ? comm : *split;

  Traffic traffic;
  Progress progress;
  if (roles.works) {
    Pusher pusher(opts, comm, roles, sh);
    progress = work(opts, comm, workers, roles, model, sh, pusher);
    traffic = pusher.traffic;
  } else {
    serve(opts, comm, roles, sh, &traffic);
    // A server's pushes are per worker; per global step = pushes / workers.
    traffic.steps = traffic.steps / std::max(1, roles.workers);
  }
  // Bytes per step: the busiest worker and the busiest server (max over the world).
  double mine[2] = {0, 0};
  const double perStep = traffic.steps > 0 ? traffic.bytes / double(traffic.steps) : 0;
  if (roles.colocated)
    mine[0] = mine[1] = perStep;
  else
    mine[roles.works ? 0 : 1] = perStep;
  comm.allReduce(mine, 2, chorusFloat64, chorusMax);
  if (comm.rank() == 0)
    std::printf("ps traffic: %.0f bytes/step at the busiest worker, %.0f at the busiest server\n",
                mine[0], mine[1]);
  if (roles.works && !opts.dumpParams.empty()) {
    std::string dump = perRankPath(opts.dumpParams, roles.workerIndex);
    NamedTensors params, buffers;
    for (auto& item : model->named_parameters()) params.emplace_back(item.key(), item.value());
    for (auto& item : model->named_buffers()) buffers.emplace_back(item.key(), item.value());
    if (!dump.empty()) dumpTensors(dump, params, buffers, progress, 0, 0, {});
  }
  std::fflush(stdout);
  comm.barrier();
}

}  // namespace trainer
