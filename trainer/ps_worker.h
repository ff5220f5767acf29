// ps_worker.h — the worker side of parameter-server training (ps_train.h).
#pragma once

#include <torch/torch.h>

#include "trainer/comm.h"
#include "trainer/options.h"
#include "trainer/ps_shards.h"
#include "trainer/state_io.h"

namespace trainer {

/// Trains this worker's part of every epoch: forward/backward on its sampler's batches,
/// push/pull through the servers (`world`), epoch lines and evaluation over `workers`
/// (printed by worker 0). Tells the servers when it is done. Returns its progress.
Progress workPs(const Options& opts, Comm& world, Comm& workers, const PsRoles& roles,
                torch::nn::Sequential& model, Sharded& sh, Traffic* traffic);

}  // namespace trainer
