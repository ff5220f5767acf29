// layout.h — where a rank sits in a hybrid data x pipeline x tensor parallel job.
//
// world = dp x pp x tp. Rank r has coordinates (dpRank, stage, tpRank) with
// r = (dpRank x pp + stage) x tp + tpRank: the ranks of one tensor-parallel group are
// neighbours, then the stages of one pipeline, then the data-parallel replicas. No torch
// here (unit-tested in tests/trainer/trainer_core_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

struct Layout {
  int world = 1, rank = 0;
  int dp = 1, pp = 1, tp = 1;
  int dpRank = 0, stage = 0, tpRank = 0;

  bool pureDataParallel() const { return pp == 1 && tp == 1; }
  bool firstStage() const { return stage == 0; }
  bool lastStage() const { return stage == pp - 1; }
  /// "dp 2 x pp 2 x tp 1".
  std::string describe() const;
};

/// The layout of `rank` in a world of `world` ranks with `pp` stages and `tp` tensor-parallel
/// ranks. Throws std::invalid_argument when pp x tp does not divide the world size.
Layout makeLayout(int world, int rank, int pp, int tp);

/// Splits layers (with costs, e.g. parameter counts) into `stages` contiguous, non-empty
/// groups, minimizing the largest group's cost (ties: the earliest split). Returns the
/// first layer of each stage plus the layer count at the end (stages + 1 entries). Throws
/// std::invalid_argument when there are more stages than layers.
std::vector<size_t> splitStages(const std::vector<int64_t>& layerCost, int stages);

}  // namespace trainer
