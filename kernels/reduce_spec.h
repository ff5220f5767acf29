// reduce_spec.h — what a reduction kernel is asked to do: the kernels' input, shared by the
// host (host/host_reduce.h) and CUDA (cuda/cuda_reduce.h) entry points. Plain vocabulary:
// src/core and everything above may include this header (and only this one from kernels/
// in core).
#pragma once

#include <cstddef>

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

/// Bytes per element of a data type (0 for an invalid type). Inline here so that the
/// per-ISA kernel files and the dispatcher share one table.
inline size_t typeBytes(chorusDataType_t type) {
  switch (type) {
    case chorusInt8:
    case chorusUint8: return 1;
    case chorusFloat16:
    case chorusBfloat16: return 2;
    case chorusInt32:
    case chorusUint32:
    case chorusFloat32: return 4;
    case chorusInt64:
    case chorusUint64:
    case chorusFloat64: return 8;
    default: return 0;
  }
}

}  // namespace kernels
}  // namespace chorus
