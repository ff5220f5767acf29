// stream.h — host streams: ordered queues of operations run by a worker thread.
//
// A call on a stream returns at once; the worker runs the queue in order and sleeps on a
// condition variable when it is empty (no idle CPU use on a 2-core machine).
// chorusStreamSynchronize waits for the queue to drain and returns the first error since
// the last synchronize.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "chorus.h"

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
};

namespace chorus {

chorusResult_t streamCreate(chorusStream** out);
/// Queues `fn`; it runs on the stream's worker after everything queued before it.
chorusResult_t streamPush(chorusStream* s, std::function<chorusResult_t()> fn);
chorusResult_t streamSynchronize(chorusStream* s);
chorusResult_t streamQuery(chorusStream* s);
void streamDestroy(chorusStream* s);

}  // namespace chorus
