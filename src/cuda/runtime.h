// runtime.h — every CUDA runtime call Chorus makes, behind one small interface.
//
// Why an interface: no machine of ours has a GPU, so the device data path (pointer
// classification, piece scheduling, ordering with the user's stream, staging through
// pinned slots) must be checkable without one. The library holds exactly two
// implementations: runtime_cudart.cc (the real cudart calls, compiled only with
// -Dcuda=enabled) and runtime_none.cc (host-only builds: every call says "no CUDA in this
// build"). Tests bring a third, a stand-in (tests/unit/cuda/cuda_standin.*) that models
// device memory, streams and events on the host, and hand it to the device path through
// a wrapped stream (streamFromRuntime), so nothing here is global or switchable at run time.
//
// Handles (streams, events) are opaque void*; a stream is the user's cudaStream_t as is.
// Every call returns true on success; on failure `err` gets a one-line reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/coll_body.h"

namespace chorus {
namespace cuda {

enum class MemKind {
  Host,        // ordinary host memory (pageable), or memory CUDA does not know
  PinnedHost,  // page-locked host memory (cudaHostAlloc / cudaHostRegister)
  Device,      // memory on a GPU (cudaMalloc, or managed memory)
};

/// cudaIpcMemHandle_t's bytes (64), opaque to everything but the runtime.
struct IpcHandle {
  unsigned char bytes[64] = {};
};

struct PtrInfo {
  MemKind kind = MemKind::Host;
  int device = -1;  // the GPU owning Device memory
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  /// "cudart", "none" or "stand-in", for messages.
  virtual const char* name() const = 0;
  /// Whether a GPU can be used by this process; when not, `why` says why (no CUDA in this
  /// build, CHORUS_CUDA_DISABLE=1, cudaGetDeviceCount's error, zero devices).
  virtual bool usable(std::string* why) const = 0;
  /// What `p` points to (cudaPointerGetAttributes).
  virtual bool classify(const void* p, PtrInfo* out, std::string* err) const = 0;
  /// The device a stream belongs to (the current device when it is the legacy stream),
  /// and a check that the handle is a live stream (cudaStreamQuery).
  virtual bool streamDevice(void* stream, int* device, std::string* err) const = 0;
  /// The calling thread's current device (cudaGetDevice), and making one current
  /// (cudaSetDevice): kernels can only be launched into a stream of the current device.
  virtual bool getDevice(int* device, std::string* err) const = 0;
  virtual bool setDevice(int device, std::string* err) const = 0;
  /// Page-locked host memory mapped into the device address space (cudaHostAlloc with
  /// cudaHostAllocMapped|Portable); *devPtr is what a kernel uses to reach it.
  virtual bool hostAllocMapped(size_t bytes, void** hostPtr, void** devPtr,
                               std::string* err) const = 0;
  virtual void hostFree(void* hostPtr) const = 0;
  /// cudaMemcpy2DAsync(..., cudaMemcpyDefault, stream): `height` rows of `width` bytes.
  virtual bool memcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                             size_t height, void* stream, std::string* err) const = 0;
  /// Events without timing, with blocking synchronization (the host thread sleeps).
  virtual bool eventCreate(void** ev, std::string* err) const = 0;
  virtual void eventDestroy(void* ev) const = 0;
  virtual bool eventRecord(void* ev, void* stream, std::string* err) const = 0;
  virtual bool eventSynchronize(void* ev, std::string* err) const = 0;
  /// Enqueues on `stream` a wait until the 64-bit word at `flagDev` (mapped host memory)
  /// is >= target: the stream's later work runs only after the host side said so.
  virtual bool waitFlag(const volatile uint64_t* flagDev, uint64_t target, void* stream,
                        std::string* err) const = 0;
  virtual bool streamSynchronize(void* stream, std::string* err) const = 0;

  // --- the same-host device path (docs/CUDA.md) ---------------------------------------
  /// cudaMalloc / cudaFree on the current device.
  virtual bool deviceMalloc(size_t bytes, void** dev, std::string* err) const = 0;
  virtual void deviceFree(void* dev) const = 0;
  /// cudaIpcGetMemHandle of the allocation starting at `dev`; cudaIpcOpenMemHandle (lazy
  /// peer access) of another process's handle; cudaIpcCloseMemHandle.
  virtual bool ipcGetHandle(void* dev, IpcHandle* out, std::string* err) const = 0;
  virtual bool ipcOpenHandle(const IpcHandle& h, void** dev, std::string* err) const = 0;
  virtual void ipcCloseHandle(void* dev) const = 0;
  /// cudaDeviceCanAccessPeer (a device can always reach itself).
  virtual bool canAccessPeer(int device, int peerDevice, bool* can, std::string* err) const = 0;
  /// How many GPUs this process sees (cudaGetDeviceCount).
  virtual bool deviceCount(int* n, std::string* err) const = 0;
  /// A non-blocking stream of the current device, and its destruction.
  virtual bool streamCreate(void** stream, std::string* err) const = 0;
  virtual void streamDestroy(void* stream) const = 0;
  /// The device-path kernels (kernels/coll_body.h), enqueued on `stream`.
  virtual bool launchReduce(const kernels::ReduceArgs& a, void* stream, std::string* err) const = 0;
  virtual bool launchCopy(const kernels::CopyArgs& a, void* stream, std::string* err) const = 0;
};

/// The runtime of this build: cudart with -Dcuda=enabled, otherwise "none".
/// Immutable; CHORUS_CUDA_DISABLE=1 makes cudart's usable() say no.
const Runtime& defaultRuntime();

}  // namespace cuda
}  // namespace chorus
