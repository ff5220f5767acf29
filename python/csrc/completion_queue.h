// completion_queue.h — turns "the host stream went idle" into completed Works.
//
// Chorus host streams report completion of everything queued so far
// (chorusStreamSynchronize), not of one operation. A Work is added here only after all
// its Chorus calls were queued, so one synchronize completes every Work added before it.
// A thread of its own settles Works nobody waits for (futures, DDP); a thread calling
// Work::wait settles directly, which saves a thread hand-off on the latency path. Settles
// run one at a time, so Works complete in the order they were added: a Work's completion
// (its copy back into the user's tensors) is done before any later Work reports completion.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "chorus.h"

namespace chorus_torch {

class ChorusWork;

class CompletionQueue {
 public:
  CompletionQueue(chorusComm_t comm, chorusStream_t stream);
  ~CompletionQueue();

  /// Hands over a Work whose Chorus calls are all on the stream.
  void add(c10::intrusive_ptr<ChorusWork> work);
  /// Waits for the stream to drain and completes every Work added before the call.
  void settle();
  /// Settles what is left, stops the thread; settle() is a no-op afterwards.
  void shutdown();

 private:
  void loop();

  chorusComm_t comm_;
  chorusStream_t stream_;
  std::mutex mutex_;
  // Held for a whole settle (take the batch, synchronize, complete it). Recursive: a
  // Work's completion may run a future's callback that waits for a later Work on the same
  // thread.
  std::recursive_mutex orderMutex_;
  std::condition_variable cv_;
  std::condition_variable idleCv_;
  std::deque<c10::intrusive_ptr<ChorusWork>> pending_;
  int settling_ = 0;  // settle() calls using the stream right now
  bool closed_ = false;
  std::string stickyError_;  // once the communicator failed, every later Work fails too
  std::thread thread_;
};

}  // namespace chorus_torch
