#include "src/enqueue/enqueue.h"

#include <memory>
#include <thread>

#include "src/algorithms/algorithms.h"
#include "src/comm/comm.h"
#include "src/comm/exec_lock.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/enqueue/stream.h"

namespace chorus {
namespace {

// The open group of this thread. Thread-local by design (as in NCCL): a group is a
// bracket around calls made by one thread.
struct GroupState {
  int depth = 0;
  std::vector<Op> ops;
};
thread_local GroupState tlsGroup;

void recordAsync(chorusComm* comm, chorusResult_t r) {
  if (r == chorusSuccess) return;
  int expected = chorusSuccess;
  comm->asyncError.compare_exchange_strong(expected, r);
  commRecordError(comm, r);
}

// Runs the per-communicator batches, in parallel when there are several (one thread may
// drive every rank of a process, and each rank's batch blocks until its peers progress).
chorusResult_t runBatches(std::vector<std::pair<chorusComm*, std::vector<Op>>>& batches,
                          bool async) {
  if (batches.size() == 1) {
    chorusResult_t r = executeBatch(batches[0].first, batches[0].second);
    if (async)
      recordAsync(batches[0].first, r);
    else
      commRecordError(batches[0].first, r);  // chorusGetLastError(comm) tells why
    return r;
  }
  std::vector<chorusResult_t> results(batches.size(), chorusSuccess);
  std::vector<std::string> details(batches.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < batches.size(); ++i) {
    threads.emplace_back([&, i] {
      setLogRank(batches[i].first->rank);
      results[i] = executeBatch(batches[i].first, batches[i].second);
      if (results[i] != chorusSuccess) {
        details[i] = threadLastError();
        commRecordError(batches[i].first, results[i]);
      }
    });
  }
  results[0] = executeBatch(batches[0].first, batches[0].second);
  if (results[0] != chorusSuccess) commRecordError(batches[0].first, results[0]);
  for (auto& t : threads) t.join();
  chorusResult_t first = chorusSuccess;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (async) recordAsync(batches[i].first, results[i]);
    if (first == chorusSuccess && results[i] != chorusSuccess) {
      first = results[i];
      if (i > 0) fail(first, __FILE__, __LINE__, "%s", details[i].c_str());
    }
  }
  return first;
}

using Batches = std::vector<std::pair<chorusComm*, std::vector<Op>>>;

// The ops of a group, one batch per communicator, in first-seen order.
void groupByComm(const std::vector<Op>& ops, Batches* batches) {
  for (const Op& op : ops) {
    auto it = batches->begin();
    for (; it != batches->end(); ++it)
      if (it->first == op.comm) break;
    if (it == batches->end()) {
      batches->push_back({op.comm, {}});
      it = batches->end() - 1;
    }
    it->second.push_back(op);
  }
}

}  // namespace

bool inGroup() { return tlsGroup.depth > 0; }

chorusResult_t executeBatch(chorusComm* comm, const std::vector<Op>& ops) {
  const std::unique_lock<std::mutex> lock = lockExec(comm);
  if (comm->abortFlag.load(std::memory_order_relaxed)) {
    for (const Op& op : ops) comm->flight->finish(op.args.frId, chorusAborted);
    CHORUS_FAIL(chorusAborted, "rank %d: communicator was aborted", comm->rank);
  }
  setLogRank(comm->rank);
  std::vector<CollArgs> p2p;
  for (const Op& op : ops) {
    if (op.args.coll == Coll::Send || op.args.coll == Coll::Recv) {
      p2p.push_back(op.args);
      continue;
    }
    CHORUS_CHECK(runCollective(comm, op.args));
  }
  if (!p2p.empty()) CHORUS_CHECK(runP2pBatch(comm, p2p.data(), static_cast<int>(p2p.size())));
  return chorusSuccess;
}

namespace {

// Under comm's exec lock (execMutex or its bias), on the calling thread: the call runs now
// unless the communicator was aborted (then its flight recorder entry is closed as aborted).
chorusResult_t runUnlessAborted(chorusComm* comm, const CollArgs& args) {
  if (comm->abortFlag.load(std::memory_order_relaxed)) {
    comm->flight->finish(args.frId, chorusAborted);
    CHORUS_FAIL(chorusAborted, "rank %d: communicator was aborted", comm->rank);
  }
  return runCollective(comm, args);
}

}  // namespace

chorusResult_t enqueueOp(const Op& call) {
  // The flight recorder sees the call from here on: enqueued now, started when it runs.
  Op op = call;
  op.args.frId = op.comm->flight->enqueue(static_cast<int>(op.args.coll), op.args.type,
                                          op.args.count, op.args.op, op.args.root,
                                          tlsGroup.depth == 0 && op.stream == nullptr);
  if (tlsGroup.depth > 0) {
    tlsGroup.ops.push_back(op);
    return chorusSuccess;
  }
  if (op.stream == nullptr) {
    const std::unique_lock<std::mutex> lock = lockExec(op.comm);
    return runUnlessAborted(op.comm, op.args);
  }
  if (op.stream->device != nullptr)  // a wrapped CUDA stream (DeviceExecutor, stream.h)
    return op.stream->device->enqueue(op.stream, {op}, [](std::vector<Op>& ops) {
      chorusResult_t r = executeBatch(ops[0].comm, ops);
      recordAsync(ops[0].comm, r);
      return r;
    });
  Op copy = op;
  copy.comm->activeCalls.fetch_add(1, std::memory_order_acq_rel);  // released when it ran
  chorusResult_t pushed = streamPush(op.stream, [copy] {
    std::vector<Op> one{copy};
    chorusResult_t r = executeBatch(copy.comm, one);
    recordAsync(copy.comm, r);
    copy.comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
    return r;
  });
  if (pushed != chorusSuccess) {
    copy.comm->flight->finish(copy.args.frId, pushed);
    copy.comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
  }
  return pushed;
}

chorusResult_t runBlockingBiased(chorusComm* comm, PrepareFn prepare, const void* ctx) {
  CollArgs scratch;
  CollArgs* args = nullptr;
  CHORUS_CHECK(prepare(ctx, &scratch, &args));
  if (__builtin_expect(comm->abortFlag.load(std::memory_order_relaxed), 0)) {
    args->frId = comm->flight->enqueue(static_cast<int>(args->coll), args->type, args->count,
                                       args->op, args->root, true);
    return runUnlessAborted(comm, *args);  // records it as aborted
  }
  return runCollectiveNow(comm, args);
}

chorusResult_t runBlocking(chorusComm* comm, PrepareFn prepare, const void* ctx) {
  const std::unique_lock<std::mutex> lock = lockExec(comm);
  claimExecBias(comm);  // this thread's next blocking calls may skip the lock
  return runBlockingBiased(comm, prepare, ctx);
}

chorusResult_t groupStart() {
  ++tlsGroup.depth;
  return chorusSuccess;
}

chorusResult_t groupEnd() {
  if (tlsGroup.depth == 0)
    CHORUS_FAIL(chorusInvalidUsage, "chorusGroupEnd without a matching chorusGroupStart");
  if (--tlsGroup.depth > 0) return chorusSuccess;
  std::vector<Op> ops;
  ops.swap(tlsGroup.ops);
  if (ops.empty()) return chorusSuccess;

  chorusStream_t stream = ops.front().stream;
  if (stream != nullptr && stream->device != nullptr)
    return stream->device->enqueue(stream, ops, [](std::vector<Op>& staged) {
      Batches bs;
      groupByComm(staged, &bs);
      return runBatches(bs, true);
    });
  auto batches = std::make_shared<Batches>();
  groupByComm(ops, batches.get());
  if (stream == nullptr) return runBatches(*batches, false);
  for (auto& b : *batches) b.first->activeCalls.fetch_add(1, std::memory_order_acq_rel);
  auto release = [](decltype(*batches)& bs) {
    for (auto& b : bs) b.first->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
  };
  chorusResult_t pushed = streamPush(stream, [batches, release] {
    chorusResult_t r = runBatches(*batches, true);
    release(*batches);
    return r;
  });
  if (pushed != chorusSuccess) release(*batches);
  return pushed;
}

}  // namespace chorus
