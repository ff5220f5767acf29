#include "transports/rdma/reg_cache.h"

#include <errno.h>

#include "src/core/debug.h"

namespace chorus {
namespace rdma {

RegCache::~RegCache() {
  for (auto& kv : entries_) ctx_->deregister(kv.second.mr);
}

bool RegCache::evictOne() {
  for (auto it = lru_.end(); it != lru_.begin();) {
    --it;
    auto e = entries_.find(*it);
    if (e->second.users > 0) continue;
    ctx_->deregister(e->second.mr);
    bytes_ -= e->second.len;
    ++evictions_;
    CHORUS_TRACE(kLogNet, "RDMA registration cache: evicted %zu B at %p", e->second.len,
                 e->second.addr);
    lru_.erase(it);
    entries_.erase(e);
    return true;
  }
  return false;
}

int RegCache::acquire(void* addr, size_t len, uint32_t* lkey) {
  auto found = entries_.find(addr);
  if (found != entries_.end() && found->second.len >= len) {
    Entry& e = found->second;
    ++hits_;
    ++e.users;
    lru_.splice(lru_.begin(), lru_, e.lru);
    *lkey = e.mr.lkey;
    return 0;
  }
  if (found != entries_.end()) {  // same start, larger range now: register anew
    if (found->second.users > 0) return EBUSY;
    ctx_->deregister(found->second.mr);
    bytes_ -= found->second.len;
    lru_.erase(found->second.lru);
    entries_.erase(found);
  }
  ++misses_;
  while (bytes_ + len > maxBytes_ && evictOne()) {
  }
  if (bytes_ + len > maxBytes_ && !warnedOver_) {
    CHORUS_INFO(kLogNet,
                "RDMA registration cache: every buffer is in use, going over "
                "CHORUS_IB_REG_CACHE (%zu B registered, %zu B more)",
                bytes_, len);
    warnedOver_ = true;
  }
  MemRegion mr;
  int err;
  while ((err = ctx_->registerMemory(addr, len, false, &mr)) == ENOMEM || err == EAGAIN) {
    if (!evictOne()) break;
  }
  if ((err == ENOMEM || err == EAGAIN) && !entries_.empty()) return EBUSY;  // all in use
  if (err != 0) return err;
  lru_.push_front(addr);
  Entry e{addr, len, mr, 1, lru_.begin()};
  entries_.emplace(addr, e);
  bytes_ += len;
  *lkey = mr.lkey;
  return 0;
}

void RegCache::release(void* addr) {
  auto it = entries_.find(addr);
  if (it != entries_.end() && it->second.users > 0) --it->second.users;
}

}  // namespace rdma
}  // namespace chorus
