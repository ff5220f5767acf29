// ordered_hosts.h — reproducible mode's all-reduce schedules across hosts (ordered_hosts.cc),
// run by orderedRun (ordered.cc) for the plans orderedPlan marks viaLeaders or chain.
#pragma once

#include "src/algorithms/algorithms.h"

namespace chorus {

class Prims;

/// Small and medium calls: every rank's input to its host's leader, the leaders swap their
/// hosts' raw inputs, every leader adds all n in rank order, and hands the sum back.
/// Where the hosts hold contiguous runs of ranks, host 0's leader sends its host's partial
/// sum instead of its ranks' inputs; with plan.chain there, the leaders chain partial sums.
chorusResult_t orderedAllReduceLeaders(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                       Prims& p);

/// Larger calls where the leaders' rails do not fit the layout (orderedRailsWidth): partial
/// sums up a chain in rank order, the sum back down, overlapped.
chorusResult_t orderedAllReduceChain(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p);

}  // namespace chorus
