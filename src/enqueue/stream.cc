#include "src/enqueue/stream.h"

#include <cstdint>

#include "src/core/checks.h"
#include "src/core/live_handles.h"
#include "src/core/params.h"
#include "src/core/wait.h"

namespace chorus {
namespace {

void workerLoop(chorusStream* s) {
  // Whoever queued the work is not blocked on this thread's waits: spin little, so the
  // caller's own compute (DDP's backward pass) keeps the cores (CHORUS_SPIN_STREAM_NS).
  setThreadSpinCap(paramInt(Param::SpinStreamNs));
  std::unique_lock<std::mutex> lock(s->mutex);
  for (;;) {
    s->workCv.wait(lock, [s] { return s->stop || !s->queue.empty(); });
    if (s->queue.empty()) return;  // stop requested and nothing left
    auto fn = std::move(s->queue.front());
    s->queue.pop_front();
    s->busy = true;
    lock.unlock();
    clearThreadLastError();
    chorusResult_t r = fn();
    std::string detail = r == chorusSuccess ? std::string() : std::string(threadLastError());
    lock.lock();
    s->busy = false;
    if (r != chorusSuccess && s->firstError == chorusSuccess) {
      s->firstError = r;
      s->firstErrorDetail = detail;
    }
    if (s->queue.empty()) s->idleCv.notify_all();
  }
}

}  // namespace

chorusResult_t streamCreate(chorusStream** out) {
  auto* s = new chorusStream();
  try {
    s->worker = std::thread(workerLoop, s);
  } catch (...) {
    delete s;
    CHORUS_FAIL(chorusSystemError, "could not start the stream's worker thread");
  }
  liveHandleAdd(HandleKind::Stream, s);
  *out = s;
  return chorusSuccess;
}

chorusResult_t streamPush(chorusStream* s, std::function<chorusResult_t()> fn) {
  std::lock_guard<std::mutex> lock(s->mutex);
  if (s->stop) CHORUS_FAIL(chorusInvalidUsage, "stream is being destroyed");
  s->queue.push_back(std::move(fn));
  s->workCv.notify_one();
  return chorusSuccess;
}

chorusResult_t streamSynchronize(chorusStream* s) {
  std::unique_lock<std::mutex> lock(s->mutex);
  s->idleCv.wait(lock, [s] { return s->queue.empty() && !s->busy; });
  chorusResult_t r = s->firstError;
  std::string detail = s->firstErrorDetail;
  s->firstError = chorusSuccess;
  s->firstErrorDetail.clear();
  lock.unlock();
  if (r != chorusSuccess)
    return fail(r, __FILE__, __LINE__, "an operation on the stream failed: %s", detail.c_str());
  if (s->device) return s->device->synchronize();  // and the device stream's copies
  return chorusSuccess;
}

chorusResult_t streamQuery(chorusStream* s) {
  std::lock_guard<std::mutex> lock(s->mutex);
  return (s->queue.empty() && !s->busy) ? chorusSuccess : chorusInProgress;
}

void streamDestroy(chorusStream* s) {
  liveHandleRemove(HandleKind::Stream, s);
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->stop = true;
    s->workCv.notify_all();
  }
  if (s->worker.joinable()) s->worker.join();
  s->device.reset();  // waits for the device stream, frees its binding
  delete s;
}

chorusResult_t streamCheck(const chorusStream* s, const char* api) {
  // cudaStreamLegacy (0x1) and cudaStreamPerThread (0x2) are not addresses: never read them.
  if (reinterpret_cast<uintptr_t>(s) < 4096)
    CHORUS_FAIL(chorusInvalidUsage,
                "%s: stream %p is a CUDA stream handle (cudaStreamLegacy/cudaStreamPerThread?), "
                "not a Chorus stream: wrap it with chorusStreamFromCuda",
                api, static_cast<const void*>(s));
  if (!liveHandleHas(HandleKind::Stream, s))  // never read: a destroyed one is freed
    CHORUS_FAIL(chorusInvalidUsage,
                "%s: stream %p is not a live Chorus stream (destroyed, or a cudaStream_t not "
                "wrapped by chorusStreamFromCuda?)",
                api, static_cast<const void*>(s));
  return chorusSuccess;
}

}  // namespace chorus
