// enqueue.h — where a validated call goes: into the current group, onto a stream, or
// straight to the algorithms on the calling thread.
#pragma once

#include <vector>

#include "src/core/coll.h"
#include "chorus.h"

namespace chorus {

struct Op {
  chorusComm* comm;
  CollArgs args;
  chorusStream_t stream;
};

/// Runs now (NULL stream), queues on the stream, or records into the open group.
chorusResult_t enqueueOp(const Op& op);

chorusResult_t groupStart();
chorusResult_t groupEnd();
/// True between chorusGroupStart and the matching End on this thread.
bool inGroup();

/// Runs a batch of operations of one communicator on the calling thread: collectives in
/// order, then all sends/receives together.
chorusResult_t executeBatch(chorusComm* comm, const std::vector<Op>& ops);

}  // namespace chorus
