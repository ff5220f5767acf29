// binding.cc — a chorusStream bound to a CUDA stream: creation, checks of user buffers,
// synchronization and teardown.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "src/comm/comm.h"
#include "src/core/checks.h"
#include "src/core/params.h"
#include "src/cuda/device_guard.h"
#include "src/cuda/device_path.h"
#include "src/enqueue/ptrcheck.h"
#include "src/enqueue/stream.h"

namespace chorus {
namespace cuda {

size_t pieceBytes() {
  const int64_t v = paramInt(Param::CudaPieceBytes);
  return v <= 0 ? 0 : static_cast<size_t>(v);
}

chorusResult_t streamFromRuntime(const Runtime& rt, void* cudaStream, chorusStream** out) {
  if (!out) CHORUS_FAIL(chorusInvalidArgument, "chorusStreamFromCuda: stream is NULL");
  *out = nullptr;
  std::string why;
  if (!rt.usable(&why))
    CHORUS_FAIL(chorusInvalidUsage,
                "chorusStreamFromCuda: no GPU can be used by this process (%s); use a host "
                "stream or NULL with host buffers",
                why.c_str());
  auto* b = new StreamBinding();
  b->rt = &rt;
  b->cudaStream = cudaStream;
  if (!rt.streamDevice(cudaStream, &b->device, &why)) {
    delete b;
    CHORUS_FAIL(chorusInvalidUsage, "chorusStreamFromCuda: %p is not a usable CUDA stream (%s)",
                cudaStream, why.c_str());
  }
  PinnedBlock& f = b->flagBlock;
  f.bytes = 64;  // a cache line of its own
  if (!rt.hostAllocMapped(f.bytes, &f.host, &f.dev, &why)) {
    delete b;
    CHORUS_FAIL(chorusSystemError, "chorusStreamFromCuda: pinned flag: %s", why.c_str());
  }
  b->flagHost = static_cast<uint64_t*>(f.host);
  __atomic_store_n(b->flagHost, uint64_t{0}, __ATOMIC_RELEASE);
  b->flagDev = static_cast<const volatile uint64_t*>(f.dev);
  chorusStream* s = nullptr;
  chorusResult_t r = streamCreate(&s);
  if (r != chorusSuccess) {
    rt.hostFree(f.host);
    delete b;
    return r;
  }
  b->ready = true;
  s->device.reset(b);
  *out = s;
  return chorusSuccess;
}

bool forcePathForTests(chorusStream* s, PathMode m) {
  auto* b = s ? dynamic_cast<StreamBinding*>(s->device.get()) : nullptr;
  if (!b) return false;
  b->forcedMode = static_cast<int>(m);
  return true;
}

StreamBinding::~StreamBinding() {
  if (!ready) return;
  std::string why;
  // Nothing may still read the staging or the flag: the worker is gone, and the CUDA
  // stream's copies and waits must have finished too.
  (void)rt->streamSynchronize(cudaStream, &why);
  if (workStream) (void)rt->streamSynchronize(workStream, &why);
  releaseLinks(this);
  for (void* ev : allEvents) rt->eventDestroy(ev);
  for (PinnedBlock& p : staging) rt->hostFree(p.host);
  rt->hostFree(flagBlock.host);
}

chorusResult_t StreamBinding::synchronize() {
  std::string why;
  if (!rt->streamSynchronize(cudaStream, &why))
    CHORUS_FAIL(chorusSystemError, "chorusStreamSynchronize: CUDA stream %p: %s", cudaStream,
                why.c_str());
  return chorusSuccess;
}

chorusResult_t StreamBinding::enqueue(chorusStream* s, const std::vector<Op>& ops,
                                      RunHostOps runHost) {
  return enqueueDeviceOps(this, s, ops, std::move(runHost));
}

// Device, pinned or pageable host memory are all fine (pageable memory is checked like on
// the host path).
chorusResult_t StreamBinding::checkBuffer(chorusComm* comm, const void* ptr, size_t bytes,
                                          const char* api, const char* argName, bool writable) {
  StreamBinding* b = this;
  if (bytes == 0) return chorusSuccess;
  if (ptr == nullptr)
    CHORUS_FAIL(chorusInvalidArgument, "%s: %s is NULL but %zu bytes are to be accessed", api,
                argName, bytes);
  PtrInfo info;
  std::string why;
  if (!b->rt->classify(ptr, &info, &why))
    CHORUS_FAIL(chorusInvalidUsage, "%s: %s=%p: CUDA cannot tell what it points to (%s)", api,
                argName, ptr, why.c_str());
  // Pageable host memory: mapped and readable, checked here through the kernel without
  // touching it; whether it is writable is checked by the worker just before it writes
  // (device_path.cc), because probing it now would write a byte back while earlier work
  // on the stream may still be writing the buffer.
  (void)writable;
  if (info.kind == MemKind::Host)
    return checkHostBuffer(comm, ptr, bytes, api, argName, false, describeNonHostPointer);
  return chorusSuccess;  // device or pinned memory: cudaMemcpy reaches it
}

std::string describeNonHostPointer(const void* ptr) {
  const Runtime& rt = defaultRuntime();
  std::string why;
  if (!rt.usable(&why))
    return "and device pointers cannot be used: no GPU can be used by this process (" + why + ")";
  PtrInfo info;
  if (!rt.classify(ptr, &info, &why)) return "CUDA cannot tell what it is (" + why + ")";
  if (info.kind == MemKind::Device) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "it is memory of GPU %d: device buffers need a stream made by "
                  "chorusStreamFromCuda",
                  info.device);
    return buf;
  }
  return "CUDA does not know it either (a freed buffer?)";
}

}  // namespace cuda
}  // namespace chorus
