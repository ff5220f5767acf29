#include "trainer/layout.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace trainer {

std::string Layout::describe() const {
  return "dp " + std::to_string(dp) + " x pp " + std::to_string(pp) + " x tp " + std::to_string(tp);
}

Layout makeLayout(int world, int rank, int pp, int tp) {
  if (pp < 1 || tp < 1 || world % (pp * tp) != 0)
    throw std::invalid_argument("layout: --pipeline-stages " + std::to_string(pp) +
                                " x --tensor-parallel " + std::to_string(tp) + " = " +
                                std::to_string(pp * tp) + " does not divide the world size " +
                                std::to_string(world));
  Layout l;
  l.world = world;
  l.rank = rank;
  l.pp = pp;
  l.tp = tp;
  l.dp = world / (pp * tp);
  l.tpRank = rank % tp;
  l.stage = (rank / tp) % pp;
  l.dpRank = rank / (tp * pp);
  return l;
}

std::vector<size_t> splitStages(const std::vector<int64_t>& layerCost, int stages) {
  const size_t n = layerCost.size();
  if (stages < 1 || size_t(stages) > n)
    throw std::invalid_argument("layout: " + std::to_string(stages) +
                                " pipeline stages but the model has only " + std::to_string(n) +
                                " layers (each stage needs at least one)");
  std::vector<int64_t> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + layerCost[i];
  const int64_t kInf = std::numeric_limits<int64_t>::max();
  // best[s][i]: the smallest possible maximum cost of the first i layers in s stages.
  std::vector<std::vector<int64_t>> best(size_t(stages) + 1, std::vector<int64_t>(n + 1, kInf));
  std::vector<std::vector<size_t>> cut(size_t(stages) + 1, std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t s = 1; s <= size_t(stages); ++s)
    for (size_t i = s; i <= n; ++i)
      for (size_t j = s - 1; j < i; ++j) {
        if (best[s - 1][j] == kInf) continue;
        int64_t cost = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (cost < best[s][i]) {
          best[s][i] = cost;
          cut[s][i] = j;
        }
      }
  std::vector<size_t> starts(size_t(stages) + 1);
  starts[size_t(stages)] = n;
  for (size_t s = size_t(stages), i = n; s > 0; --s) {
    i = cut[s][i];
    starts[s - 1] = i;
  }
  return starts;
}

}  // namespace trainer
