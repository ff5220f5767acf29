// topo_exchange.h — the communicator's view of the topology: exchange the detected host
// (src/topology) at init and build the graphs.
#pragma once

#include "chorus.h"

struct chorusComm;

namespace chorus {

/// Detects this rank's host and binding, allgathers one fixed-size record per rank through
/// the bootstrap, and fills comm->ring and comm->trees (logged at INFO, subsystem GRAPH).
/// Needs comm->peers (host hashes). Never fails on detection problems (flat fallback); fails
/// only if the exchange does.
chorusResult_t commTopoInit(chorusComm* comm);

}  // namespace chorus
