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
  std::string error;
  // A passed deadline says "Timed out" first, the words PyTorch's tests (and users'
  // handlers) look for in gloo's and NCCL's timeout errors.
  const chorusResult_t synced = chorusStreamSynchronize(stream_);
  if (synced != chorusSuccess)
    error = std::string("chorus: ") +
            (synced == chorusTimeout ? "Timed out (deadline passed): " : "") +
            chorusGetLastError(nullptr);
  chorusResult_t asyncError = chorusSuccess;
  if (error.empty() && chorusCommGetAsyncError(comm_, &asyncError) == chorusSuccess &&
      asyncError != chorusSuccess && asyncError != chorusInProgress)
    error = std::string("chorus: the communicator failed earlier: ") +
            chorusGetErrorString(asyncError) + ": " + chorusGetLastError(comm_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error.empty() && stickyError_.empty()) stickyError_ = error;
    if (error.empty()) error = stickyError_;
    --settling_;
  }
  idleCv_.notify_all();
  for (auto& w : batch) w->complete(error);
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
