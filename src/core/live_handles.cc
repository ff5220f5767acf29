#include "src/core/live_handles.h"

#include <mutex>
#include <unordered_set>

namespace chorus {
namespace {

struct LiveHandles {
  std::mutex mutex;
  std::unordered_set<const void*> comms, streams;
  std::unordered_set<const void*>& of(HandleKind kind) {
    return kind == HandleKind::Comm ? comms : streams;
  }
};

// Never destroyed: a handle may be checked or destroyed from a static destructor or an
// atexit handler after this file's statics would have gone.
LiveHandles& liveHandles() {
  static auto* h = new LiveHandles();
  return *h;
}

}  // namespace

void liveHandleAdd(HandleKind kind, const void* handle) {
  LiveHandles& h = liveHandles();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.of(kind).insert(handle);
}

void liveHandleRemove(HandleKind kind, const void* handle) {
  LiveHandles& h = liveHandles();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.of(kind).erase(handle);
}

bool liveHandleHas(HandleKind kind, const void* handle) {
  if (handle == nullptr) return false;
  LiveHandles& h = liveHandles();
  std::lock_guard<std::mutex> lock(h.mutex);
  return h.of(kind).count(handle) != 0;
}

}  // namespace chorus
