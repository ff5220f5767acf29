// cuda_wait.h — the one kernel the device data path needs besides the reductions: hold a
// stream until the host says a piece is done (built with -Dcuda=enabled).
#pragma once

#include <cstdint>

namespace chorus {
namespace kernels {

/// Enqueues on `cudaStream` (a cudaStream_t) one single-thread kernel that spins until the
/// 64-bit word at `flagDev` (page-locked host memory mapped into the device, written by a
/// host thread) is >= target. Work enqueued after it on the stream runs only then.
/// Returns a cudaError_t as int (0: launched).
int cudaWaitFlag(const volatile uint64_t* flagDev, uint64_t target, void* cudaStream);

}  // namespace kernels
}  // namespace chorus
