// ordered_rails.h — reproducible mode's all-reduce across hosts of equal, contiguous runs of
// ranks (ordered_rails.cc), run by orderedRun (ordered.cc) for the plans orderedPlan marks
// chain.
#pragma once

#include "src/algorithms/algorithms.h"

namespace chorus {

class Prims;

/// k chains of host leaders side by side, one per k-th of the call: chain j adds the ranks'
/// pieces of part j in rank order on the j-th rank of each host, the sum comes back down it.
chorusResult_t orderedAllReduceRails(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p, int k);

}  // namespace chorus
