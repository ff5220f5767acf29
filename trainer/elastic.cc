#include "trainer/elastic.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "trainer/torch_chorus.h"

namespace trainer {

// Declared in comm.h; here because only --elastic uses it.
std::vector<int> Comm::shrinkToSurvivors(double* agreeSeconds, double* shrinkSeconds) {
  using Clock = std::chrono::steady_clock;
  chorusStreamSynchronize(stream_);  // drain what was queued (it failed; the error is known)
  std::vector<int> failed(static_cast<size_t>(size_));
  int count = 0;
  auto t0 = Clock::now();
  check(chorusCommFailedRanks(comm_, failed.data(), size_, &count), "chorusCommFailedRanks");
  if (agreeSeconds) *agreeSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  failed.resize(static_cast<size_t>(count));
  if (count == 0) return failed;
  chorusComm_t next = nullptr;
  t0 = Clock::now();
  check(chorusCommShrink(comm_, failed.data(), count, &next, nullptr, CHORUS_SHRINK_ABORT),
        "chorusCommShrink");
  if (shrinkSeconds) *shrinkSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  chorusCommDestroy(comm_);
  comm_ = next;
  check(chorusCommUserRank(comm_, &rank_), "chorusCommUserRank");
  check(chorusCommCount(comm_, &size_), "chorusCommCount");
  return failed;
}

namespace {

std::string listText(const std::vector<int>& v) {
  std::string s;
  for (int r : v) s += (s.empty() ? "" : ",") + std::to_string(r);
  return "{" + s + "}";
}

}  // namespace

void elasticRecover(Comm& comm, DistributedDataParallel& ddp, torch::optim::SGD& optimizer,
                    ElasticPosition* pos, const std::string& why, double waitedSeconds) {
  const int oldWorld = comm.size();
  double agreeSeconds = 0, shrinkSeconds = 0;
  std::vector<int> lost = comm.shrinkToSurvivors(&agreeSeconds, &shrinkSeconds);
  if (lost.empty())
    throw std::runtime_error("--elastic: a collective failed but every rank is alive: " + why);
  // Rank 0's position, model and momentum everywhere (a survivor may have finished one
  // step more than another if the loss came at the very end of an all-reduce).
  torch::Tensor p = torch::tensor({pos->consumed, pos->steps, pos->microSteps}, torch::kLong);
  broadcastTensor(comm, p, 0);
  pos->consumed = p[0].item<int64_t>();
  pos->steps = p[1].item<int64_t>();
  pos->microSteps = p[2].item<int64_t>();
  ddp.broadcastState();
  optimizer.zero_grad();
  for (auto& group : optimizer.param_groups()) {
    for (auto& param : group.params()) {
      auto& state = optimizer.state();
      const std::string key = c10::guts::to_string(param.unsafeGetTensorImpl());  // torch's key
      auto it = state.find(key);
      torch::Tensor has = torch::tensor({it != state.end() ? 1.0 : 0.0}, torch::kDouble);
      broadcastTensor(comm, has, 0);
      if (has.item<double>() == 0) {
        if (it != state.end()) state.erase(it);  // rank 0 has none yet: neither may we
        continue;
      }
      if (it == state.end()) {
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(torch::zeros_like(param));
        it = state.emplace(key, std::move(s)).first;
      }
      auto& sgd = static_cast<torch::optim::SGDParamState&>(*it->second);
      torch::Tensor buf = sgd.momentum_buffer().contiguous();
      broadcastTensor(comm, buf, 0);
      sgd.momentum_buffer(buf);
    }
    auto& opts = static_cast<torch::optim::SGDOptions&>(group.options());
    opts.lr(opts.lr() * double(comm.size()) / double(oldWorld));
  }
  if (comm.rank() == 0) {
    std::printf(
        "elastic: lost rank(s) %s of %d, noticed %.2f s into step %lld (%s); survivors "
        "agreed in %.3f s; shrink to %d rank(s) took %.3f s; going on from step %lld with "
        "%lld samples of the epoch done, learning rate x %d/%d\n",
        listText(lost).c_str(), oldWorld, waitedSeconds, (long long)pos->steps, why.c_str(),
        agreeSeconds, comm.size(), shrinkSeconds, (long long)pos->steps, (long long)pos->consumed,
        comm.size(), oldWorld);
    std::fflush(stdout);
  }
}

std::vector<int64_t> elasticShard(const std::vector<int64_t>& order, int64_t datasetSize,
                                  int64_t consumed, int rank, int world) {
  const int64_t end = std::min<int64_t>(datasetSize, int64_t(order.size()));
  const int64_t left = std::max<int64_t>(0, end - consumed);
  const int64_t each = left / world;
  std::vector<int64_t> mine;
  mine.reserve(size_t(each));
  for (int64_t i = 0; i < each; ++i) mine.push_back(order[size_t(consumed + i * world + rank)]);
  return mine;
}

}  // namespace trainer
