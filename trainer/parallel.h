// parallel.h — this rank's part of the model in a hybrid DP x PP x TP layout (layout.h).
//
// Every rank builds the whole model from the shared seed (so the parts start exactly as a
// single-rank run's model does), groups its children into layers (a layer starts at each
// child with parameters; parameter-free children such as ReLU, pooling and Flatten belong
// to the layer before them, leading ones to the first), and keeps:
//  - pipeline: the layers of its stage (splitStages over the layers' parameter counts, or
//    with --split time over their forward + backward time measured on rank 0);
//  - tensor parallel (Megatron): the first two Linear layers become a column-parallel /
//    row-parallel pair (MLP: 784->256 column, 256->128 row; CNN: the classifier's
//    ->128 column, 128->10 row). Column: this rank's rows of W and b, its input's gradient
//    all-reduced (sum) over the TP group in backward. Row: this rank's columns of W, the
//    partial products all-reduced (sum) in forward, b added once after. The pair is one
//    layer for the pipeline split, so stage boundaries never cut a sharded activation.
//    Other layers are replicated on the TP ranks (same input, same gradient).
// Children keep their index in the whole model as their name, so parameter names (e.g.
// "3.weight") are the single-rank model's; gatherFullState() puts the whole model back
// together for parameter dumps.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "trainer/comm.h"
#include "trainer/layout.h"
#include "trainer/options.h"

namespace trainer {

class ParallelLinearImpl : public torch::nn::Module {
 public:
  enum Kind { kColumn, kRow };
  /// This rank's shard of `full` (tpRank of tp ranks in `comm`).
  ParallelLinearImpl(Kind kind, const torch::nn::Linear& full, Comm* comm);
  torch::Tensor forward(const torch::Tensor& x);
  Kind kind() const { return kind_; }

  torch::Tensor weight, bias;

 private:
  Kind kind_;
  Comm* comm_;
};
TORCH_MODULE(ParallelLinear);

struct StageModel {
  torch::nn::Sequential full;   // the whole model as built from the seed (names, shapes)
  torch::nn::Sequential local;  // this rank's children (shared with `full` unless sharded)
  std::vector<int64_t> inShape, outShape;  // this stage's input / output, without batch dim
  std::vector<int64_t> logitsShape;        // the last stage's output, without batch dim
  std::string plan;                        // the split, for the start-up line
  size_t layers = 0;                       // layers of the model (after TP merging)
};

/// Builds this rank's part. `world`: for --split time (rank 0 measures, all split alike); `bnComm`:
/// sync batch norm's communicator (the DP group); `tpComm`: the tensor-parallel group (may be null
/// when tp == 1). Throws std::invalid_argument for layouts the model cannot take (more stages than
/// layers, a tensor-parallel width that does not divide the sharded layers).
StageModel buildStage(const Options& opts, const Layout& layout, Comm* world, Comm* bnComm,
                      Comm* tpComm, torch::ScalarType dtype);

/// The whole model's parameters and buffers (names and values as in a single-rank run),
/// assembled on every rank with one all-reduce (sum) over `world` per tensor: the rank of
/// DP replica 0 and TP rank 0 (or any TP rank, for a sharded tensor) that owns a tensor
/// writes it into zeros, everybody else adds zeros (exact).
void gatherFullState(const StageModel& stage, const Layout& layout, Comm& world,
                     std::vector<std::pair<std::string, torch::Tensor>>* params,
                     std::vector<std::pair<std::string, torch::Tensor>>* buffers);

}  // namespace trainer
