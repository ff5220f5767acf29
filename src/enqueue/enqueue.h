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

/// A blocking call (NULL stream, no open group) runs now on the calling thread under the
/// communicator's exec lock: `prepare(ctx, &scratch, &args)` validates into scratch, or
/// points args at the last call's validation (chorusComm::lastCall, which that lock guards,
/// reused in place: the runner sets its frId), first; its failure is returned.
using PrepareFn = chorusResult_t (*)(const void* ctx, CollArgs* scratch, CollArgs** args);
/// The first such call takes the lock's bias for its thread (src/comm/exec_lock.h).
chorusResult_t runBlocking(chorusComm* comm, PrepareFn prepare, const void* ctx);
/// runBlocking for the thread that entered by the bias (enterBiased), without the lock.
chorusResult_t runBlockingBiased(chorusComm* comm, PrepareFn prepare, const void* ctx);

chorusResult_t groupStart();
chorusResult_t groupEnd();
/// True between chorusGroupStart and the matching End on this thread.
bool inGroup();

/// Runs a batch of operations of one communicator on the calling thread: collectives in
/// order, then all sends/receives together.
chorusResult_t executeBatch(chorusComm* comm, const std::vector<Op>& ops);

}  // namespace chorus
