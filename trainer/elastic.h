// elastic.h — --elastic: keep training when a data-parallel rank dies.
//
// When a step's collective fails, the survivors agree on the lost ranks
// (chorusCommFailedRanks), shrink the communicator to themselves (chorusCommShrink with
// CHORUS_SHRINK_ABORT: no restart, no new rendezvous), take rank 0's model, optimizer
// momentum and position (it is the lowest survivor; every survivor had its state after the
// last step they all completed), and go on from that step: the samples of the epoch that no
// completed step consumed are split among the survivors the way DistributedSampler splits
// an epoch (strided), and later epochs use the smaller world. The per-rank batch stays, so
// the global batch shrinks to batch x accum x survivors and the learning rate is scaled by
// survivors / old world (the linear scaling rule), keeping the step size per sample.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/comm.h"
#include "trainer/ddp.h"

namespace trainer {

struct ElasticPosition {
  int64_t consumed = 0;  // samples of this epoch's permutation that completed steps used
  int64_t steps = 0;     // optimizer steps in total
  int64_t microSteps = 0;
};

/// After a failed step (`why`, noticed `waitedSeconds` after the step began): shrinks
/// `comm` to the survivors, makes every survivor's model, momentum and position rank 0's,
/// rescales the learning rate and logs what happened (rank 0). Throws when no rank was lost
/// (the failure was something else) or the shrink itself fails.
void elasticRecover(Comm& comm, DistributedDataParallel& ddp, torch::optim::SGD& optimizer,
                    ElasticPosition* pos, const std::string& why, double waitedSeconds);

/// This rank's share of what is left of an epoch: `order` is the epoch's permutation (the
/// padded order of any world size; only its first `datasetSize` entries count), `consumed`
/// of them are done; the rest is dealt out strided over `world` ranks, cut to an equal
/// length on every rank.
std::vector<int64_t> elasticShard(const std::vector<int64_t>& order, int64_t datasetSize,
                                  int64_t consumed, int rank, int world);

}  // namespace trainer
