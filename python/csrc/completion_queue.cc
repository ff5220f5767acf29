#include "python/csrc/completion_queue.h"

#include <vector>

#include "python/csrc/work.h"

namespace chorus_torch {

CompletionQueue::CompletionQueue(chorusComm_t comm, chorusStream_t stream)
    : comm_(comm), stream_(stream), thread_([this] { loop(); }) {}

CompletionQueue::~CompletionQueue() { shutdown(); }

void CompletionQueue::add(c10::intrusive_ptr<ChorusWork> work) {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_.push_back(std::move(work));
  cv_.notify_one();
}

void CompletionQueue::settle() {
  // Two settlers at once (the queue's thread and a caller of Work::wait) could otherwise
  // complete a later batch while an earlier one is still copying results back.
  std::lock_guard<std::recursive_mutex> order(orderMutex_);
  std::vector<c10::intrusive_ptr<ChorusWork>> batch;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_ || pending_.empty()) return;
    batch.assign(pending_.begin(), pending_.end());
    pending_.clear();
    ++settling_;
  }
  std::string error = failure(chorusStreamSynchronize(stream_), false);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error.empty() && stickyError_.empty()) stickyError_ = error;
    if (error.empty()) error = stickyError_;
    --settling_;
  }
  idleCv_.notify_all();
  // A Work's completion may run a future callback that starts another operation on this
  // thread (orderMutex_ is recursive): that one must not overtake the rest of the batch.
  ++completing_;
  for (auto& w : batch) w->complete(error);
  --completing_;
}

std::string CompletionQueue::failure(chorusResult_t result, bool onComm) {
  // A passed deadline says "Timed out" first, the words PyTorch's tests (and users'
  // handlers) look for in gloo's and NCCL's timeout errors.
  if (result != chorusSuccess) {
    // A stream's wait has no communicator: its detail is this thread's last error.
    std::string detail = onComm ? chorusGetLastError(comm_) : "";
    if (detail.empty()) detail = chorusGetLastError(nullptr);
    return std::string("chorus: ") +
           (result == chorusTimeout ? "Timed out (deadline passed): " : "") + detail;
  }
  chorusResult_t asyncError = chorusSuccess;
  if (chorusCommGetAsyncError(comm_, &asyncError) == chorusSuccess && asyncError != chorusSuccess &&
      asyncError != chorusInProgress)
    return std::string("chorus: the communicator failed earlier: ") +
           chorusGetErrorString(asyncError) + ": " + chorusGetLastError(comm_);
  return "";
}

bool CompletionQueue::runInline(const std::function<chorusResult_t()>& call, std::string* error,
                                bool* argumentError) {
  *argumentError = false;
  std::lock_guard<std::recursive_mutex> order(orderMutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_ || !pending_.empty() || settling_ > 0 || completing_ > 0 || !stickyError_.empty())
      return false;
  }
  // Works are added only after their calls are on the stream, so an empty queue means an
  // idle stream unless a refused launch left calls behind: ask the stream to be sure.
  if (chorusStreamQuery(stream_) != chorusSuccess) return false;
  const chorusResult_t result = call();
  if (result == chorusInvalidArgument || result == chorusInvalidUsage) {
    *argumentError = true;
    return true;
  }
  *error = failure(result, true);
  if (!error->empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stickyError_.empty()) stickyError_ = *error;
  }
  return true;
}

std::string CompletionQueue::firstFailure() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stickyError_;
}

void CompletionQueue::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [this] { return closed_ || !pending_.empty(); });
    if (closed_) return;
    lock.unlock();
    settle();
    lock.lock();
  }
}

void CompletionQueue::shutdown() {
  settle();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (closed_) return;
    closed_ = true;
    idleCv_.wait(lock, [this] { return settling_ == 0; });
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  // Anything added after the last settle can no longer run: fail it rather than hang.
  std::deque<c10::intrusive_ptr<ChorusWork>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(pending_);
  }
  for (auto& w : left) w->complete("chorus: the process group was destroyed");
}

}  // namespace chorus_torch
