// stream.h — host streams: ordered queues of operations run by a worker thread.
//
// A call on a stream returns at once; the worker runs the queue in order and sleeps on a
// condition variable when it is empty (no idle CPU use on a 2-core machine).
// chorusStreamSynchronize waits for the queue to drain and returns the first error since
// the last synchronize.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chorus.h"

struct chorusComm;

namespace chorus {

struct Op;  // src/enqueue/enqueue.h

/// What a stream bound to a device (a CUDA stream: src/cuda/device_path.h implements it)
/// does instead of the host path. The enqueue layer calls only this; the implementation
/// is set by whoever makes such a stream (chorusStreamFromCuda), so nothing here includes
/// the device code. Plain host streams have none.
class DeviceExecutor {
 public:
  /// Runs `ops` with host pointers (the enqueue layer's executeBatch / runBatches) and
  /// records asynchronous errors.
  using RunHostOps = std::function<chorusResult_t(std::vector<Op>& ops)>;

  /// Called by streamDestroy after the worker stopped: waits for the device stream and
  /// frees what the binding holds.
  virtual ~DeviceExecutor() = default;
  /// Argument check for a buffer of a call on this stream (device, pinned or host memory).
  virtual chorusResult_t checkBuffer(chorusComm* comm, const void* ptr, size_t bytes,
                                     const char* api, const char* argName, bool writable) = 0;
  /// Queues `ops` (one call, or a group) on the stream `s` this executor is bound to.
  virtual chorusResult_t enqueue(chorusStream* s, const std::vector<Op>& ops,
                                 RunHostOps runHost) = 0;
  /// After the host queue drained: waits for the device stream too.
  virtual chorusResult_t synchronize() = 0;
};

}  // namespace chorus

struct chorusStream {
  std::mutex mutex;
  std::condition_variable workCv;
  std::condition_variable idleCv;
  std::deque<std::function<chorusResult_t()>> queue;
  bool busy = false;
  bool stop = false;
  chorusResult_t firstError = chorusSuccess;
  std::string firstErrorDetail;
  std::thread worker;
  /// Set when made by chorusStreamFromCuda (src/cuda); null on plain host streams.
  std::unique_ptr<chorus::DeviceExecutor> device;
};

namespace chorus {

chorusResult_t streamCreate(chorusStream** out);
/// Queues `fn`; it runs on the stream's worker after everything queued before it.
chorusResult_t streamPush(chorusStream* s, std::function<chorusResult_t()> fn);
chorusResult_t streamSynchronize(chorusStream* s);
chorusResult_t streamQuery(chorusStream* s);
void streamDestroy(chorusStream* s);
/// Validates a non-NULL stream handle passed by the user (chorusInvalidUsage when it is not
/// a live host stream: destroyed, or a raw cudaStream_t not wrapped by chorusStreamFromCuda).
chorusResult_t streamCheck(const chorusStream* s, const char* api);

}  // namespace chorus
