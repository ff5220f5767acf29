#include "enqueue/ptrcheck.h"

#include <sys/mman.h>
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

chorusResult_t checkHostBuffer(chorusComm* comm, const void* ptr, size_t bytes, const char* api,
                               const char* argName) {
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
      if (e.lo <= lo && hi <= e.hi) return chorusSuccess;
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
  std::lock_guard<std::mutex> lock(comm->ptrCache.mutex);
  auto& c = comm->ptrCache;
  c.ranges[c.next] = {lo, hi};
  c.next = (c.next + 1) % c.ranges.size();
  return chorusSuccess;
}

}  // namespace chorus
