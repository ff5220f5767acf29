#include "src/enqueue/ptrcheck.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "src/comm/comm.h"
#include "src/core/checks.h"
#include "src/core/params.h"

namespace chorus {

namespace {

// The kernel's PROCMAP_QUERY ioctl on /proc/self/maps (Linux 6.11): the mapping that holds
// one address, found in O(log n) without printing the whole table. Declared here because
// the C library's kernel headers on older systems lack it; an older kernel answers ENOTTY.
struct ProcmapQuery {
  uint64_t size;
  uint64_t queryFlags;
  uint64_t queryAddr;
  uint64_t vmaStart, vmaEnd, vmaFlags, vmaPageSize, vmaOffset, inode;
  uint32_t devMajor, devMinor, vmaNameSize, buildIdSize;
  uint64_t vmaNameAddr, buildIdAddr;
};
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kProcmapWritable = 0x02;  // only a writable mapping matches

enum class Answer { Yes, No, Unknown };

// Both bytes in writable mappings? Asked of the kernel one address at a time.
Answer writableByQuery(uintptr_t first, uintptr_t last) {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Answer::Unknown;
  Answer answer = Answer::Yes;
  for (uintptr_t addr : {first, last}) {
    ProcmapQuery q{};
    q.size = sizeof(q);
    q.queryFlags = kProcmapWritable;
    q.queryAddr = addr;
    if (ioctl(fd, kProcmapQuery, &q) == 0) continue;
    answer = errno == ENOENT ? Answer::No : Answer::Unknown;  // ENOENT: no writable mapping
    break;
  }
  close(fd);
  return answer;
}

// Whether the mappings holding the first and last byte of [p, p+bytes) are writable. Not by
// writing a byte back to itself: on a host stream the call is checked while earlier queued
// operations may still write that buffer, and a write-back could restore a stale byte.
// Asked of the kernel directly where it can answer (a few us); else read from the text of
// /proc/self/maps, which costs 100-200 us in a small process and more in one with
// thousands of mappings (a PyTorch process), once per buffer not seen recently. Without
// /proc, nothing is known: let it through.
bool writableMapping(const void* ptr, size_t bytes) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(ptr), last = first + bytes - 1;
  const Answer quick = writableByQuery(first, last);
  if (quick != Answer::Unknown) return quick == Answer::Yes;
  FILE* f = fopen("/proc/self/maps", "re");
  if (!f) return true;
  bool firstOk = false, lastOk = false;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    unsigned long lo = 0, hi = 0;
    char perms[5] = {};
    if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3) continue;
    const bool w = perms[1] == 'w';
    if (lo <= first && first < hi) firstOk = w;
    if (lo <= last && last < hi) lastOk = w;
    // A line without a newline was longer than the buffer: skip the rest of it.
    while (!strchr(line, '\n') && fgets(line, sizeof(line), f)) {
    }
  }
  fclose(f);
  return firstOk && lastOk;
}

// Reads the first and last byte through the kernel: fails with EFAULT where those pages
// are unmapped or mapped without read access (mincore calls a PROT_NONE page mapped).
bool readable(const void* ptr, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(ptr);
  unsigned char got[2];
  iovec local[2] = {{&got[0], 1}, {&got[1], 1}};
  iovec remote[2] = {{const_cast<unsigned char*>(p), 1},
                     {const_cast<unsigned char*>(p + bytes - 1), 1}};
  ssize_t n = process_vm_readv(getpid(), local, 2, remote, 2, 0);
  if (n == 2) return true;
  return n < 0 && errno != EFAULT;
}

bool covers(const PtrCache& c, uintptr_t lo, uintptr_t hi, bool writable) {
  for (const PtrCache::Range& e : c.ranges)
    if (e.lo.load(std::memory_order_relaxed) <= lo && hi <= e.hi.load(std::memory_order_relaxed) &&
        (e.writable.load(std::memory_order_relaxed) || !writable))
      return true;
  return false;
}

// Whether [lo, hi) was validated recently: without a lock unless a writer was busy.
bool cached(PtrCache& c, uintptr_t lo, uintptr_t hi, bool writable) {
  const uint64_t before = c.version.load(std::memory_order_acquire);
  if ((before & 1) == 0) {
    const bool hit = covers(c, lo, hi, writable);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (c.version.load(std::memory_order_relaxed) == before) return hit;
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  return covers(c, lo, hi, writable);
}

void remember(PtrCache& c, uintptr_t lo, uintptr_t hi, bool writable) {
  std::lock_guard<std::mutex> lock(c.mutex);
  const uint64_t v = c.version.load(std::memory_order_relaxed);
  c.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  PtrCache::Range& e = c.ranges[c.next];
  e.lo.store(lo, std::memory_order_relaxed);
  e.hi.store(hi, std::memory_order_relaxed);
  e.writable.store(writable, std::memory_order_relaxed);
  c.version.store(v + 2, std::memory_order_release);
  c.next = (c.next + 1) % c.ranges.size();
}

std::string whatElse(DescribePointer describe, const void* ptr) {
  return describe ? describe(ptr) : std::string("no device runtime was asked what it is");
}

}  // namespace

chorusResult_t checkHostBuffer(chorusComm* comm, const void* ptr, size_t bytes, const char* api,
                               const char* argName, bool writable, DescribePointer describe) {
  if (bytes == 0) return chorusSuccess;
  if (ptr == nullptr)
    CHORUS_FAIL(chorusInvalidArgument, "%s: %s is NULL but %zu bytes are to be accessed", api,
                argName, bytes);
  if (paramInt(Param::CheckPointers) == 0) return chorusSuccess;  // the registry reads it once
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));  // a constant
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (p + bytes < p)
    CHORUS_FAIL(chorusInvalidArgument, "%s: %s + %zu bytes wraps around the address space", api,
                argName, bytes);
  const uintptr_t lo = p & ~(page - 1);
  const uintptr_t hi = (p + bytes + page - 1) & ~(page - 1);
  if (cached(comm->ptrCache, lo, hi, writable)) return chorusSuccess;
  std::vector<unsigned char> vec((hi - lo) / page);
  if (mincore(reinterpret_cast<void*>(lo), hi - lo, vec.data()) != 0) {
    if (errno == ENOMEM)
      CHORUS_FAIL(chorusInvalidUsage,
                  "%s: %s=%p (%zu bytes) is not host memory mapped in this process; %s", api,
                  argName, ptr, bytes, whatElse(describe, ptr).c_str());
    // Other errors (EINVAL on odd mappings) say nothing about validity: let it through.
  }
  if (!readable(ptr, bytes))
    CHORUS_FAIL(chorusInvalidUsage,
                "%s: %s=%p (%zu bytes) is not readable host memory in this process (a region "
                "mapped without access, or a device pointer?); %s",
                api, argName, ptr, bytes, whatElse(describe, ptr).c_str());
  if (writable && !writableMapping(ptr, bytes))
    CHORUS_FAIL(chorusInvalidArgument,
                "%s: %s=%p (%zu bytes) is mapped but not writable (read-only memory cannot "
                "receive a result)",
                api, argName, ptr, bytes);
  remember(comm->ptrCache, lo, hi, writable);
  return chorusSuccess;
}

}  // namespace chorus
