// process_group.h — ProcessGroupChorus: c10d's process-group interface on a Chorus
// communicator, so `init_process_group(backend="chorus")` runs PyTorch programs on Chorus.
//
// Every operation is queued on one Chorus host stream (so operations run in the order the
// program issued them, as every rank must) and returns at once with a ChorusWork; see
// completion_queue.h for how Works complete. Tensors must be CPU tensors: this build has
// never run Chorus on a GPU, so device tensors get a clear error instead.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "chorus.h"
#include "python/csrc/compat_torch.h"
#include "python/csrc/dtypes.h"

namespace chorus_torch {

class CompletionQueue;
class ChorusWork;

class ProcessGroupChorus : public BackendBase {
 public:
  /// Collective: rank 0 makes the Chorus unique id and publishes it in `store`.
  /// `reproducible`: 1 or 0 from the backend's options (torch 2.x pg_options); unset
  /// (CHORUS_CONFIG_UNDEF_INT), the reproducible mode is on where torch's deterministic
  /// algorithms are on at creation, else CHORUS_REPRODUCIBLE decides (docs/TORCH.md).
  ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout, int reproducible = CHORUS_CONFIG_UNDEF_INT);
  ~ProcessGroupChorus() override;

  const std::string getBackendName() const override { return "chorus"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  /// batch_isend_irecv: the p2p calls between these two become one Chorus group, so any
  /// set of sends and receives completes without deadlock.
  void startCoalescing() override;
#ifdef CHORUS_TORCH_SUPPORTS_COALESCING
  bool supportsCoalescing() const override { return true; }
#endif
#if CHORUS_TORCH2
  /// One Work that completes when every operation of the batch did (torch2_ops.cc).
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  /// all_gather_into_tensor / reduce_scatter_tensor under _coalescing_manager: the
  /// per-tensor collectives, then one Work that completes after all of them (torch2_ops.cc).
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
#else
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;
#endif

  void setSequenceNumberForGroup() override {}  // every rank starts at 0
  uint64_t getSequenceNumberForGroup() override { return seq_; }

 private:
  /// Ends the Chorus group of a batch and hands its Works to the queue.
  void finishCoalescing();
  /// Issues the Chorus calls of one operation on the stream (`issue` gets the stream) and
  /// returns its Work. Throws with Chorus's message if a call is refused. When the caller
  /// waits at once (mode.callerWaits), with the group's timeout, outside a batch and with
  /// nothing queued, the calls run right here on the NULL stream instead and the Work is
  /// returned completed: the same order on the communicator, no thread hand-off.
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, const char* name, LaunchMode mode,
                                        std::vector<at::Tensor> outputs,
                                        const std::function<chorusResult_t(chorusStream_t)>& issue,
                                        std::function<void(bool ok)> finish,
                                        std::vector<at::Tensor> keepAlive, int sourceRank = -1);
  /// Resolves op and dtype; for PREMUL_SUM creates a Chorus op the caller must destroy
  /// (*userOp true) in its finish step.
  ReduceMapping prepareReduce(const c10d::ReduceOp& op, const at::Tensor& like, bool* userOp);
  std::function<void(bool)> destroyOpWhenDone(bool userOp, chorusRedOp_t op,
                                              std::function<void(bool)> next);
  std::chrono::milliseconds opTimeout(std::chrono::milliseconds requested) const;
  [[noreturn]] void throwChorus(const char* what) const;

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  chorusComm_t comm_ = nullptr;
  chorusStream_t stream_ = nullptr;
  std::shared_ptr<CompletionQueue> queue_;
  uint64_t seq_ = 0;
  uint64_t monitoredBarriers_ = 0;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<ChorusWork>> coalesced_;  // added to queue_ at the end
};

/// Tensor checks and staging shared by the operations (tensors.cc).
void checkCpuTensor(const at::Tensor& t, const char* op);
/// A contiguous tensor with t's values (t itself when already contiguous).
at::Tensor staged(const at::Tensor& t);
/// Copies `buffer` back into `t` when they are different tensors.
void unstage(const at::Tensor& t, const at::Tensor& buffer);
/// The bytes of every tensor, one after another, in one uint8 tensor.
at::Tensor packBytes(const std::vector<at::Tensor>& tensors);
/// Copies nbytes(t) bytes from src into t (t may be non-contiguous).
void unpackBytes(const at::Tensor& t, const uint8_t* src);
size_t nbytes(const at::Tensor& t);

}  // namespace chorus_torch
