#include "src/core/coll.h"

namespace chorus {

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllGather: return "all_gather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::Scatter: return "scatter";
    case Coll::Gather: return "gather";
    case Coll::AllToAll: return "all_to_all";
    case Coll::Barrier: return "barrier";
    case Coll::Send: return "send";
    case Coll::Recv: return "recv";
  }
  return "?";
}

}  // namespace chorus
