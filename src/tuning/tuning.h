// tuning.h — picks the algorithm, protocol and piece size for one call.
//
// Today a threshold model over message size, tuned by measurement on one host (see
// docs/PERF.md); CHORUS_ALGO / CHORUS_PROTO override it. The cost model of later work
// replaces choosePlan's body, not its callers.
#pragma once

#include <cstddef>

#include "chorus.h"

struct chorusComm;

namespace chorus {

enum class Coll : int {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  Scatter,
  Gather,
  AllToAll,
  Barrier,
  Send,
  Recv,
};
const char* collName(Coll c);

enum class Algo : int { Direct, Ring, Tree };
enum class Proto : int { LL, Simple };
const char* algoName(Algo a);

struct Plan {
  Algo algo;
  Proto proto;
  size_t pieceBytes;  // bytes moved per primitive step (<= slot size)
  bool streaming;     // write the user's output with non-temporal stores
};

/// `bytes` is the size of the whole result buffer of the call.
Plan choosePlan(const chorusComm* comm, Coll coll, size_t bytes);

}  // namespace chorus
