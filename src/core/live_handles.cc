#include "src/core/live_handles.h"

#include <atomic>
#include <mutex>
#include <unordered_set>

namespace chorus {
namespace {

// Every call asks here, so the question must cost no lock: the first kSlots live handles of
// a kind sit in atomic slots that a check scans with plain acquire loads (a mutex here cost
// 8-14 ns on a ~80-120 ns small call, perf/ab_colls.sh, docs/PERF.md #perf-plan-ab); more
// live handles than that go to a set under the mutex, which a check reads only while the
// set holds any. Adding and removing take the mutex (creation and destruction are rare).
constexpr int kSlots = 64;

struct Kind {
  std::atomic<const void*> slots[kSlots] = {};
  std::atomic<int> used{0};      // slots [0, used) may be non-null
  std::atomic<int> overflow{0};  // entries in `more`
  std::unordered_set<const void*> more;
};

struct LiveHandles {
  std::mutex mutex;
  Kind comms, streams;
  Kind& of(HandleKind kind) { return kind == HandleKind::Comm ? comms : streams; }
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
  Kind& k = h.of(kind);
  for (int i = 0; i < kSlots; ++i)
    if (k.slots[i].load(std::memory_order_relaxed) == nullptr) {
      k.slots[i].store(handle, std::memory_order_release);
      if (i >= k.used.load(std::memory_order_relaxed))
        k.used.store(i + 1, std::memory_order_release);
      return;
    }
  if (k.more.insert(handle).second) k.overflow.fetch_add(1, std::memory_order_release);
}

void liveHandleRemove(HandleKind kind, const void* handle) {
  LiveHandles& h = liveHandles();
  std::lock_guard<std::mutex> lock(h.mutex);
  Kind& k = h.of(kind);
  const int used = k.used.load(std::memory_order_relaxed);
  for (int i = 0; i < used; ++i)
    if (k.slots[i].load(std::memory_order_relaxed) == handle) {
      k.slots[i].store(nullptr, std::memory_order_release);
      return;
    }
  if (k.more.erase(handle) != 0) k.overflow.fetch_sub(1, std::memory_order_release);
}

bool liveHandleHas(HandleKind kind, const void* handle) {
  if (handle == nullptr) return false;
  LiveHandles& h = liveHandles();
  Kind& k = h.of(kind);
  const int used = k.used.load(std::memory_order_acquire);
  for (int i = 0; i < used; ++i)
    if (k.slots[i].load(std::memory_order_acquire) == handle) return true;
  if (k.overflow.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(h.mutex);
  return k.more.count(handle) != 0;
}

}  // namespace chorus
