// runtime_cudart.cc — the Runtime interface on the real CUDA runtime (-Dcuda=enabled only).
//
// Built here with nvcc 13 / cudart, never run on a GPU here (docs/CUDA.md). Each method is
// one or two cudart calls; every error is taken back with cudaGetLastError so a failed call
// never poisons the next one on this thread.
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "src/core/params.h"
#include "kernels/cuda/cuda_coll.h"
#include "kernels/cuda/cuda_wait.h"
#include "src/cuda/runtime.h"

namespace chorus {
namespace cuda {
namespace {

bool failed(cudaError_t e, const char* what, std::string* err) {
  if (e == cudaSuccess) return false;
  (void)cudaGetLastError();  // clear the sticky-until-read error of this thread
  if (err)
    *err = std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  return true;
}

class CudartRuntime final : public Runtime {
 public:
  const char* name() const override { return "cudart"; }

  bool usable(std::string* why) const override {
    if (paramInt(Param::CudaDisable) != 0) {
      if (why) *why = "CHORUS_CUDA_DISABLE=1 forces host-only behaviour";
      return false;
    }
    int n = 0;
    if (failed(cudaGetDeviceCount(&n), "cudaGetDeviceCount", why)) return false;
    if (n <= 0) {
      if (why) *why = "cudaGetDeviceCount found no GPU";
      return false;
    }
    return true;
  }

  bool classify(const void* p, PtrInfo* out, std::string* err) const override {
    cudaPointerAttributes a{};
    if (failed(cudaPointerGetAttributes(&a, p), "cudaPointerGetAttributes", err)) return false;
    out->device = a.device;
    switch (a.type) {
      case cudaMemoryTypeDevice:
      case cudaMemoryTypeManaged: out->kind = MemKind::Device; break;
      case cudaMemoryTypeHost: out->kind = MemKind::PinnedHost; break;
      default:
        out->kind = MemKind::Host;
        out->device = -1;
        break;
    }
    return true;
  }

  bool streamDevice(void* stream, int* device, std::string* err) const override {
    auto s = static_cast<cudaStream_t>(stream);
    const cudaError_t q = cudaStreamQuery(s);
    if (q != cudaSuccess && q != cudaErrorNotReady && failed(q, "cudaStreamQuery", err))
      return false;
    return !failed(cudaStreamGetDevice(s, device), "cudaStreamGetDevice", err);
  }

  bool getDevice(int* device, std::string* err) const override {
    return !failed(cudaGetDevice(device), "cudaGetDevice", err);
  }

  bool setDevice(int device, std::string* err) const override {
    return !failed(cudaSetDevice(device), "cudaSetDevice", err);
  }

  bool hostAllocMapped(size_t bytes, void** hostPtr, void** devPtr,
                       std::string* err) const override {
    if (failed(cudaHostAlloc(hostPtr, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
               "cudaHostAlloc", err))
      return false;
    if (failed(cudaHostGetDevicePointer(devPtr, *hostPtr, 0), "cudaHostGetDevicePointer", err)) {
      cudaFreeHost(*hostPtr);
      return false;
    }
    return true;
  }

  void hostFree(void* hostPtr) const override {
    if (hostPtr) (void)failed(cudaFreeHost(hostPtr), "cudaFreeHost", nullptr);
  }

  bool memcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                     size_t height, void* stream, std::string* err) const override {
    return !failed(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDefault,
                                     static_cast<cudaStream_t>(stream)),
                   "cudaMemcpy2DAsync", err);
  }

  bool eventCreate(void** ev, std::string* err) const override {
    cudaEvent_t e = nullptr;
    if (failed(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync),
               "cudaEventCreateWithFlags", err))
      return false;
    *ev = e;
    return true;
  }

  void eventDestroy(void* ev) const override {
    if (ev)
      (void)failed(cudaEventDestroy(static_cast<cudaEvent_t>(ev)), "cudaEventDestroy", nullptr);
  }

  bool eventRecord(void* ev, void* stream, std::string* err) const override {
    return !failed(cudaEventRecord(static_cast<cudaEvent_t>(ev), static_cast<cudaStream_t>(stream)),
                   "cudaEventRecord", err);
  }

  bool eventSynchronize(void* ev, std::string* err) const override {
    return !failed(cudaEventSynchronize(static_cast<cudaEvent_t>(ev)), "cudaEventSynchronize", err);
  }

  bool waitFlag(const volatile uint64_t* flagDev, uint64_t target, void* stream,
                std::string* err) const override {
    return !failed(static_cast<cudaError_t>(kernels::cudaWaitFlag(flagDev, target, stream)),
                   "wait kernel launch", err);
  }

  bool streamSynchronize(void* stream, std::string* err) const override {
    return !failed(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                   "cudaStreamSynchronize", err);
  }
  bool deviceMalloc(size_t bytes, void** dev, std::string* err) const override {
    return !failed(cudaMalloc(dev, bytes ? bytes : 1), "cudaMalloc", err);
  }
  void deviceFree(void* dev) const override {
    if (dev) (void)failed(cudaFree(dev), "cudaFree", nullptr);
  }
  bool ipcGetHandle(void* dev, IpcHandle* out, std::string* err) const override {
    static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcHandle::bytes), "IPC handle size");
    cudaIpcMemHandle_t h{};
    if (failed(cudaIpcGetMemHandle(&h, dev), "cudaIpcGetMemHandle", err)) return false;
    std::memcpy(out->bytes, &h, sizeof h);
    return true;
  }
  bool ipcOpenHandle(const IpcHandle& in, void** dev, std::string* err) const override {
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, in.bytes, sizeof h);
    return !failed(cudaIpcOpenMemHandle(dev, h, cudaIpcMemLazyEnablePeerAccess),
                   "cudaIpcOpenMemHandle", err);
  }
  void ipcCloseHandle(void* dev) const override {
    if (dev) (void)failed(cudaIpcCloseMemHandle(dev), "cudaIpcCloseMemHandle", nullptr);
  }
  bool canAccessPeer(int device, int peerDevice, bool* can, std::string* err) const override {
    if (device == peerDevice) {
      *can = true;
      return true;
    }
    int v = 0;
    if (failed(cudaDeviceCanAccessPeer(&v, device, peerDevice), "cudaDeviceCanAccessPeer", err))
      return false;
    *can = v != 0;
    if (*can) {  // ranks of one process reach a peer GPU's memory only once this is on
      cudaError_t e = cudaDeviceEnablePeerAccess(peerDevice, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();
      else if (failed(e, "cudaDeviceEnablePeerAccess", err))
        return false;
    }
    return true;
  }
  bool deviceCount(int* n, std::string* err) const override {
    return !failed(cudaGetDeviceCount(n), "cudaGetDeviceCount", err);
  }
  bool streamCreate(void** stream, std::string* err) const override {
    cudaStream_t s = nullptr;
    if (failed(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate", err))
      return false;
    *stream = s;
    return true;
  }
  void streamDestroy(void* stream) const override {
    if (stream) (void)failed(cudaStreamDestroy(static_cast<cudaStream_t>(stream)), "", nullptr);
  }
  bool launchReduce(const kernels::ReduceArgs& a, void* stream, std::string* err) const override {
    return !failed(static_cast<cudaError_t>(kernels::cudaLaunchReduce(a, stream)),
                   "reduce kernel launch", err);
  }
  bool launchCopy(const kernels::CopyArgs& a, void* stream, std::string* err) const override {
    return !failed(static_cast<cudaError_t>(kernels::cudaLaunchCopy(a, stream)),
                   "copy kernel launch", err);
  }
};

}  // namespace

const Runtime& defaultRuntime() {
  static const CudartRuntime rt;  // stateless: every call goes straight to cudart
  return rt;
}

}  // namespace cuda
}  // namespace chorus
