// wait_kernel.cu — a stream waits for a host-written flag (see cuda_wait.h).
//
// Why a spinning kernel: the runtime API has no "wait until host memory holds a value"
// operation (that is the driver's cuStreamWaitValue64), and an event can only be waited on
// once it has been recorded, which the host side does long after the call returned. One
// thread polls the mapped word with a volatile load (system scope: the host's store
// travels over PCIe/NVLink-C2C and is never cached in L1) and sleeps between polls so it
// takes almost nothing from the SM it sits on.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_wait.h"

namespace chorus {
namespace kernels {
namespace {

__global__ void waitFlagKernel(const volatile unsigned long long* flag, unsigned long long target) {
  while (*flag < target) __nanosleep(2000);
  __threadfence_system();  // later loads by this stream's work see what the host wrote first
}

}  // namespace

int cudaWaitFlag(const volatile uint64_t* flagDev, uint64_t target, void* cudaStream) {
  waitFlagKernel<<<1, 1, 0, static_cast<cudaStream_t>(cudaStream)>>>(
      reinterpret_cast<const volatile unsigned long long*>(flagDev),
      static_cast<unsigned long long>(target));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kernels
}  // namespace chorus
