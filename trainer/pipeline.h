// pipeline.h — one stage of a pipeline-parallel model: runs its micro-batches forward and
// backward in GPipe or 1F1B order, moving activations to the next stage and gradients to
// the previous one with chorusSend/chorusRecv (Comm::sendRecv, one group per exchange).
//
// GPipe: all M forwards, then all M backwards; every stage holds M micro-batches'
// activations at its peak. 1F1B (PipeDream-flush, as in Megatron-LM): stage s runs
// min(S-1-s, M) warm-up forwards, then alternates one forward and one backward, then
// drains; it holds at most min(S-s, M). In the steady phase a stage's "send activation,
// receive gradient" (and "send gradient, receive activation") is one group, matched by
// the neighbour's mirror-image group, so no send ever waits on a send: no deadlock for
// any S and M. Backwards run in micro-batch order on both schedules, so the last one
// (micro-batch M-1) is where DDP all-reduces the accumulated gradients.
//
// With one stage this is plain (micro-batched) training: forward, loss, backward.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "trainer/comm.h"
#include "trainer/ddp.h"
#include "trainer/layout.h"
#include "trainer/trace.h"

namespace trainer {

class PipelineStage {
 public:
  /// `pipe`: the stages of this replica (rank = stage); null with one stage.
  PipelineStage(torch::nn::Sequential& model, const Layout& layout, Comm* pipe,
                std::vector<int64_t> inShape, std::vector<int64_t> outShape,
                std::vector<int64_t> logitsShape, torch::ScalarType dtype,
                DistributedDataParallel& ddp, TraceWriter& trace, bool gpipe);

  struct Tally {
    double lossSum = 0, correct = 0, samples = 0;  // last stage only
  };
  /// One round of `micro` micro-batches of the replica's `batch` samples: `x` (first stage)
  /// and `y` (last stage) hold all of them. Losses are scaled by `lossScale`; DDP synchronizes
  /// on the round's last backward when `syncLast`. Adds the last stage's loss to `tally`.
  void runRound(const torch::Tensor& x, const torch::Tensor& y, int64_t batch, int64_t micro,
                double lossScale, bool syncLast, bool bufferSync, bool tracing, int64_t step,
                Tally* tally);

  /// Forward only (evaluation): the last stage's logits on every stage of the replica
  /// (broadcast from the last stage), for a batch of `batch` samples (x: first stage).
  torch::Tensor predict(const torch::Tensor& x, int64_t batch);

  /// The most micro-batches whose activations this stage held at once.
  int64_t peakInFlight() const { return peakInFlight_; }

 private:
  struct Micro {
    torch::Tensor input;   // received activation (requires grad) or the data slice
    torch::Tensor output;  // this stage's output (logits on the last stage)
    torch::Tensor loss;    // last stage: scaled loss
  };
  torch::Tensor forwardMicro(int64_t m, const torch::Tensor& input, const torch::Tensor& y,
                             double lossScale, Tally* tally);
  torch::Tensor backwardMicro(int64_t m, const torch::Tensor& grad, bool sync);
  torch::Tensor buffer(const std::vector<int64_t>& shape, int64_t batch) const;
  /// One group with this stage's neighbours; returns what it received (or undefined).
  torch::Tensor exchange(const torch::Tensor& send, int sendTo, int recvFrom,
                         const std::vector<int64_t>& recvShape, int64_t batch, const char* what);

  torch::nn::Sequential& model_;
  Layout layout_;
  Comm* pipe_;
  std::vector<int64_t> inShape_, outShape_, logitsShape_;
  torch::ScalarType dtype_;
  DistributedDataParallel& ddp_;
  TraceWriter& trace_;
  bool gpipe_;
  bool tracing_ = false;
  int64_t step_ = 0;
  int64_t microBatch_ = 0;
  std::vector<Micro> inFlight_;  // indexed by micro-batch within the round
  int64_t live_ = 0, peakInFlight_ = 0;
};

}  // namespace trainer
