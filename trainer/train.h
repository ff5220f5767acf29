// train.h — the training loop of chorus-train.
#pragma once

#include "trainer/comm.h"
#include "trainer/options.h"

namespace trainer {

/// Trains as `opts` says, printing from rank 0 only. Throws on errors.
void train(const Options& opts, Comm& comm);

}  // namespace trainer
