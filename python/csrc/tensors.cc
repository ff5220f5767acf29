// Tensor checks and staging: Chorus moves contiguous host memory, PyTorch hands over any
// strided CPU tensor, so non-contiguous ones go through a contiguous copy.
#include <ATen/ATen.h>

#include <cstring>

#include "python/csrc/process_group.h"

namespace chorus_torch {

void checkCpuTensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "chorus ", op, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "chorus ", op, ": tensor is on ", t.device().str(),
              "; this build of the chorus backend supports CPU tensors only (Chorus's device "
              "path has never run on a GPU here). Move the tensor to CPU or use another "
              "backend for device tensors.");
  TORCH_CHECK(t.layout() == c10::kStrided, "chorus ", op,
              ": only dense (strided) tensors are supported, got layout ", t.layout());
}

size_t nbytes(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

at::Tensor staged(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

void unstage(const at::Tensor& t, const at::Tensor& buffer) {
  if (!t.is_same(buffer)) t.copy_(buffer);
}

at::Tensor packBytes(const std::vector<at::Tensor>& tensors) {
  size_t total = 0;
  for (const auto& t : tensors) total += nbytes(t);
  at::Tensor out = at::empty({static_cast<int64_t>(total)}, at::kByte);
  auto* dst = out.data_ptr<uint8_t>();
  for (const auto& t : tensors) {
    at::Tensor c = t.contiguous();
    if (nbytes(c)) std::memcpy(dst, c.data_ptr(), nbytes(c));
    dst += nbytes(c);
  }
  return out;
}

void unpackBytes(const at::Tensor& t, const uint8_t* src) {
  if (t.numel() == 0) return;
  if (t.is_contiguous()) {
    std::memcpy(t.data_ptr(), src, nbytes(t));
    return;
  }
  at::Tensor tmp = at::empty(t.sizes(), t.options());
  std::memcpy(tmp.data_ptr(), src, nbytes(t));
  t.copy_(tmp);
}

}  // namespace chorus_torch
