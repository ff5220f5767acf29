// reduce_spec.h — what a reduction kernel is asked to do: the kernels' input, shared by the
// host (host/host_reduce.h) and CUDA (cuda/cuda_reduce.h) entry points. Plain vocabulary:
// src/core and everything above may include this header (and only this one from kernels/
// in core).
#pragma once

#include "chorus.h"

namespace chorus {
namespace kernels {

/// The arithmetic of a reduction, independent of which op the user named.
enum class ReduceKind : int { Sum = 0, Prod = 1, Max = 2, Min = 3 };

/// A resolved reduction: sum/prod/max/min on one type, plus the two decorations that
/// implement avg and pre-multiplied sum.
struct ReduceSpec {
  chorusDataType_t type = chorusFloat32;
  ReduceKind kind = ReduceKind::Sum;
  bool preMul = false;  ///< multiply the local input by `scalar` before combining
  alignas(8) unsigned char scalar[8] = {0};  ///< one element of `type` (float16/bf16: 2 bytes)
  int postDiv = 0;                           ///< > 1: divide the final result by this (integer avg)
};

/// Flags for reduce() and cudaReduce().
enum : unsigned {
  kApplyPre = 1u << 0,   ///< apply spec.preMul to `local`
  kApplyPost = 1u << 1,  ///< apply spec.postDiv to the result
  kStreaming = 1u << 2,  ///< write dst with non-temporal stores (large outputs)
};

}  // namespace kernels
}  // namespace chorus
