// coll_kernels.cu — the device-path collective kernels: a global thread index and a call to
// the CHORUS_HD body (kernels/coll_body.h), which the unit tests run on the host for every
// thread index of several grid shapes. Compiled with --fmad=false like reduce_kernels.cu.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_coll.h"

namespace chorus {
namespace kernels {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 4096;  // the grid-stride loop covers the rest

// Arguments travel by value in the kernel's parameter space (ReduceArgs is < 200 bytes).
template <class T, class F>
__global__ void __launch_bounds__(kThreads) reduceKernel(ReduceArgs a) {
  const size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  reduceBody<T, F>(a, t, static_cast<size_t>(gridDim.x) * blockDim.x);
}

template <class W>
__global__ void __launch_bounds__(kThreads) copyKernel(CopyArgs a) {
  const size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  copyBody<W>(a, t, static_cast<size_t>(gridDim.x) * blockDim.x);
}

unsigned blocksFor(size_t work) {
  size_t b = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b == 0 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

struct ReduceLauncher {
  const ReduceArgs& a;
  cudaStream_t s;
  cudaError_t e = cudaErrorInvalidValue;
  template <class T, class F>
  void run() {
    uintptr_t bits = reinterpret_cast<uintptr_t>(a.dst);
    for (int j = 0; j < a.nsrc; ++j) bits |= reinterpret_cast<uintptr_t>(a.src[j]);
    if (bits % alignof(T) != 0) return;  // would fault on the device
    reduceKernel<T, F><<<blocksFor(a.count), kThreads, 0, s>>>(a);
    e = cudaGetLastError();
  }
};

template <class W>
cudaError_t launchCopy(const CopyArgs& a, cudaStream_t s) {
  copyKernel<W><<<blocksFor(a.bytes / sizeof(W) * a.n), kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace

int cudaLaunchReduce(const ReduceArgs& a, void* cudaStream) {
  if (a.count == 0) return cudaSuccess;
  if (a.nsrc < 1 || a.nsrc > kMaxSources) return cudaErrorInvalidValue;
  ReduceLauncher l{a, static_cast<cudaStream_t>(cudaStream)};
  if (!visitReduce(a.spec, l)) return cudaErrorInvalidValue;
  return static_cast<int>(l.e);
}

int cudaLaunchCopy(const CopyArgs& a, void* cudaStream) {
  if (a.bytes == 0 || a.n == 0) return cudaSuccess;
  if (a.n < 0 || a.n > kMaxSources) return cudaErrorInvalidValue;
  auto s = static_cast<cudaStream_t>(cudaStream);
  switch (copyWord(a)) {
    case 16: return static_cast<int>(launchCopy<Word16>(a, s));
    case 8: return static_cast<int>(launchCopy<uint64_t>(a, s));
    case 4: return static_cast<int>(launchCopy<uint32_t>(a, s));
    case 2: return static_cast<int>(launchCopy<uint16_t>(a, s));
    default: return static_cast<int>(launchCopy<uint8_t>(a, s));
  }
}

}  // namespace kernels
}  // namespace chorus
