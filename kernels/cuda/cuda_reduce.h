// cuda_reduce.h — the device-buffer counterpart of kernels::reduce() (built with
// -Dcuda=enabled). The element operations are those of reduce.h, compiled for sm_80/sm_90.
#pragma once

#include <cstddef>

#include "kernels/reduce_spec.h"

namespace chorus {
namespace kernels {

/// dst[i] = post(acc[i] OP pre(local[i])) on device memory, enqueued on `cudaStream` (a
/// cudaStream_t; nullptr = the legacy default stream). Same contract as reduce(): acc may
/// be nullptr, dst may alias acc or local exactly. Pointers must be aligned to the element
/// size (cudaMalloc memory plus whole-element offsets). kStreaming is ignored on the GPU.
/// Returns a cudaError_t as int: 0 on success, cudaErrorInvalidValue for a bad type or a
/// misaligned pointer, otherwise the launch error (e.g. cudaErrorNoDevice without a GPU).
/// Does not synchronize.
int cudaReduce(const ReduceSpec& spec, void* dst, const void* acc, const void* local, size_t count,
               unsigned flags, void* cudaStream);

}  // namespace kernels
}  // namespace chorus
