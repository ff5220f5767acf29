#include "trainer/ddp.h"

#include <stdexcept>

#include "trainer/bucket_plan.h"
#include "trainer/torch_chorus.h"

namespace trainer {

DistributedDataParallel::DistributedDataParallel(torch::nn::Module& module, Comm& comm,
                                                 TraceWriter& trace, size_t bucketBytes,
                                                 size_t firstBucketBytes)
    : module_(module), comm_(comm), trace_(trace) {
  for (auto& item : module.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    names_.push_back(item.key());
    params_.push_back(item.value());
  }
  if (params_.empty()) throw std::invalid_argument("DDP: the model has no trainable parameters");
  // Backward produces gradients roughly last layer first: plan buckets in that order.
  std::vector<size_t> bytes;
  for (size_t i = params_.size(); i-- > 0;)
    bytes.push_back(size_t(params_[i].numel()) * params_[i].element_size());
  auto plan = planBuckets(bytes, firstBucketBytes, bucketBytes);
  bucketOf_.assign(params_.size(), 0);
  offsetOf_.assign(params_.size(), 0);
  for (auto& positions : plan) {
    Bucket b;
    int64_t numel = 0;
    for (size_t pos : positions) {
      size_t p = params_.size() - 1 - pos;
      if (params_[p].scalar_type() != params_[params_.size() - 1].scalar_type())
        throw std::invalid_argument("DDP: all parameters must have one type");
      bucketOf_[p] = buckets_.size();
      offsetOf_[p] = size_t(numel);
      numel += params_[p].numel();
      b.params.push_back(p);
    }
    b.flat = torch::zeros({numel}, params_[b.params[0]].options().requires_grad(false));
    buckets_.push_back(std::move(b));
  }
  for (size_t i = 0; i < params_.size(); ++i)
    params_[i].register_hook([this, i](torch::Tensor grad) { onGradient(i, grad); });
}

void DistributedDataParallel::broadcastState() {
  torch::NoGradGuard noGrad;
  for (auto& p : module_.parameters()) broadcastTensor(comm_, p, 0);
  for (auto& b : module_.buffers()) broadcastTensor(comm_, b, 0);
}

void DistributedDataParallel::syncBuffers() {
  if (comm_.size() == 1) return;
  torch::NoGradGuard noGrad;
  // One broadcast for all floating-point buffers; integer ones (batch counters) advance
  // identically on every rank.
  std::vector<torch::Tensor> floats;
  for (auto& b : module_.buffers())
    if (b.is_floating_point()) floats.push_back(b);
  if (floats.empty()) return;
  std::vector<torch::Tensor> flatParts;
  for (auto& b : floats) flatParts.push_back(b.reshape(-1));
  torch::Tensor flat = torch::cat(flatParts);
  broadcastTensor(comm_, flat, 0);
  int64_t at = 0;
  for (auto& b : floats) {
    b.copy_(flat.narrow(0, at, b.numel()).view_as(b));
    at += b.numel();
  }
}

void DistributedDataParallel::prepareBackward() {
  for (auto& b : buckets_) b.pending = b.params.size();
  nextLaunch_ = 0;
  inBackward_ = true;
}

void DistributedDataParallel::onGradient(size_t i, const torch::Tensor& grad) {
  if (!sync_ || !inBackward_) return;
  Bucket& b = buckets_[bucketOf_[i]];
  torch::NoGradGuard noGrad;
  torch::Tensor slot = b.flat.narrow(0, int64_t(offsetOf_[i]), grad.numel());
  // The hook runs before autograd adds `grad` into .grad, so the gradient to reduce is
  // what earlier (no_sync) micro-steps accumulated plus this one.
  const torch::Tensor& accumulated = params_[i].grad();
  if (accumulated.defined())
    torch::add_out(slot, accumulated.reshape(-1), grad.reshape(-1));
  else
    slot.copy_(grad.reshape(-1));
  if (b.pending == 0) throw std::logic_error("DDP: gradient of " + names_[i] + " seen twice");
  if (--b.pending == 0 && overlap_) launchReadyBuckets();
  if (overlap_) noteFinished(false);
}

void DistributedDataParallel::launchReadyBuckets() {
  while (nextLaunch_ < buckets_.size() && buckets_[nextLaunch_].pending == 0) {
    Bucket& b = buckets_[nextLaunch_];
    b.launchUs = trace_.nowUs();
    b.inFlight = true;
    comm_.allReduceAsync(b.flat.data_ptr(), size_t(b.flat.numel()), chorusTypeOf(b.flat),
                         chorusAvg);
    ++nextLaunch_;
  }
}

// The stream runs in order, so "idle" means every launched bucket is done. The trace spans
// end when that was observed (an upper bound on the all-reduce's end).
void DistributedDataParallel::noteFinished(bool waited) {
  bool any = false;
  for (auto& b : buckets_) any = any || b.inFlight;
  if (!any || (!waited && !comm_.idle())) return;
  double now = trace_.nowUs();
  for (size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    if (!b.inFlight) continue;
    b.inFlight = false;
    if (tracing_)
      trace_.span("allreduce bucket " + std::to_string(k), TraceWriter::kCommLane, b.launchUs, now,
                  "\"bucket\":" + std::to_string(k) +
                      ",\"bytes\":" + std::to_string(b.flat.numel() * b.flat.element_size()));
  }
}

void DistributedDataParallel::finishBackward() {
  inBackward_ = false;
  if (!sync_) return;
  if (!overlap_) launchReadyBuckets();
  if (nextLaunch_ != buckets_.size()) {
    for (auto& b : buckets_)
      if (b.pending > 0)
        for (size_t p : b.params)
          if (!params_[p].grad().defined())
            throw std::runtime_error("DDP: parameter " + names_[p] +
                                     " got no gradient (unused parameters are not supported)");
    throw std::runtime_error("DDP: backward finished with buckets never complete");
  }
  double start = trace_.nowUs();
  comm_.wait();
  noteFinished(true);
  if (tracing_) trace_.span("wait for all-reduce", TraceWriter::kMainLane, start, trace_.nowUs());
  torch::NoGradGuard noGrad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Bucket& b = buckets_[bucketOf_[i]];
    params_[i].mutable_grad().copy_(
        b.flat.narrow(0, int64_t(offsetOf_[i]), params_[i].numel()).view_as(params_[i]));
  }
}

}  // namespace trainer
