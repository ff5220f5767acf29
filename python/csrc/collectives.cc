// The collectives of ProcessGroupChorus. Each one checks its tensors, stages
// non-contiguous ones, issues Chorus calls on the stream through launch(), and leaves the
// copy-back of staged results to the Work's finish step.
#include <ATen/ATen.h>

#include "python/csrc/process_group.h"

namespace chorus_torch {
namespace {

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "chorus ", op,
              ": exactly one tensor per process (one CPU device), got ", tensors.size());
  checkCpuTensor(tensors[0], op);
  return tensors[0];
}

void checkSameShape(const at::Tensor& a, const at::Tensor& b, const char* op) {
  checkCpuTensor(b, op);
  TORCH_CHECK(a.scalar_type() == b.scalar_type() && a.numel() == b.numel(), "chorus ", op,
              ": tensors must have the same dtype and number of elements (", a.scalar_type(), "[",
              a.numel(), "] vs ", b.scalar_type(), "[", b.numel(), "])");
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast");
  at::Tensor buf = staged(t);
  const int root = static_cast<int>(opts.rootRank);
  chorusComm_t comm = comm_;
  return launch(
      c10d::OpType::BROADCAST, "broadcast", modeOf(opts), tensors,
      [&](chorusStream_t s) {
        return chorusBroadcast(buf.data_ptr(), buf.data_ptr(), nbytes(buf), chorusUint8, root, comm,
                               s);
      },
      [t, buf](bool ok) {
        if (ok) unstage(t, buf);
      },
      {buf});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  at::Tensor t = single(tensors, "allreduce");
  bool userOp = false;
  ReduceMapping m = prepareReduce(opts.reduceOp, t, &userOp);
  at::Tensor buf = staged(t);
  const size_t count = static_cast<size_t>(buf.numel()) * m.countFactor;
  chorusComm_t comm = comm_;
  return launch(c10d::OpType::ALLREDUCE, "allreduce", modeOf(opts), tensors,
                [&](chorusStream_t s) {
                  return chorusAllReduce(buf.data_ptr(), buf.data_ptr(), count, m.type, m.op, comm,
                                         s);
                },
                destroyOpWhenDone(userOp, m.op,
                                  [t, buf](bool ok) {
                                    if (ok) unstage(t, buf);
                                  }),
                {buf});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "chorus allreduce_coalesced: no tensors");
  for (const auto& t : tensors) checkCpuTensor(t, "allreduce_coalesced");
  for (const auto& t : tensors)
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "chorus allreduce_coalesced: all tensors must have the same dtype");
  bool userOp = false;
  ReduceMapping m = prepareReduce(opts.reduceOp, tensors[0], &userOp);
  // One flat buffer, one all-reduce: the point of coalescing.
  std::vector<at::Tensor> flats;
  for (const auto& t : tensors) flats.push_back(t.reshape({-1}));
  at::Tensor flat = at::cat(flats);
  const size_t count = static_cast<size_t>(flat.numel()) * m.countFactor;
  chorusComm_t comm = comm_;
  std::vector<at::Tensor> outs = tensors;
  return launch(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", modeOf(opts), tensors,
                [&](chorusStream_t s) {
                  return chorusAllReduce(flat.data_ptr(), flat.data_ptr(), count, m.type, m.op,
                                         comm, s);
                },
                destroyOpWhenDone(userOp, m.op,
                                  [outs, flat](bool ok) {
                                    if (!ok) return;
                                    int64_t off = 0;
                                    for (const auto& t : outs) {
                                      t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
                                      off += t.numel();
                                    }
                                  }),
                {flat});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  at::Tensor t = single(tensors, "reduce");
  bool userOp = false;
  ReduceMapping m = prepareReduce(opts.reduceOp, t, &userOp);
  at::Tensor buf = staged(t);
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  const size_t count = static_cast<size_t>(buf.numel()) * m.countFactor;
  chorusComm_t comm = comm_;
  return launch(c10d::OpType::REDUCE, "reduce", modeOf(opts), tensors,
                [&](chorusStream_t s) {
                  // Off the root the input stays as it was (no receive buffer).
                  return chorusReduce(buf.data_ptr(), isRoot ? buf.data_ptr() : nullptr, count,
                                      m.type, m.op, root, comm, s);
                },
                destroyOpWhenDone(userOp, m.op,
                                  [t, buf, isRoot](bool ok) {
                                    if (ok && isRoot) unstage(t, buf);
                                  }),
                {buf});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "chorus allgather: expected one list of ", size_, " output tensors");
  for (const auto& o : outputs[0]) checkSameShape(in, o, "allgather");
  at::Tensor src = staged(in);
  const size_t bytes = nbytes(src);
  at::Tensor flat = at::empty({static_cast<int64_t>(bytes * size_)}, at::kByte);
  std::vector<at::Tensor> outs = outputs[0];
  chorusComm_t comm = comm_;
  return launch(
      c10d::OpType::ALLGATHER, "allgather", modeOf(opts), outs,
      [&](chorusStream_t s) {
        return chorusAllGather(src.data_ptr(), flat.data_ptr(), bytes, chorusUint8, comm, s);
      },
      [outs, flat, bytes](bool ok) {
        if (!ok) return;
        for (size_t r = 0; r < outs.size(); ++r)
          unpackBytes(outs[r], flat.data_ptr<uint8_t>() + r * bytes);
      },
      {src, flat});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  checkCpuTensor(input, "_allgather_base");
  checkCpuTensor(output, "_allgather_base");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * size_,
      "chorus _allgather_base: output must hold world_size (", size_,
      ") times the input's elements, of the same dtype");
  at::Tensor src = staged(input);
  at::Tensor dst = staged(output);
  at::Tensor out = output;
  const size_t bytes = nbytes(src);
  chorusComm_t comm = comm_;
  return launch(
      c10d::OpType::_ALLGATHER_BASE, "_allgather_base", modeOf(opts), {output},
      [&](chorusStream_t s) {
        return chorusAllGather(src.data_ptr(), dst.data_ptr(), bytes, chorusUint8, comm, s);
      },
      [out, dst](bool ok) {
        if (ok) unstage(out, dst);
      },
      {src, dst});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(static_cast<int>(outputLists.size()) == size_,
              "chorus allgather_coalesced: expected ", size_, " output lists");
  for (const auto& t : inputs) checkCpuTensor(t, "allgather_coalesced");
  for (const auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(),
                "chorus allgather_coalesced: each output list must match the input list");
    for (size_t i = 0; i < list.size(); ++i)
      checkSameShape(inputs[i], list[i], "allgather_coalesced");
  }
  // All inputs as one byte block per rank: one all-gather whatever the dtypes.
  at::Tensor src = packBytes(inputs);
  const size_t bytes = nbytes(src);
  at::Tensor flat = at::empty({static_cast<int64_t>(bytes * size_)}, at::kByte);
  auto lists = outputLists;
  std::vector<at::Tensor> all;
  for (const auto& l : outputLists) all.insert(all.end(), l.begin(), l.end());
  chorusComm_t comm = comm_;
  return launch(
      c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", modeOf(opts), all,
      [&](chorusStream_t s) {
        return chorusAllGather(src.data_ptr(), flat.data_ptr(), bytes, chorusUint8, comm, s);
      },
      [lists, flat, bytes](bool ok) {
        if (!ok) return;
        for (size_t r = 0; r < lists.size(); ++r) {
          const uint8_t* p = flat.data_ptr<uint8_t>() + r * bytes;
          for (const auto& t : lists[r]) {
            unpackBytes(t, p);
            p += nbytes(t);
          }
        }
      },
      {src, flat});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  std::vector<at::Tensor> outs;
  if (isRoot) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "chorus gather: the root needs one list of ", size_, " output tensors");
    for (const auto& o : outputs[0]) checkSameShape(in, o, "gather");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(),
                "chorus gather: only the root may pass output tensors");
  }
  at::Tensor src = staged(in);
  const size_t bytes = nbytes(src);
  at::Tensor flat = at::empty({static_cast<int64_t>(isRoot ? bytes * size_ : 0)}, at::kByte);
  chorusComm_t comm = comm_;
  return launch(
      c10d::OpType::GATHER, "gather", modeOf(opts), outs,
      [&](chorusStream_t s) {
        return chorusGather(src.data_ptr(), isRoot ? flat.data_ptr() : nullptr, bytes, chorusUint8,
                            root, comm, s);
      },
      [outs, flat, bytes](bool ok) {
        if (!ok) return;
        for (size_t r = 0; r < outs.size(); ++r)
          unpackBytes(outs[r], flat.data_ptr<uint8_t>() + r * bytes);
      },
      {src, flat});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  at::Tensor out = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  at::Tensor flat;
  if (isRoot) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "chorus scatter: the root needs one list of ", size_, " input tensors");
    for (const auto& i : inputs[0]) checkSameShape(out, i, "scatter");
    flat = packBytes(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(),
                "chorus scatter: only the root may pass input tensors");
    flat = at::empty({0}, at::kByte);
  }
  at::Tensor dst = staged(out);
  const size_t bytes = nbytes(dst);
  chorusComm_t comm = comm_;
  return launch(
      c10d::OpType::SCATTER, "scatter", modeOf(opts), outputs,
      [&](chorusStream_t s) {
        return chorusScatter(isRoot ? flat.data_ptr() : nullptr, dst.data_ptr(), bytes, chorusUint8,
                             root, comm, s);
      },
      [out, dst](bool ok) {
        if (ok) unstage(out, dst);
      },
      {flat, dst});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "chorus reduce_scatter: expected one list of ", size_, " input tensors");
  for (const auto& i : inputs[0]) checkSameShape(out, i, "reduce_scatter");
  bool userOp = false;
  ReduceMapping m = prepareReduce(opts.reduceOp, out, &userOp);
  at::Tensor flat = packBytes(inputs[0]);
  at::Tensor dst = staged(out);
  const size_t count = static_cast<size_t>(dst.numel()) * m.countFactor;
  chorusComm_t comm = comm_;
  return launch(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", modeOf(opts), outputs,
                [&](chorusStream_t s) {
                  return chorusReduceScatter(flat.data_ptr(), dst.data_ptr(), count, m.type, m.op,
                                             comm, s);
                },
                destroyOpWhenDone(userOp, m.op,
                                  [out, dst](bool ok) {
                                    if (ok) unstage(out, dst);
                                  }),
                {flat, dst});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkCpuTensor(input, "_reduce_scatter_base");
  checkCpuTensor(output, "_reduce_scatter_base");
  TORCH_CHECK(
      input.scalar_type() == output.scalar_type() && input.numel() == output.numel() * size_,
      "chorus _reduce_scatter_base: input must hold world_size (", size_,
      ") times the output's elements, of the same dtype");
  bool userOp = false;
  ReduceMapping m = prepareReduce(opts.reduceOp, output, &userOp);
  at::Tensor src = staged(input);
  at::Tensor dst = staged(output);
  at::Tensor out = output;
  const size_t count = static_cast<size_t>(dst.numel()) * m.countFactor;
  chorusComm_t comm = comm_;
  return launch(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", modeOf(opts), {output},
                [&](chorusStream_t s) {
                  return chorusReduceScatter(src.data_ptr(), dst.data_ptr(), count, m.type, m.op,
                                             comm, s);
                },
                destroyOpWhenDone(userOp, m.op,
                                  [out, dst](bool ok) {
                                    if (ok) unstage(out, dst);
                                  }),
                {src, dst});
}

}  // namespace chorus_torch
