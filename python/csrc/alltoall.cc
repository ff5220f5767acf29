// All-to-all. Equal splits map onto chorusAllToAll; uneven splits (all_to_all_single with
// split sizes, all_to_all with a tensor list) become one Chorus group of sends and
// receives, which completes in any order without deadlock.
#include <ATen/ATen.h>

#include "python/csrc/process_group.h"

namespace chorus_torch {
namespace {

// Byte offsets and sizes of the blocks of a dim-0 split; empty splits mean equal parts.
void splitBytes(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* what,
                std::vector<size_t>* offsets, std::vector<size_t>* lengths) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const size_t rowBytes = rows == 0 ? 0 : nbytes(t) / static_cast<size_t>(rows);
  std::vector<int64_t> s = splits;
  if (s.empty()) {
    TORCH_CHECK(rows % size == 0, "chorus alltoall_base: ", what, " has ", rows,
                " rows, not divisible by world size ", size);
    s.assign(size, rows / size);
  }
  TORCH_CHECK(static_cast<int>(s.size()) == size, "chorus alltoall_base: ", what,
              " split sizes must have world size (", size, ") entries");
  int64_t sum = 0;
  for (int64_t v : s) {
    TORCH_CHECK(v >= 0, "chorus alltoall_base: negative split size");
    sum += v;
  }
  TORCH_CHECK(sum == rows, "chorus alltoall_base: ", what, " split sizes add up to ", sum,
              " but the tensor has ", rows, " rows");
  size_t off = 0;
  for (int64_t v : s) {
    offsets->push_back(off);
    lengths->push_back(static_cast<size_t>(v) * rowBytes);
    off += static_cast<size_t>(v) * rowBytes;
  }
}

// One group: block i of `send` to rank i, block i of `recv` from rank i.
chorusResult_t exchange(uint8_t* send, const std::vector<size_t>& sendOff,
                        const std::vector<size_t>& sendLen, uint8_t* recv,
                        const std::vector<size_t>& recvOff, const std::vector<size_t>& recvLen,
                        chorusComm_t comm, chorusStream_t s) {
  chorusResult_t r = chorusGroupStart();
  if (r != chorusSuccess) return r;
  const int n = static_cast<int>(sendOff.size());
  for (int peer = 0; peer < n && r == chorusSuccess; ++peer) {
    if (sendLen[peer])
      r = chorusSend(send + sendOff[peer], sendLen[peer], chorusUint8, peer, comm, s);
    if (r == chorusSuccess && recvLen[peer])
      r = chorusRecv(recv + recvOff[peer], recvLen[peer], chorusUint8, peer, comm, s);
  }
  chorusResult_t end = chorusGroupEnd();
  return r != chorusSuccess ? r : end;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes, const c10d::AllToAllOptions& opts) {
  checkCpuTensor(input, "alltoall_base");
  checkCpuTensor(output, "alltoall_base");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(),
              "chorus alltoall_base: input and output must have the same dtype");
  // Sends and receives of one group progress together, so the send side needs its own copy
  // when the caller passed one tensor for both.
  at::Tensor src = input.is_same(output) ? input.contiguous().clone() : staged(input);
  at::Tensor dst = staged(output);
  at::Tensor out = output;
  chorusComm_t comm = comm_;
  if (outputSplitSizes.empty() && inputSplitSizes.empty()) {
    TORCH_CHECK(src.numel() == dst.numel() && src.numel() % size_ == 0,
                "chorus alltoall_base: input and output must have the same number of "
                "elements, divisible by world size ",
                size_);
    const size_t block = nbytes(src) / size_;
    return launch(
        c10d::OpType::ALLTOALL_BASE, "alltoall_base", modeOf(opts), {output},
        [&](chorusStream_t s) {
          return chorusAllToAll(src.data_ptr(), dst.data_ptr(), block, chorusUint8, comm, s);
        },
        [out, dst](bool ok) {
          if (ok) unstage(out, dst);
        },
        {src, dst});
  }
  std::vector<size_t> so, sl, ro, rl;
  splitBytes(src, inputSplitSizes, size_, "input", &so, &sl);
  splitBytes(dst, outputSplitSizes, size_, "output", &ro, &rl);
  return launch(
      c10d::OpType::ALLTOALL_BASE, "alltoall_base", modeOf(opts), {output},
      [&](chorusStream_t s) {
        return exchange(static_cast<uint8_t*>(src.data_ptr()), so, sl,
                        static_cast<uint8_t*>(dst.data_ptr()), ro, rl, comm, s);
      },
      [out, dst](bool ok) {
        if (ok) unstage(out, dst);
      },
      {src, dst});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "chorus alltoall: expected ", size_, " input and ", size_, " output tensors");
  for (int i = 0; i < size_; ++i) {
    checkCpuTensor(inputs[i], "alltoall");
    checkCpuTensor(outputs[i], "alltoall");
    TORCH_CHECK(inputs[i].scalar_type() == outputs[0].scalar_type() &&
                    outputs[i].scalar_type() == outputs[0].scalar_type(),
                "chorus alltoall: all tensors must have the same dtype");
  }
  // Packed into one send block and one receive block, then the uneven-split exchange.
  at::Tensor src = packBytes(inputs);
  std::vector<size_t> so, sl, ro, rl;
  size_t off = 0;
  for (const auto& t : inputs) {
    so.push_back(off);
    sl.push_back(nbytes(t));
    off += nbytes(t);
  }
  off = 0;
  for (const auto& t : outputs) {
    ro.push_back(off);
    rl.push_back(nbytes(t));
    off += nbytes(t);
  }
  at::Tensor dst = at::empty({static_cast<int64_t>(off)}, at::kByte);
  std::vector<at::Tensor> outs = outputs;
  chorusComm_t comm = comm_;
  return launch(
      c10d::OpType::ALLTOALL, "alltoall", modeOf(opts), outputs,
      [&](chorusStream_t s) {
        return exchange(src.data_ptr<uint8_t>(), so, sl, dst.data_ptr<uint8_t>(), ro, rl, comm, s);
      },
      [outs, dst, ro](bool ok) {
        if (!ok) return;
        for (size_t i = 0; i < outs.size(); ++i)
          unpackBytes(outs[i], dst.data_ptr<uint8_t>() + ro[i]);
      },
      {src, dst});
}

}  // namespace chorus_torch
