// torch_chorus.h — tensors through Comm: the element type mapping and in-place helpers.
#pragma once

#include <torch/torch.h>

#include <stdexcept>

#include "trainer/comm.h"

namespace trainer {

inline chorusDataType_t chorusTypeOf(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat: return chorusFloat32;
    case torch::kDouble: return chorusFloat64;
    case torch::kLong: return chorusInt64;
    case torch::kInt: return chorusInt32;
    default:
      throw std::invalid_argument(std::string("no Chorus type for tensor type ") +
                                  c10::toString(t.scalar_type()));
  }
}

/// Blocking in-place all-reduce of a contiguous tensor.
inline void allReduceTensor(Comm& comm, torch::Tensor& t, chorusRedOp_t op) {
  TORCH_CHECK(t.is_contiguous(), "allReduceTensor needs a contiguous tensor");
  comm.allReduce(t.data_ptr(), size_t(t.numel()), chorusTypeOf(t), op);
}

/// Blocking in-place broadcast of a contiguous tensor from `root`.
inline void broadcastTensor(Comm& comm, torch::Tensor& t, int root) {
  TORCH_CHECK(t.is_contiguous(), "broadcastTensor needs a contiguous tensor");
  comm.broadcast(t.data_ptr(), size_t(t.numel()), chorusTypeOf(t), root);
}

}  // namespace trainer
