// host_reduce.h — the host (CPU) entry points of the element kernels.
//
// Algorithms call these to move and combine bytes; they never see a data type's
// arithmetic. Implementations live in host_reduce.cc, compiled several times (baseline,
// AVX2, AVX-512) and dispatched once at startup by CPU features.
#pragma once

#include <cstddef>
#include <cstdint>

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
  bool preMul = false;          ///< multiply the local input by `scalar` before combining
  alignas(8) unsigned char scalar[8] = {0};  ///< one element of `type` (float16/bf16: 2 bytes)
  int postDiv = 0;              ///< > 1: divide the final result by this (integer avg)
};

/// Flags for reduce().
enum : unsigned {
  kApplyPre = 1u << 0,   ///< apply spec.preMul to `local`
  kApplyPost = 1u << 1,  ///< apply spec.postDiv to the result
  kStreaming = 1u << 2,  ///< write dst with non-temporal stores (large outputs)
};

/// dst[i] = post( acc[i] OP pre(local[i]) ) for i < count.
/// acc == nullptr means dst[i] = post(pre(local[i])). dst may alias acc or local exactly.
/// Pointers need no particular alignment. pre/post apply only when flagged.
void reduce(const ReduceSpec& spec, void* dst, const void* acc, const void* local, size_t count,
            unsigned flags);

/// memcpy, with non-temporal stores when `streaming` (dst must not overlap src).
void copy(void* dst, const void* src, size_t bytes, bool streaming);

/// Bytes per element of a data type (0 for an invalid type).
size_t typeSize(chorusDataType_t type);

/// Name of the instruction set the dispatcher picked ("avx512", "avx2", "baseline").
const char* isaName();

}  // namespace kernels
}  // namespace chorus
