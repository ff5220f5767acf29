// cuda_coll.h — launches of the device-path collective kernels (built with -Dcuda=enabled).
// The kernels are thin wrappers: each thread calls the body of kernels/coll_body.h with its
// global index and the grid's thread count.
#pragma once

#include "kernels/coll_body.h"

namespace chorus {
namespace kernels {

/// Enqueues reduceBody over `a` on `cudaStream` (a cudaStream_t). Returns a cudaError_t as
/// int: 0 launched (or count 0), cudaErrorInvalidValue for a bad type, nsrc outside 1..8 or
/// a pointer not aligned to the element, else the launch error.
int cudaLaunchReduce(const ReduceArgs& a, void* cudaStream);
/// Enqueues copyBody over `a`, in the widest word copyWord(a) allows. Same return values.
int cudaLaunchCopy(const CopyArgs& a, void* cudaStream);

}  // namespace kernels
}  // namespace chorus
