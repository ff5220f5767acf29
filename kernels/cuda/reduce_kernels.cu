// reduce_kernels.cu — CUDA kernels for reductions on device buffers: the element ops of
// reduce.h in a grid-stride loop, one kernel per (type, op). Runtime API only.
//
// pre/post/acc are kernel arguments rather than template parameters: they are uniform
// across the grid (no divergence) and keep the number of kernels at 10 types x 4 ops.
// Compiled with --fmad=false so results match the host kernels bit for bit.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/cuda/cuda_reduce.h"
#include "kernels/reduce.h"

namespace chorus {
namespace kernels {
namespace {

constexpr int kThreads = 256;
// Enough resident blocks to fill an H100/A100 several times over; the grid-stride loop
// covers the rest.
constexpr size_t kMaxBlocks = 4096;

template <class T, class F>
__global__ void __launch_bounds__(kThreads)
    reduceKernel(T* dst, const T* acc, const T* local, size_t n, T scalar, int div, bool pre,
                 bool post) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    T v = local[i];
    if (pre) v = applyPreMul(v, scalar);
    if (acc) v = F()(acc[i], v);  // dst may alias acc/local: element i is read before written
    if (post) v = applyPostDiv(v, div);
    dst[i] = v;
  }
}

template <class T, class F>
cudaError_t launch(const ReduceSpec& spec, void* dst, const void* acc, const void* local, size_t n,
                   unsigned flags, cudaStream_t stream) {
  const uintptr_t addrs = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(acc) |
                          reinterpret_cast<uintptr_t>(local);
  if (addrs % alignof(T) != 0) return cudaErrorInvalidValue;  // would fault on the device
  T scalar;
  std::memcpy(&scalar, spec.scalar, sizeof scalar);
  const bool pre = (flags & kApplyPre) && spec.preMul;
  const bool post = (flags & kApplyPost) && spec.postDiv > 1;
  size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  reduceKernel<T, F><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<const T*>(acc), static_cast<const T*>(local), n, scalar,
      spec.postDiv, pre, post);
  return cudaGetLastError();  // launch errors (no device, bad config); clears them
}

template <class T>
cudaError_t launchKind(const ReduceSpec& spec, void* dst, const void* acc, const void* local,
                       size_t n, unsigned flags, cudaStream_t s) {
  switch (spec.kind) {
    case ReduceKind::Sum: return launch<T, FuncSum<T>>(spec, dst, acc, local, n, flags, s);
    case ReduceKind::Prod: return launch<T, FuncProd<T>>(spec, dst, acc, local, n, flags, s);
    case ReduceKind::Max: return launch<T, FuncMax<T>>(spec, dst, acc, local, n, flags, s);
    case ReduceKind::Min: return launch<T, FuncMin<T>>(spec, dst, acc, local, n, flags, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

int cudaReduce(const ReduceSpec& spec, void* dst, const void* acc, const void* local, size_t count,
               unsigned flags, void* cudaStream) {
  if (count == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(cudaStream);
  cudaError_t e = cudaErrorInvalidValue;
  switch (spec.type) {
    case chorusInt8: e = launchKind<int8_t>(spec, dst, acc, local, count, flags, s); break;
    case chorusUint8: e = launchKind<uint8_t>(spec, dst, acc, local, count, flags, s); break;
    case chorusInt32: e = launchKind<int32_t>(spec, dst, acc, local, count, flags, s); break;
    case chorusUint32: e = launchKind<uint32_t>(spec, dst, acc, local, count, flags, s); break;
    case chorusInt64: e = launchKind<int64_t>(spec, dst, acc, local, count, flags, s); break;
    case chorusUint64: e = launchKind<uint64_t>(spec, dst, acc, local, count, flags, s); break;
    case chorusFloat16: e = launchKind<f16>(spec, dst, acc, local, count, flags, s); break;
    case chorusFloat32: e = launchKind<float>(spec, dst, acc, local, count, flags, s); break;
    case chorusFloat64: e = launchKind<double>(spec, dst, acc, local, count, flags, s); break;
    case chorusBfloat16: e = launchKind<bf16>(spec, dst, acc, local, count, flags, s); break;
    default: break;
  }
  return static_cast<int>(e);
}

}  // namespace kernels
}  // namespace chorus
