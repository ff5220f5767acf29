// device_path.h — what the rest of Chorus calls to handle CUDA streams and device buffers.
//
// A chorusStream made by chorusStreamFromCuda is a host stream (src/enqueue/stream.h: its
// worker thread runs the host algorithms) with a StreamBinding: the CUDA stream, the
// Runtime that reaches it, a mapped "pieces done" word and pools of pinned staging and
// events. Calls on such a stream go through enqueueDeviceOps instead of the host queue's
// plain path; nothing here is touched by calls on NULL or plain host streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "chorus.h"
#include "src/cuda/runtime.h"
#include "src/enqueue/enqueue.h"

struct chorusStream;

namespace chorus {
namespace cuda {

/// One pinned, mapped host area (staging for one call, or the flag word).
struct PinnedBlock {
  void* host = nullptr;
  void* dev = nullptr;
  size_t bytes = 0;
  bool inUse = false;
};

struct StreamBinding {
  const Runtime* rt = nullptr;
  void* cudaStream = nullptr;
  int device = 0;
  PinnedBlock flagBlock;        // its first 8 bytes: pieces finished by the host side
  uint64_t* flagHost = nullptr; // written by the stream's worker only
  const volatile uint64_t* flagDev = nullptr;  // read by the wait kernels
  std::mutex mutex;             // guards everything below (callers may share a stream)
  uint64_t issued = 0;          // pieces handed out; the worker finishes them in order
  std::deque<PinnedBlock> staging;  // stable addresses (jobs hold them); freed at destroy
  std::vector<void*> freeEvents;
  std::vector<void*> allEvents;
};

/// chorusStreamFromCuda through `rt` (defaultRuntime() for the public call; tests pass a
/// stand-in). chorusInvalidUsage with the reason when no GPU can be used.
chorusResult_t streamFromRuntime(const Runtime& rt, void* cudaStream, chorusStream** out);
/// Called by streamDestroy after the worker stopped: waits for the CUDA stream, frees the
/// pinned memory and events.
void destroyBinding(StreamBinding* b);
/// After the host queue drained: waits for the CUDA stream too.
chorusResult_t synchronizeBinding(StreamBinding* b);

/// Argument check for a buffer of a call on a CUDA stream: device, pinned or pageable host
/// memory are all fine (pageable memory is checked like on the host path).
chorusResult_t checkCallBuffer(StreamBinding* b, chorusComm* comm, const void* ptr, size_t bytes,
                               const char* api, const char* argName, bool writable);

/// For the host path's error message when a buffer is not host memory: what CUDA says
/// about it ("memory of GPU 0: ...", "no GPU can be used: ..."), never empty.
std::string describeNonHostPointer(const void* ptr);

/// Runs `ops` as host collectives on the stream's worker: pieces of every buffer go
/// through pinned staging, ordered with the CUDA stream (docs/CUDA.md). `runHost` runs a
/// set of ops with host pointers (the enqueue layer's executeBatch / runBatches) and
/// records asynchronous errors. One op outside a group is cut into pieces.
using RunHostOps = std::function<chorusResult_t(std::vector<Op>& ops)>;
chorusResult_t enqueueDeviceOps(chorusStream* s, const std::vector<Op>& ops, RunHostOps runHost);

/// Piece size per block (CHORUS_CUDA_PIECE_BYTES).
size_t pieceBytes();

}  // namespace cuda
}  // namespace chorus
