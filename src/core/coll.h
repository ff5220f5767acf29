// coll.h — the vocabulary of one call: which collective (Coll) and its resolved arguments
// (CollArgs). Shared by api, enqueue, algorithms, tuning, the flight recorder and the CUDA
// path, so none of them includes another just for these types.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chorus.h"
#include "kernels/reduce_spec.h"

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
constexpr int kNumColls = 11;
/// "all_reduce", "broadcast", ... ("?" for a value out of range).
const char* collName(Coll c);

/// One resolved call, validated by the API layer.
struct CollArgs {
  Coll coll;
  const void* sendbuf;
  void* recvbuf;
  size_t count;  // elements, as the user passed it
  chorusDataType_t type;
  kernels::ReduceSpec spec;
  int root;                // root, or peer for send/recv
  int op = -1;             // the chorusRedOp_t as passed, for reducing collectives (else -1)
  uint64_t frId = 0;       // this call's flight-recorder entry (0: none)
  int* anyPeer = nullptr;  // chorusRecvAnySource: root is -1 until a sender is found
};

}  // namespace chorus
