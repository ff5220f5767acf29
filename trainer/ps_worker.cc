#include "trainer/ps_worker.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/dataset.h"
#include "trainer/image_tensors.h"
#include "trainer/evaluate.h"
#include "trainer/progress.h"
#include "trainer/ps_optimizer.h"
#include "trainer/ps_sparse.h"
#include "trainer/sampler.h"

namespace trainer {
namespace {

// The sparse part of one step: the table rows this batch touched and their gradients, and
// the rows the next batch needs (sorted ids; undefined for a dense model).
struct Rows {
  torch::Tensor pushIds, pushGrads, pullIds;
};

// Pushes this worker's gradients and pulls fresh parameters: one group per step with the
// dedicated servers; two all-pairs groups when colocated (this rank serves shard `rank`).
class Pusher {
 public:
  Pusher(const Options& opts, Comm& comm, const PsRoles& roles, Sharded& sh, Traffic* traffic)
      : opts_(opts), comm_(comm), roles_(roles), sh_(sh), traffic_(traffic) {
    type_ = chorusTypeOf(sh.params[0].scalar_type());
    elemBytes_ = double(sh.params[0].element_size());
    if (roles.colocated) {
      torch::Tensor mine = sh.gather(comm.rank(), false).clone();
      opt_.reset(
          new ShardOptimizer(opts.psOptimizer, mine, opts.lr, opts.momentum, opts.weightDecay));
    }
  }

  void step(int64_t clock, const Rows& rows) {
    if (roles_.colocated)
      colocatedStep();
    else
      dedicatedStep(kPush, clock, rows, /*count=*/true);
    traffic_->steps += 1;
  }

  // Sparse model: fetches the whole table (before evaluation; not counted as step traffic).
  void pullAll() {
    if (sh_.table < 0) return;
    Rows rows;
    rows.pullIds = torch::arange(sh_.plan.tensors[size_t(sh_.table)].rows, torch::kLong);
    dedicatedStep(kPullOnly, 0, rows, /*count=*/false);
  }

  // Tells every server that these workers are dead (async/ssp).
  void reportLost(const std::vector<int>& lostWorkers) {
    std::vector<Comm::P2p> ops;
    std::vector<int64_t> headers(kHeader * lostWorkers.size() * size_t(roles_.servers), 0);
    size_t at = 0;
    for (int k = 0; k < roles_.servers; ++k)
      for (int w : lostWorkers) {
        headers[at] = kLost;
        headers[at + 1] = w;
        ops.push_back({true, &headers[at], kHeader, chorusInt64, k});
        at += kHeader;
      }
    guarded([&] { comm_.exchange(ops, "ps lost-worker report"); });
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

 private:
  template <class F>
  void guarded(F f) {
    try {
      f();
    } catch (const std::exception& e) {
      // Name the servers: a failed push or pull means one of them is gone.
      throw std::runtime_error("lost contact with parameter server " +
                               std::string(roles_.servers == 1
                                               ? "rank 0"
                                               : "ranks 0-" + std::to_string(roles_.servers - 1)) +
                               ": " + e.what());
    }
  }

  // The ids in `ids` that server k holds (its table rows [rowBegin, rowEnd)).
  torch::Tensor mask(const torch::Tensor& ids, int k) const {
    const int t = sh_.tableShardOf(k);
    if (!ids.defined() || t < 0) return torch::Tensor();
    const PsShard& s = sh_.plan.shards[size_t(t)];
    return ids.ge(s.rowBegin).logical_and(ids.lt(s.rowEnd));
  }

  void dedicatedStep(int64_t kind, int64_t clock, const Rows& rows, bool count) {
    const int K = roles_.servers;
    std::vector<int64_t> headers(kHeader * size_t(K), 0);
    auto ids = std::vector<torch::Tensor>(size_t(K)), payload = ids, reply = ids, pulls = ids;
    std::vector<Comm::P2p> ops;
    double bytes = 0;
    for (int k = 0; k < K; ++k) {
      torch::Tensor pushIds, pushRows, pullIds;
      if (torch::Tensor m = mask(rows.pushIds, k); m.defined()) {
        pushIds = rows.pushIds.masked_select(m);
        pushRows = rows.pushGrads.index_select(0, m.nonzero().flatten());
      }
      if (torch::Tensor m = mask(rows.pullIds, k); m.defined())
        pullIds = rows.pullIds.masked_select(m);
      const int64_t nPush = pushIds.defined() ? pushIds.numel() : 0;
      const int64_t nPull = pullIds.defined() ? pullIds.numel() : 0;
      int64_t* h = &headers[size_t(k) * kHeader];
      h[0] = kind;
      h[1] = clock;
      h[2] = nPush;
      h[3] = nPull;
      ops.push_back({true, h, kHeader, chorusInt64, k});
      bytes += double(kHeader * sizeof(int64_t));
      std::vector<torch::Tensor> idParts;
      if (nPush) idParts.push_back(pushIds);
      if (nPull) idParts.push_back(pullIds);
      if (!idParts.empty()) {
        ids[size_t(k)] = torch::cat(idParts).contiguous();
        ops.push_back({true, ids[size_t(k)].data_ptr(), size_t(nPush + nPull), chorusInt64, k});
        bytes += double((nPush + nPull) * 8);
      }
      if (kind == kPush) {
        torch::Tensor dense = sh_.gather(k, true);
        payload[size_t(k)] = nPush ? torch::cat({dense, pushRows.flatten()}) : dense.contiguous();
        if (payload[size_t(k)].numel() > 0) {
          ops.push_back(
              {true, payload[size_t(k)].data_ptr(), size_t(payload[size_t(k)].numel()), type_, k});
          bytes += double(payload[size_t(k)].numel()) * elemBytes_;
        }
      }
      reply[size_t(k)] =
          torch::empty({sh_.denseCount(k) + nPull * sh_.dim}, sh_.params[0].options());
      pulls[size_t(k)] = pullIds;
      if (reply[size_t(k)].numel() > 0) {
        ops.push_back(
            {false, reply[size_t(k)].data_ptr(), size_t(reply[size_t(k)].numel()), type_, k});
        bytes += double(reply[size_t(k)].numel()) * elemBytes_;
      }
    }
    guarded([&] { comm_.exchange(ops, "ps push/pull"); });
    if (count) traffic_->bytes += bytes;
    torch::NoGradGuard noGrad;
    for (int k = 0; k < K; ++k) {
      const int64_t dense = sh_.denseCount(k);
      sh_.scatter(k, reply[size_t(k)].slice(0, 0, dense));
      if (pulls[size_t(k)].defined() && pulls[size_t(k)].numel() > 0)
        sh_.params[size_t(sh_.table)].index_copy_(
            0, pulls[size_t(k)], reply[size_t(k)].slice(0, dense).view({-1, sh_.dim}));
    }
  }

  void colocatedStep() {
    const int me = comm_.rank(), n = roles_.servers;
    auto grads = std::vector<torch::Tensor>(size_t(n)), inbox = grads, pulled = grads;
    std::vector<Comm::P2p> ops;
    torch::Tensor& mine = opt_->params();
    for (int k = 0; k < n; ++k) {
      grads[size_t(k)] = sh_.gather(k, true).contiguous();
      if (k == me) continue;
      inbox[size_t(k)] = torch::empty_like(mine);
      ops.push_back(
          {true, grads[size_t(k)].data_ptr(), size_t(grads[size_t(k)].numel()), type_, k});
      ops.push_back({false, inbox[size_t(k)].data_ptr(), size_t(mine.numel()), type_, k});
      traffic_->bytes += double(grads[size_t(k)].numel() + mine.numel()) * elemBytes_;
    }
    inbox[size_t(me)] = grads[size_t(me)];
    comm_.exchange(ops, "ps colocated push");
    // The average in rank order (rank k's push zeroed by the test-only negative control).
    torch::Tensor sum = torch::zeros_like(mine);
    for (int k = 0; k < n; ++k)
      if (opts_.psTestDropPushFrom != k) sum.add_(inbox[size_t(k)]);
    sum.div_(double(n));
    opt_->step(sum);
    ops.clear();
    for (int k = 0; k < n; ++k) {
      pulled[size_t(k)] = k == me ? mine : torch::empty({sh_.denseCount(k)}, mine.options());
      if (k == me) continue;
      ops.push_back({true, mine.data_ptr(), size_t(mine.numel()), type_, k});
      ops.push_back(
          {false, pulled[size_t(k)].data_ptr(), size_t(pulled[size_t(k)].numel()), type_, k});
      traffic_->bytes += double(mine.numel() + pulled[size_t(k)].numel()) * elemBytes_;
    }
    comm_.exchange(ops, "ps colocated pull");
    for (int k = 0; k < n; ++k) sh_.scatter(k, pulled[size_t(k)]);
  }

  const Options& opts_;
  Comm& comm_;
  const PsRoles& roles_;
  Sharded& sh_;
  Traffic* traffic_;
  chorusDataType_t type_;
  double elemBytes_ = 0;
  std::unique_ptr<ShardOptimizer> opt_;  // colocated: this rank's shard
};

}  // namespace

Progress workPs(const Options& opts, Comm& world, Comm& workers, const PsRoles& roles,
                torch::nn::Sequential& model, Sharded& sh, Traffic* traffic) {
  const bool talk = roles.workerIndex == 0;  // worker 0 must survive (it prints)
  const bool hashed = sh.table >= 0;
  const torch::ScalarType dtype = opts.useDouble ? torch::kDouble : torch::kFloat;
  Split trainSet =
      toTensors(loadFashionMnist(opts.dataDir, "train", opts.trainLimit), opts.trainLimit, dtype);
  Split testSet;
  if (opts.eval)
    testSet =
        toTensors(loadFashionMnist(opts.dataDir, "t10k", opts.testLimit), opts.testLimit, dtype);
  const int64_t n = trainSet.images.size(0);
  DistributedSampler sampler(n, roles.workerIndex, roles.workers, /*shuffle=*/true, opts.seed);
  const int64_t stepsPerEpoch = sampler.samplesPerRank() / opts.batch;
  if (stepsPerEpoch == 0)
    throw std::invalid_argument("--batch " + std::to_string(opts.batch) + " exceeds the " +
                                std::to_string(sampler.samplesPerRank()) +
                                " samples of each worker");
  if (talk) {
    std::string mode = opts.psMode;
    if (mode == "ssp") mode += " S=" + std::to_string(opts.staleness);
    std::printf(
        "chorus-train: parameter server, model %s, %d server(s)%s, %d worker(s), mode "
        "%s, optimizer %s, batch %lld per worker, %lld steps/epoch, %s\n",
        opts.model.c_str(), roles.servers, roles.colocated ? " (colocated)" : "", roles.workers,
        mode.c_str(), opts.psOptimizer.c_str(), (long long)opts.batch, (long long)stepsPerEpoch,
        opts.useDouble ? "float64" : "float32");
  }
  Pusher pusher(opts, world, roles, sh, traffic);
  std::vector<int> alive;  // worker index of each rank of `workers` (it shrinks on a loss)
  for (int w = 0; w < roles.workers; ++w) alive.push_back(w);
  torch::manual_seed(opts.seed + 1000003ull * uint64_t(world.rank() + 1));
  // The table rows a batch touches (hashed model), sorted.
  auto touched = [&](const std::vector<int64_t>& order, int64_t step) {
    torch::Tensor idx = torch::from_blob(const_cast<int64_t*>(order.data()) + step * opts.batch,
                                         {opts.batch}, torch::kLong);
    torch::Tensor keys = hashedKeys(trainSet.images.index_select(0, idx), opts.hashBuckets);
    return std::get<0>(at::_unique2(keys.flatten(), /*sorted=*/true, /*return_inverse=*/false));
  };
  Progress progress;
  bool stop = false;
  for (int64_t epoch = 0; epoch < opts.epochs && !stop; ++epoch) {
    sampler.setEpoch(epoch);
    std::vector<int64_t> mine = sampler.indices(), next;
    if (hashed) {
      DistributedSampler after = sampler;
      after.setEpoch(epoch + 1);
      next = after.indices();
    }
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
      torch::Tensor out;
      Rows rows;
      if (hashed) {
        // Only the touched rows take part: a leaf copy of them gets the table's gradient.
        torch::Tensor keys = hashedKeys(x, opts.hashBuckets).flatten();
        auto unique = at::_unique2(keys, /*sorted=*/true, /*return_inverse=*/true);
        rows.pushIds = std::get<0>(unique);
        torch::Tensor local =
            sh.params[size_t(sh.table)].index_select(0, rows.pushIds).detach().requires_grad_();
        out = hashedForward(model, local, std::get<1>(unique), opts.batch);
        torch::Tensor loss = torch::nn::functional::cross_entropy(out, y);
        loss.backward();
        rows.pushGrads = local.grad();
        rows.pullIds = step + 1 < stepsPerEpoch ? touched(mine, step + 1) : touched(next, 0);
        lossSum += loss.item<double>() * double(opts.batch);
      } else {
        out = model->forward(x);
        torch::Tensor loss = torch::nn::functional::cross_entropy(out, y);
        loss.backward();
        lossSum += loss.item<double>() * double(opts.batch);
      }
      correct += out.argmax(1).eq(y).sum().item<double>();
      samples += double(opts.batch);
      const auto t = std::chrono::steady_clock::now();
      pusher.step(progress.steps, rows);
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
    try {
      workers.allReduce(sums.data_ptr(), 5, chorusFloat64, chorusSum);
    } catch (const std::exception& e) {
      // async/ssp: a worker died (its pushes simply stopped). The survivors agree on who,
      // shrink their group, tell the servers to stop waiting for it, and carry on; the dead
      // worker's share of the data is not trained on from here.
      if (opts.psMode == "sync" || roles.colocated) throw;
      std::vector<int> lost = workers.shrinkToSurvivors(nullptr, nullptr);
      if (lost.empty()) throw;
      std::vector<int> lostIndex;
      for (int r : lost) lostIndex.push_back(alive[size_t(r)]);
      for (int r = int(lost.size()); r-- > 0;) alive.erase(alive.begin() + lost[size_t(r)]);
      pusher.reportLost(lostIndex);
      if (workers.rank() == 0) {
        std::string list;
        for (int w : lostIndex) list += " " + std::to_string(w);
        std::fprintf(stderr, "chorus-train: lost worker(s)%s (%s); carrying on with %d\n",
                     list.c_str(), e.what(), workers.size());
      }
      sums = torch::tensor({lossSum, correct, samples, seconds, commSeconds}, torch::kDouble);
      workers.allReduce(sums.data_ptr(), 5, chorusFloat64, chorusSum);
    }
    std::string testAcc = "-";
    if (opts.eval) {
      pusher.pullAll();  // hashed: the whole current table (each step pulls only its rows)
      torch::NoGradGuard noGrad;
      model->eval();
      EvalResult r = hashed ? evaluate(
                                  [&](const torch::Tensor& xs) {
                                    return hashedLogits(model, xs, opts.hashBuckets);
                                  },
                                  testSet.images, testSet.labels, workers)
                            : evaluate(model, testSet.images, testSet.labels, workers);
      model->train();
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * r.accuracy());
      testAcc = buf;
    }
    if (steps > 0) progress.epochsDone = epoch + 1;
    const double total = sums[2].item<double>(), wall = sums[3].item<double>() / workers.size();
    const double comm = sums[4].item<double>() / workers.size();
    if (talk && total > 0)
      std::printf(
          "epoch %lld/%lld  loss %.4f  train-acc %.2f%%  test-acc %s  samples/s %.0f  "
          "push/pull %.2fs  compute %.2fs  (%lld steps)\n",
          (long long)epoch + 1, (long long)opts.epochs, sums[0].item<double>() / total,
          100.0 * sums[1].item<double>() / total, testAcc.c_str(), total / wall, comm, wall - comm,
          (long long)steps);
    std::fflush(stdout);
  }
  pusher.finish();
  return progress;
}

}  // namespace trainer
