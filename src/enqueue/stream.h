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
#include <mutex>
#include <string>
#include <thread>

#include "chorus.h"

namespace chorus {
namespace cuda {
struct StreamBinding;  // src/cuda/device_path.h
}
constexpr uint64_t kStreamMagic = 0x43484f5253545245ull;  // "CHORSTRE"
constexpr uint64_t kStreamDeadMagic = 0xdeadc0de5743dead;
}  // namespace chorus

struct chorusStream {
  uint64_t magic = chorus::kStreamMagic;  // best-effort check of user handles
  std::mutex mutex;
  std::condition_variable workCv;
  std::condition_variable idleCv;
  std::deque<std::function<chorusResult_t()>> queue;
  bool busy = false;
  bool stop = false;
  chorusResult_t firstError = chorusSuccess;
  std::string firstErrorDetail;
  std::thread worker;
  chorus::cuda::StreamBinding* cuda = nullptr;  // set when made by chorusStreamFromCuda
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
