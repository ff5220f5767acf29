// rdma/reg_cache.h — memory registrations the transport may drop and redo.
//
// Registering memory pins it and uses an entry of the HCA's translation tables; both are
// limited (memlock limit, max_mr). A receive FIFO must stay registered for as long as the
// peer may write into it, but a send staging buffer is only read by the HCA while one of
// its writes is in flight. So staging buffers are registered on first use through this
// cache, which keeps at most `maxBytes` registered: when a new registration would pass the
// bound, or the device refuses one (ENOMEM/EAGAIN), the least recently used buffer with no
// write in flight is deregistered first. A buffer in use is never evicted: if every one is
// busy the cache goes over its bound (logged once), or, when the device refuses, the
// caller waits for a write to complete and tries again.
//
// Used by the progress thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>

#include "transports/rdma/verbs.h"

namespace chorus {
namespace rdma {

class RegCache {
 public:
  RegCache(VerbsContext* ctx, size_t maxBytes) : ctx_(ctx), maxBytes_(maxBytes) {}
  ~RegCache();
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  /// The lkey for [addr, addr+len), registering it if needed, and one more user of it.
  /// Returns 0; EBUSY when the device refuses more registrations and every cached buffer
  /// is in use (try again once a write completes and releases one); or the errno of a
  /// registration that failed for any other reason.
  int acquire(void* addr, size_t len, uint32_t* lkey);
  /// One user less (the write that needed it completed).
  void release(void* addr);

  size_t registeredBytes() const { return bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    void* addr;
    size_t len;
    MemRegion mr;
    int users = 0;
    std::list<void*>::iterator lru;  // position in lru_ (front: most recent)
  };
  /// Deregisters the least recently used idle entry; false when none is idle.
  bool evictOne();

  VerbsContext* ctx_;
  size_t maxBytes_;
  size_t bytes_ = 0;
  std::unordered_map<void*, Entry> entries_;
  std::list<void*> lru_;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
  bool warnedOver_ = false;
};

}  // namespace rdma
}  // namespace chorus
