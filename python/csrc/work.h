// work.h — one asynchronous operation of the chorus process group, as c10d sees it.
//
// The Chorus calls behind a Work run on the process group's host stream; the Work only
// learns that they finished from its CompletionQueue, which then runs the Work's finish
// step (copying results out of staging buffers) and completes its future. DDP chains its
// bucket handling on that future, so the future must complete without anyone waiting.
// A Work whose calls ran on the caller's thread (CompletionQueue::runInline) is completed
// before it is returned. The future is made only when someone asks for it (getFuture):
// a blocking collective's caller never does, and it costs an allocation and a lock.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus_torch {

class CompletionQueue;

class ChorusWork : public c10d::Work {
 public:
  /// `finish(ok)` runs once when the operation ended (copy-backs when ok, frees user ops
  /// always). `keepAlive` holds staging buffers and inputs until then.
  ChorusWork(int rank, c10d::OpType type, const char* name, uint64_t seq,
             std::chrono::milliseconds timeout, std::vector<at::Tensor> outputs,
             std::function<void(bool ok)> finish, std::vector<at::Tensor> keepAlive,
             std::shared_ptr<CompletionQueue> queue, int sourceRank = -1);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override {}
  /// kNoTimeout waits at most the operation's timeout; a longer wait throws, naming the
  /// operation and its sequence number.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  /// Called once by the CompletionQueue. An empty `error` means success.
  void complete(const std::string& error);

  const char* name() const { return name_; }
  /// recvAnysource: the sender's rank arrives in this one-int tensor when the receive
  /// completes (Chorus writes it), and sourceRank() reads it from there.
  void setSourceTensor(at::Tensor t) { sourceTensor_ = std::move(t); }

 private:
  void markFuture(const c10::intrusive_ptr<c10::ivalue::Future>& future, std::exception_ptr eptr);

  const char* const name_;  // a string literal
  const uint64_t seq_;
  const std::chrono::milliseconds timeout_;
  const int sourceRank_;
  at::Tensor sourceTensor_;
  std::vector<at::Tensor> outputs_;
  std::function<void(bool)> finish_;
  std::vector<at::Tensor> keepAlive_;
  std::shared_ptr<CompletionQueue> queue_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;  // made by getFuture, under mutex_
};

}  // namespace chorus_torch
