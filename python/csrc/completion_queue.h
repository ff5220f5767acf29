// completion_queue.h — turns "the host stream went idle" into completed Works.
//
// Chorus host streams report completion of everything queued so far
// (chorusStreamSynchronize), not of one operation. A Work is added here only after all
// its Chorus calls were queued, so one synchronize completes every Work added before it.
// A thread of its own settles Works nobody waits for (futures, DDP); a thread calling
// Work::wait settles directly, which saves a thread hand-off on the latency path. Settles
// run one at a time, so Works complete in the order they were added: a Work's completion
// (its copy back into the user's tensors) is done before any later Work reports completion.
//
// A caller that will wait at once (asyncOp false) need not use the stream at all: when
// nothing is queued, runInline runs its Chorus calls on the calling thread (NULL stream),
// which is the same order on the communicator and saves both thread hand-offs.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <condition_variable>
#include <deque>
#include <functional>
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
  /// When nothing is queued or being settled (the stream is idle) and no earlier failure
  /// is recorded, runs `call` on the calling thread and returns true, with *error empty on
  /// success or the failure's message (recorded like a failed settle: later Works fail
  /// too). Returns false without running `call` otherwise: the caller takes the stream.
  /// `call` returns the Chorus result of NULL-stream calls; `argumentError` is set instead
  /// of *error when Chorus refused the arguments (nothing ran, nothing is recorded).
  bool runInline(const std::function<chorusResult_t()>& call, std::string* error,
                 bool* argumentError);
  /// The first failure recorded on this group, or "" while none is.
  std::string firstFailure();
  /// Settles what is left, stops the thread; settle() is a no-op afterwards.
  void shutdown();

 private:
  void loop();
  /// The message for a failed stream wait (onComm false) or NULL-stream call on the
  /// communicator, or "" (also checks the communicator's asynchronous error on success).
  std::string failure(chorusResult_t result, bool onComm);

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
  int settling_ = 0;    // settle() calls using the stream right now
  int completing_ = 0;  // settles completing their batch (under orderMutex_)
  bool closed_ = false;
  std::string stickyError_;  // once the communicator failed, every later Work fails too
  std::thread thread_;
};

}  // namespace chorus_torch
