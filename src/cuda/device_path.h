// device_path.h — what the rest of Chorus calls to handle CUDA streams and device buffers.
//
// A chorusStream made by chorusStreamFromCuda is a host stream (src/enqueue/stream.h: its
// worker thread runs the host algorithms) with a StreamBinding: the CUDA stream, the
// Runtime that reaches it, a mapped "pieces done" word and pools of pinned staging and
// events. The binding is the stream's DeviceExecutor (src/enqueue/stream.h): calls on such
// a stream go through it instead of the host queue's plain path; nothing here is touched
// by calls on NULL or plain host streams.
#pragma once

#include <cstddef>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chorus.h"
#include "src/cuda/peers.h"
#include "src/cuda/runtime.h"
#include "src/enqueue/enqueue.h"
#include "src/enqueue/stream.h"

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

/// What one (wrapped stream, communicator) pair learned at its first call: the verdict of
/// peers.h and, on the device path, the scratch areas of every rank (docs/CUDA.md).
struct CommLink {
  /// The communicator it was agreed with (a later one may reuse the address).
  chorusUniqueId id{};
  int rank = -1, nranks = 0;
  // Set once by the first call's job (on the stream's worker); later calls wait for it.
  std::mutex agreeMutex;
  std::condition_variable agreeCv;
  bool agreed = false;
  chorusResult_t agreeResult = chorusSuccess;
  Verdict verdict = Verdict::Staging;
  std::string why;                 // why not the device path
  void* scratch = nullptr;         // this rank's device scratch (freed with the binding)
  size_t pieceBytes = 0;           // per block; scratch = (nranks + 1) * pieceBytes
  std::vector<void*> peerScratch;  // by rank: raw (same process) or IPC-opened
  std::vector<uint64_t> peerAddr;  // by rank: the address its owner reported (identity)
  std::vector<void*> opened;       // IPC-opened, closed with the binding
};

/// The device side of a chorusStream made by chorusStreamFromCuda: its DeviceExecutor
/// (src/enqueue/stream.h), owned by the stream.
struct StreamBinding final : DeviceExecutor {
  StreamBinding() = default;
  StreamBinding(const StreamBinding&) = delete;
  StreamBinding& operator=(const StreamBinding&) = delete;
  /// Once bound (`ready`): waits for the CUDA stream, frees the pinned memory and events.
  ~StreamBinding() override;
  chorusResult_t checkBuffer(chorusComm* comm, const void* ptr, size_t bytes, const char* api,
                             const char* argName, bool writable) override;
  chorusResult_t enqueue(chorusStream* s, const std::vector<Op>& ops, RunHostOps runHost) override;
  chorusResult_t synchronize() override;

  bool ready = false;  // fully set up (the stream owns it from then on)
  const Runtime* rt = nullptr;
  void* cudaStream = nullptr;
  int device = 0;
  PinnedBlock flagBlock;         // its first 8 bytes: pieces finished by the host side
  uint64_t* flagHost = nullptr;  // written by the stream's worker only
  const volatile uint64_t* flagDev = nullptr;  // read by the wait kernels
  std::mutex mutex;                 // guards everything below (callers may share a stream)
  uint64_t issued = 0;              // pieces handed out; the worker finishes them in order
  std::deque<PinnedBlock> staging;  // stable addresses (jobs hold them); freed at destroy
  std::vector<void*> freeEvents;
  std::vector<void*> allEvents;
  // The device path (src/cuda/direct.cc): a stream of our own for its copies and kernels
  // (the user's stream waits for the whole call), and what each communicator agreed on.
  void* workStream = nullptr;  // created by the first exchange, on the worker
  std::mutex linkMutex;        // one exchange at a time; guards `links`
  std::map<const chorusComm*, std::unique_ptr<CommLink>> links;
  std::vector<std::unique_ptr<CommLink>> retired;  // of destroyed communicators
  /// Tests force a path without the process-wide CHORUS_CUDA_PATH (-1: the parameter).
  int forcedMode = -1;
};

/// chorusStreamFromCuda through `rt` (defaultRuntime() for the public call; tests pass a
/// stand-in). chorusInvalidUsage with the reason when no GPU can be used.
chorusResult_t streamFromRuntime(const Runtime& rt, void* cudaStream, chorusStream** out);
/// For the host path's error message when a buffer is not host memory: what CUDA says
/// about it ("memory of GPU 0: ...", "no GPU can be used: ..."), never empty.
std::string describeNonHostPointer(const void* ptr);

/// StreamBinding::enqueue: runs `ops` as host collectives on the stream's worker: pieces
/// of every buffer go through pinned staging, ordered with the CUDA stream (docs/CUDA.md).
/// `runHost` runs a set of ops with host pointers and records asynchronous errors. One op
/// outside a group is cut into pieces.
chorusResult_t enqueueDeviceOps(StreamBinding* b, chorusStream* s, const std::vector<Op>& ops,
                                DeviceExecutor::RunHostOps runHost);

/// Piece size per block (CHORUS_CUDA_PIECE_BYTES).
size_t pieceBytes();

/// The device path (direct.cc). linkFor: the (stream, communicator)'s CommLink; a new one
/// (*isNew, only with `create`) is agreed on by the first call's job (enqueueDirect with
/// agreeFirst), so the first call does not block; waitAgreed: until that agreement ended,
/// its result. Null with *r set for a bad CHORUS_CUDA_PATH.
CommLink* linkFor(StreamBinding* b, chorusComm* comm, bool create, bool* isNew, chorusResult_t* r);
chorusResult_t waitAgreed(CommLink* L);
/// Queues one call for the device path: the user's stream waits while the stream's worker
/// (agrees on the path first when agreeFirst,) agrees with the peers on the call, runs the
/// kernels (or stages a call some rank cannot run on the device) and releases it.
chorusResult_t enqueueDirect(StreamBinding* b, chorusStream* s, const Op& op, CommLink* link,
                             bool agreeFirst, DeviceExecutor::RunHostOps runHost);
/// Tests: makes a stream made by streamFromRuntime take `m` instead of CHORUS_CUDA_PATH
/// (before its first call on a communicator). False for any other stream.
bool forcePathForTests(chorusStream* s, PathMode m);
/// Frees what the device path holds (binding teardown, after the streams drained).
void releaseLinks(StreamBinding* b);

}  // namespace cuda
}  // namespace chorus
