// models.h — the two models chorus-train knows.
//
// mlp: 784-256-128-10 with ReLU. cnn: two 3x3 convolutions (width and 2 x width channels,
// default 32 and 64), each with batch norm, ReLU and 2x2 max pooling, then
// (2 x width x 7 x 7)-128-10. With syncBn the CNN's batch norms take their statistics over
// all ranks (sync_batch_norm.h).
#pragma once

#include <torch/torch.h>

#include "trainer/comm.h"

namespace trainer {

torch::nn::Sequential makeModel(const std::string& name, int64_t width, bool syncBn, Comm* comm);

}  // namespace trainer
