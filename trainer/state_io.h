// state_io.h — checkpoints and parameter dumps.
//
// A checkpoint holds the model (parameters and buffers), the optimizer (momentum), the
// number of finished epochs and optimizer steps. Saving: barrier, rank 0 writes to a
// temporary file and renames it (a crash never leaves half a checkpoint), barrier, so no
// rank reads or overwrites it early. Loading: every rank reads it after a barrier.
#pragma once

#include <torch/torch.h>

#include <string>

#include "trainer/comm.h"

namespace trainer {

struct Progress {
  int64_t epochsDone = 0;
  int64_t steps = 0;       // optimizer steps
  int64_t microSteps = 0;  // forward/backward passes
};

void saveCheckpoint(const std::string& path, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer, const Progress& progress, Comm& comm);
Progress loadCheckpoint(const std::string& path, torch::nn::Module& model,
                        torch::optim::Optimizer& optimizer, Comm& comm);

/// Text dump of every parameter and buffer (name, size, values with 17 digits) and of the
/// counters, for the equivalence tests (tests/trainer/compare_dumps.py).
void dumpParams(const std::string& path, torch::nn::Module& model, const Progress& progress,
                uint64_t allReduceCalls, size_t buckets);

}  // namespace trainer
