// proxied/slot_ring.h — the slot memory of a FIFO that a progress thread drives (tcp, rdma):
// `depth` slots of `slotBytes`, page-aligned (rdma registers it with the NIC), plus each
// slot's payload size and flags. Not value-initialized: untouched slots cost no memory
// (populate() faults them in where the owner wants that).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace chorus {
namespace proxied {

struct SlotRing {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> mem;
  size_t slotBytes = 0;
  int depth = 0;
  std::vector<uint32_t> sizes;
  std::vector<uint8_t> flags;
  /// Send side, transports that send from the caller's memory (SendConn::postFrom): where
  /// a posted message's bytes are; null: in its slot.
  std::vector<const char*> refs;

  /// False when the memory cannot be had (the caller reports it).
  bool allocate(size_t slot, int d) {
    slotBytes = slot;
    depth = d;
    void* p = nullptr;
    const size_t total = slot * static_cast<size_t>(d);
    if (posix_memalign(&p, 4096, total ? total : 4096) != 0) return false;
    mem.reset(static_cast<char*>(p));
    sizes.assign(static_cast<size_t>(d), 0);
    flags.assign(static_cast<size_t>(d), 0);
    refs.assign(static_cast<size_t>(d), nullptr);
    return true;
  }
  /// Faults the slots' pages in now rather than on a collective's first pass over each
  /// slot (a fault per 4 KiB page: on namespaced hosts sharing 2 CPUs, the first calls of a
  /// 1 MiB all-reduce took 2-4x as long). MADV_POPULATE_WRITE needs Linux 5.14; an older
  /// kernel ignores it and faults on first touch as before.
  void populate() {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
    if (mem) (void)madvise(mem.get(), bytes(), MADV_POPULATE_WRITE);
  }
  size_t bytes() const { return slotBytes * static_cast<size_t>(depth); }
  size_t index(uint64_t seq) const {
    return static_cast<size_t>(seq % static_cast<uint64_t>(depth));
  }
  char* slot(uint64_t seq) { return mem.get() + index(seq) * slotBytes; }
  /// Where message `seq`'s bytes are: the caller's memory it was posted from, or its slot.
  const char* data(uint64_t seq) {
    const char* r = refs[index(seq)];
    return r ? r : slot(seq);
  }
};

}  // namespace proxied
}  // namespace chorus
