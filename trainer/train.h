// train.h — the training loop of chorus-train.
#pragma once

#include "comm.h"
#include "options.h"

namespace trainer {

/// Trains as `opts` says, printing from rank 0 only. Throws on errors.
void train(const Options& opts, Comm& comm);

}  // namespace trainer
