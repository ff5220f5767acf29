#include "python/csrc/work.h"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <stdexcept>

#include "python/csrc/completion_queue.h"

namespace chorus_torch {

ChorusWork::ChorusWork(int rank, c10d::OpType type, const char* name, uint64_t seq,
                       std::chrono::milliseconds timeout, std::vector<at::Tensor> outputs,
                       std::function<void(bool ok)> finish, std::vector<at::Tensor> keepAlive,
                       std::shared_ptr<CompletionQueue> queue, int sourceRank)
    : c10d::Work(rank, type),
      name_(name),
      seq_(seq),
      timeout_(timeout),
      sourceRank_(sourceRank),
      outputs_(std::move(outputs)),
      finish_(std::move(finish)),
      keepAlive_(std::move(keepAlive)),
      queue_(std::move(queue)) {}

bool ChorusWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool ChorusWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr ChorusWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

int ChorusWork::sourceRank() const {
  if (sourceTensor_.defined()) {
    const int from = sourceTensor_.data_ptr<int>()[0];
    TORCH_CHECK(from >= 0, "chorus recvAnysource: sourceRank() before the receive completed");
    return from;
  }
  if (sourceRank_ < 0) return c10d::Work::sourceRank();  // throws: not a receive
  return sourceRank_;
}

std::vector<at::Tensor> ChorusWork::result() { return outputs_; }

bool ChorusWork::wait(std::chrono::milliseconds timeout) {
  // With no explicit limit the caller settles the stream itself (one hand-off fewer);
  // an explicit limit must be honoured, so then only the queue's thread settles.
  if (timeout == kNoTimeout && !isCompleted()) queue_->settle();
  const auto limit = timeout == kNoTimeout ? timeout_ : timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, limit, [this] { return completed_; }))
    throw std::runtime_error(std::string("chorus: ") + name_ + " #" + std::to_string(seq_) +
                             " on rank " + std::to_string(rank_) + " did not complete within " +
                             std::to_string(limit.count()) + " ms");
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> ChorusWork::getFuture() {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  bool done = false;
  std::exception_ptr eptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (future_) return future_;
    future_ =
        c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    future = future_;
    // Completed before anyone asked: complete() saw no future, so complete it here.
    done = completed_;
    eptr = exception_;
  }
  if (done) markFuture(future, eptr);
  return future;
}

void ChorusWork::markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& future,
                            std::exception_ptr eptr) {
  if (eptr)
    future->setError(eptr);
  else
    future->markCompleted(c10::IValue(outputs_));
}

void ChorusWork::complete(const std::string& error) {
  std::exception_ptr eptr;
  if (!error.empty()) eptr = std::make_exception_ptr(std::runtime_error(error));
  try {
    if (finish_) finish_(!eptr);
  } catch (...) {
    if (!eptr) eptr = std::current_exception();
  }
  finish_ = nullptr;
  keepAlive_.clear();
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    exception_ = eptr;
    future = future_;  // none yet: getFuture completes the one it makes
  }
  cv_.notify_all();
  if (future) markFuture(future, eptr);
}

}  // namespace chorus_torch
