// ddp.h — data-parallel gradient averaging with bucketed, overlapped all-reduce.
//
// What PyTorch's DistributedDataParallel does, over Chorus:
//  - broadcastState(): parameters and buffers from rank 0, so every rank starts equal;
//  - a hook on every parameter copies its gradient into a flat bucket as soon as autograd
//    produces it; when a bucket is complete (and every bucket before it has been launched,
//    so all ranks launch in the same order), its all-reduce (average) is queued on the
//    communication stream and runs while backward goes on with earlier layers;
//  - finishBackward() waits for the stream and writes the averages into .grad;
//  - setSync(false) is no_sync: hooks do nothing, gradients accumulate locally, and the
//    next synchronized backward reduces the accumulated sum (the hook adds .grad so far);
//  - syncBuffers(): buffers (batch-norm running statistics) from rank 0 before a forward,
//    like DDP's broadcast_buffers, so evaluation is the same on every rank.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "trainer/comm.h"
#include "trainer/trace.h"

namespace trainer {

class DistributedDataParallel {
 public:
  DistributedDataParallel(torch::nn::Module& module, Comm& comm, TraceWriter& trace,
                          size_t bucketBytes, size_t firstBucketBytes);
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  void broadcastState();
  void syncBuffers();
  /// false for accumulation micro-steps (no all-reduce), true for the last one.
  void setSync(bool sync) { sync_ = sync; }
  /// false: buckets are launched only in finishBackward (to measure what overlap gains).
  void setOverlap(bool on) { overlap_ = on; }
  /// Record this step's all-reduces in the trace.
  void setTracing(bool on) { tracing_ = on; }
  /// Call right before loss.backward() and right after it.
  void prepareBackward();
  void finishBackward();

  size_t numBuckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    torch::Tensor flat;          // the gradients of its parameters, back to back
    std::vector<size_t> params;  // indices into params_
    size_t pending = 0;          // gradients not yet copied in this backward
    double launchUs = 0;
    bool inFlight = false;
  };
  void onGradient(size_t param, const torch::Tensor& grad);
  void launchReadyBuckets();
  void noteFinished(bool waited);

  torch::nn::Module& module_;
  Comm& comm_;
  TraceWriter& trace_;
  std::vector<torch::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<size_t> bucketOf_, offsetOf_;
  std::vector<Bucket> buckets_;
  size_t nextLaunch_ = 0;
  bool sync_ = true;
  bool tracing_ = false;
  bool overlap_ = true;
  bool inBackward_ = false;
};

}  // namespace trainer
