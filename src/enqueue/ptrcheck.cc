#include "enqueue/ptrcheck.h"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "comm/comm.h"
#include "core/checks.h"
#include "core/params.h"

namespace chorus {

namespace {

// Writes the first and last byte of [p, p+bytes) back to themselves through the kernel:
// fails with EFAULT where the pages are not writable, changes nothing where they are.
bool writableInPlace(const void* ptr, size_t bytes) {
  auto* p = const_cast<unsigned char*>(static_cast<const unsigned char*>(ptr));
  unsigned char saved[2] = {p[0], p[bytes - 1]};
  iovec local[2] = {{&saved[0], 1}, {&saved[1], 1}};
  iovec remote[2] = {{p, 1}, {p + bytes - 1, 1}};
  ssize_t n = process_vm_writev(getpid(), local, 2, remote, 2, 0);
  if (n == 2) return true;
  // EPERM/ENOSYS (a sandbox forbidding the call) says nothing about the buffer.
  return n < 0 && errno != EFAULT;
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

}  // namespace

chorusResult_t checkHostBuffer(chorusComm* comm, const void* ptr, size_t bytes, const char* api,
                               const char* argName, bool writable) {
  if (bytes == 0) return chorusSuccess;
  if (ptr == nullptr)
    CHORUS_FAIL(chorusInvalidArgument, "%s: %s is NULL but %zu bytes are to be accessed", api,
                argName, bytes);
  static const bool enabled = paramInt(Param::CheckPointers) != 0;  // read-once parameter
  if (!enabled) return chorusSuccess;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
  if (p + bytes < p)
    CHORUS_FAIL(chorusInvalidArgument, "%s: %s + %zu bytes wraps around the address space", api,
                argName, bytes);
  const uintptr_t lo = p & ~(page - 1);
  const uintptr_t hi = (p + bytes + page - 1) & ~(page - 1);
  {
    std::lock_guard<std::mutex> lock(comm->ptrCache.mutex);
    for (const auto& e : comm->ptrCache.ranges)
      if (e.lo <= lo && hi <= e.hi && (e.writable || !writable)) return chorusSuccess;
  }
  std::vector<unsigned char> vec((hi - lo) / page);
  if (mincore(reinterpret_cast<void*>(lo), hi - lo, vec.data()) != 0) {
    if (errno == ENOMEM)
      CHORUS_FAIL(chorusInvalidArgument,
                  "%s: %s=%p (%zu bytes) is not host memory mapped in this process (a device "
                  "pointer in a build or process without a GPU, or a freed buffer?)",
                  api, argName, ptr, bytes);
    // Other errors (EINVAL on odd mappings) say nothing about validity: let it through.
  }
  if (!readable(ptr, bytes))
    CHORUS_FAIL(chorusInvalidArgument,
                "%s: %s=%p (%zu bytes) is not readable host memory in this process (a device "
                "pointer, a freed buffer, or a region mapped without access?)",
                api, argName, ptr, bytes);
  if (writable && !writableInPlace(ptr, bytes))
    CHORUS_FAIL(chorusInvalidArgument,
                "%s: %s=%p (%zu bytes) is mapped but not writable (read-only memory cannot "
                "receive a result)",
                api, argName, ptr, bytes);
  std::lock_guard<std::mutex> lock(comm->ptrCache.mutex);
  auto& c = comm->ptrCache;
  c.ranges[c.next] = {lo, hi, writable};
  c.next = (c.next + 1) % c.ranges.size();
  return chorusSuccess;
}

}  // namespace chorus
