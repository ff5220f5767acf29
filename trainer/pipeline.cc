#include "trainer/pipeline.h"

#include <algorithm>
#include <stdexcept>

#include "trainer/torch_chorus.h"

namespace trainer {

PipelineStage::PipelineStage(torch::nn::Sequential& model, const Layout& layout, Comm* pipe,
                             std::vector<int64_t> inShape, std::vector<int64_t> outShape,
                             std::vector<int64_t> logitsShape, torch::ScalarType dtype,
                             DistributedDataParallel& ddp, TraceWriter& trace, bool gpipe)
    : model_(model),
      layout_(layout),
      pipe_(pipe),
      inShape_(std::move(inShape)),
      outShape_(std::move(outShape)),
      logitsShape_(std::move(logitsShape)),
      dtype_(dtype),
      ddp_(ddp),
      trace_(trace),
      gpipe_(gpipe) {
  if (layout.pp > 1 && !pipe) throw std::logic_error("pipeline: no communicator for the stages");
}

torch::Tensor PipelineStage::buffer(const std::vector<int64_t>& shape, int64_t batch) const {
  std::vector<int64_t> s{batch};
  s.insert(s.end(), shape.begin(), shape.end());
  return torch::empty(s, torch::TensorOptions().dtype(dtype_));
}

torch::Tensor PipelineStage::exchange(const torch::Tensor& send, int sendTo, int recvFrom,
                                      const std::vector<int64_t>& recvShape, int64_t batch,
                                      const char* what) {
  if (sendTo < 0 && recvFrom < 0) return torch::Tensor();
  torch::Tensor out;
  torch::Tensor sendC;
  if (sendTo >= 0) sendC = send.contiguous();
  if (recvFrom >= 0) out = buffer(recvShape, batch);
  const double t0 = trace_.nowUs();
  pipe_->sendRecv(sendTo >= 0 ? sendC.data_ptr() : nullptr, sendTo >= 0 ? size_t(sendC.numel()) : 0,
                  sendTo, recvFrom >= 0 ? out.data_ptr() : nullptr,
                  recvFrom >= 0 ? size_t(out.numel()) : 0, recvFrom,
                  dtype_ == torch::kDouble ? chorusFloat64 : chorusFloat32, what);
  if (tracing_) {
    std::string args = "\"step\":" + std::to_string(step_);
    if (sendTo >= 0) args += ",\"to_stage\":" + std::to_string(sendTo);
    if (recvFrom >= 0) args += ",\"from_stage\":" + std::to_string(recvFrom);
    trace_.span(what, TraceWriter::kP2pLane, t0, trace_.nowUs(), args);
  }
  return out;
}

torch::Tensor PipelineStage::forwardMicro(int64_t m, const torch::Tensor& input,
                                          const torch::Tensor& y, double lossScale, Tally* tally) {
  Micro& mb = inFlight_[size_t(m)];
  mb.input = input;
  if (!layout_.firstStage()) mb.input.requires_grad_(true);
  const double t0 = trace_.nowUs();
  mb.output = model_->forward(mb.input);
  if (layout_.lastStage()) {
    torch::Tensor ym = y.narrow(0, m * microBatch_, microBatch_);
    torch::Tensor loss = torch::nn::functional::cross_entropy(mb.output, ym);
    mb.loss = loss * lossScale;
    tally->lossSum += loss.item<double>() * double(microBatch_);
    tally->correct += double(mb.output.argmax(1).eq(ym).sum().item<int64_t>());
    tally->samples += double(microBatch_);
  }
  if (tracing_)
    trace_.span("forward", TraceWriter::kMainLane, t0, trace_.nowUs(),
                "\"step\":" + std::to_string(step_) + ",\"micro\":" + std::to_string(m) +
                    ",\"stage\":" + std::to_string(layout_.stage));
  live_++;
  peakInFlight_ = std::max(peakInFlight_, live_);
  return layout_.lastStage() ? torch::Tensor() : mb.output.detach();
}

torch::Tensor PipelineStage::backwardMicro(int64_t m, const torch::Tensor& grad, bool sync) {
  Micro& mb = inFlight_[size_t(m)];
  ddp_.setSync(sync);
  const double t0 = trace_.nowUs();
  ddp_.prepareBackward();
  if (layout_.lastStage())
    mb.loss.backward();
  else
    mb.output.backward(grad);
  const double t1 = trace_.nowUs();
  ddp_.finishBackward();
  if (tracing_)
    trace_.span("backward", TraceWriter::kMainLane, t0, t1,
                "\"step\":" + std::to_string(step_) + ",\"micro\":" + std::to_string(m) +
                    ",\"stage\":" + std::to_string(layout_.stage));
  torch::Tensor inGrad;
  if (!layout_.firstStage()) inGrad = mb.input.grad();
  mb = Micro();
  live_--;
  return inGrad;
}

void PipelineStage::runRound(const torch::Tensor& x, const torch::Tensor& y, int64_t batch,
                             int64_t micro, double lossScale, bool syncLast, bool bufferSync,
                             bool tracing, int64_t step, Tally* tally) {
  if (micro < 1 || batch % micro != 0)
    throw std::invalid_argument("pipeline: " + std::to_string(micro) +
                                " micro-batches do not divide the batch of " +
                                std::to_string(batch));
  tracing_ = tracing;
  step_ = step;
  microBatch_ = batch / micro;
  // DDP's broadcast_buffers: replica 0's batch norm statistics, once per round, before the
  // first forward. Not before every micro-batch: the overwrite would bump the buffers'
  // versions under the autograd graphs of micro-batches still waiting for their backward.
  if (bufferSync) ddp_.syncBuffers();
  inFlight_.assign(size_t(micro), Micro());
  const int s = layout_.stage, S = layout_.pp;
  const int prev = layout_.firstStage() ? -1 : s - 1;
  const int next = layout_.lastStage() ? -1 : s + 1;
  auto input = [&](int64_t m) { return x.narrow(0, m * microBatch_, microBatch_); };
  auto sync = [&](int64_t m) { return syncLast && m == micro - 1; };

  if (gpipe_ || S == 1) {
    for (int64_t m = 0; m < micro; ++m) {
      torch::Tensor a = layout_.firstStage() ? input(m)
                                             : exchange(torch::Tensor(), -1, prev, inShape_,
                                                        microBatch_, "recv activation");
      torch::Tensor out = forwardMicro(m, a, y, lossScale, tally);
      exchange(out, next, -1, {}, 0, "send activation");
    }
    for (int64_t m = 0; m < micro; ++m) {
      torch::Tensor g =
          exchange(torch::Tensor(), -1, next, outShape_, microBatch_, "recv gradient");
      torch::Tensor gin = backwardMicro(m, g, sync(m));
      exchange(gin, prev, -1, {}, 0, "send gradient");
    }
    return;
  }
  // 1F1B.
  const int64_t warmup = std::min<int64_t>(S - 1 - s, micro);
  const int64_t remaining = micro - warmup;
  for (int64_t m = 0; m < warmup; ++m) {
    torch::Tensor a = layout_.firstStage() ? input(m)
                                           : exchange(torch::Tensor(), -1, prev, inShape_,
                                                      microBatch_, "recv activation");
    torch::Tensor out = forwardMicro(m, a, y, lossScale, tally);
    exchange(out, next, -1, {}, 0, "send activation");
  }
  torch::Tensor a;
  if (remaining > 0)
    a = layout_.firstStage()
            ? input(warmup)
            : exchange(torch::Tensor(), -1, prev, inShape_, microBatch_, "recv activation");
  for (int64_t i = 0; i < remaining; ++i) {
    const int64_t fwd = warmup + i, bwd = i;
    torch::Tensor out = forwardMicro(fwd, a, y, lossScale, tally);
    torch::Tensor g =
        exchange(out, next, next, outShape_, microBatch_, "send activation, recv gradient");
    torch::Tensor gin = backwardMicro(bwd, g, sync(bwd));
    if (i == remaining - 1) {
      exchange(gin, prev, -1, {}, 0, "send gradient");
    } else if (layout_.firstStage()) {
      a = input(fwd + 1);
    } else {
      a = exchange(gin, prev, prev, inShape_, microBatch_, "send gradient, recv activation");
    }
  }
  for (int64_t m = remaining; m < micro; ++m) {
    torch::Tensor g = exchange(torch::Tensor(), -1, next, outShape_, microBatch_, "recv gradient");
    torch::Tensor gin = backwardMicro(m, g, sync(m));
    exchange(gin, prev, -1, {}, 0, "send gradient");
  }
}

torch::Tensor PipelineStage::predict(const torch::Tensor& x, int64_t batch) {
  torch::NoGradGuard noGrad;
  const bool saved = tracing_;
  tracing_ = false;
  torch::Tensor a = layout_.firstStage() ? x
                                         : exchange(torch::Tensor(), -1, layout_.stage - 1,
                                                    inShape_, batch, "recv activation");
  torch::Tensor out = model_->forward(a);
  if (!layout_.lastStage()) exchange(out, layout_.stage + 1, -1, {}, 0, "send activation");
  tracing_ = saved;
  if (layout_.pp == 1) return out;
  torch::Tensor logits = layout_.lastStage() ? out.contiguous() : buffer(logitsShape_, batch);
  broadcastTensor(*pipe_, logits, layout_.pp - 1);
  return logits;
}

}  // namespace trainer
