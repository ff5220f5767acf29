// direct_parts.h — pieces of the device path shared by direct.cc (collectives) and
// direct_p2p.cc (send/receive). Internal to src/cuda.
#pragma once

#include <cstddef>

#include "src/cuda/device_path.h"

namespace chorus {
namespace cuda {

/// A host operation of `bytes` uint8 elements on `comm` (a meeting or a header exchange),
/// run through the enqueue layer's RunHostOps. `peer`: root / peer, -1 for none.
Op hostOp(chorusComm* comm, Coll coll, const void* send, void* recv, size_t bytes, int peer);
/// Device memory as the binding's runtime sees it.
bool isDevice(const Runtime& rt, const void* p);
/// The whole call staged through the stream's pinned pool and run by the host (a rank
/// holds host memory, or a send/receive pair cannot use the device).
chorusResult_t stageOnWorker(StreamBinding* b, const Op& op,
                             const DeviceExecutor::RunHostOps& runHost);
/// One send or receive on the worker: the pair agrees, then the receiver's kernels copy
/// from the sender's scratch piece by piece, or both stage.
chorusResult_t runDirectP2p(StreamBinding* b, const Op& op, CommLink* L,
                            const DeviceExecutor::RunHostOps& runHost);

}  // namespace cuda
}  // namespace chorus
