// state_io.h — checkpoints and parameter dumps.
//
// A checkpoint holds the model (parameters and buffers), the optimizer (momentum), the
// number of finished epochs and optimizer steps, and the layout's pipeline stages and
// tensor-parallel width. Saving: barrier, the ranks of data-parallel replica 0 write their
// shard (stage s, TP rank t) to a temporary file and rename it (a crash never leaves half a
// checkpoint), barrier, so no rank reads or overwrites it early. Shard (0, 0), written by
// rank 0, is FILE itself; the others are FILE.stage<s>.tp<t>. With one stage and no tensor
// parallelism that is rank 0 writing FILE, as in plain data parallel. Loading: every rank
// reads FILE's layout after a barrier and refuses one that differs from its own (on every
// rank, at start), then reads its shard. The number of replicas may change.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "trainer/comm.h"
#include "trainer/layout.h"

namespace trainer {

struct Progress {
  int64_t epochsDone = 0;
  int64_t steps = 0;       // optimizer steps
  int64_t microSteps = 0;  // forward/backward passes
};

void saveCheckpoint(const std::string& path, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer, const Progress& progress, Comm& comm,
                    const Layout& layout);
Progress loadCheckpoint(const std::string& path, torch::nn::Module& model,
                        torch::optim::Optimizer& optimizer, Comm& comm, const Layout& layout);

/// Text dump of every parameter and buffer (name, size, values with 17 digits) and of the
/// counters, for the equivalence tests (tests/trainer/compare_dumps.py).
void dumpParams(const std::string& path, torch::nn::Module& model, const Progress& progress,
                uint64_t allReduceCalls, size_t buckets);

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;
/// The same from lists (the whole model gathered from a pipeline / tensor-parallel layout),
/// with extra counters (name, value) after the standard ones.
void dumpTensors(const std::string& path, const NamedTensors& params, const NamedTensors& buffers,
                 const Progress& progress, uint64_t allReduceCalls, size_t buckets,
                 const std::vector<std::pair<std::string, int64_t>>& extraCounters);

}  // namespace trainer
