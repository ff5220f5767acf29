#include "src/comm/peer_mem.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "kernels/host/host_reduce.h"
#include "src/comm/comm.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/params.h"

namespace chorus {
namespace {

// The regions made by chorusMemAlloc. Process-wide on purpose: an allocation belongs to no
// communicator (NCCL's ncclMemAlloc takes none either), and chorusMemFree must recognise
// pointers from any thread. Guarded by its mutex; ids are never reused.
struct RegionTable {
  std::mutex mutex;
  std::vector<MemRegion> regions;
  uint64_t nextId = 1;
};

RegionTable& regionTable() {
  static RegionTable* t = new RegionTable;  // never destroyed: frees may run at exit
  return *t;
}

// Largest chorusMemAlloc: far beyond any host, small enough that size + page never wraps.
constexpr size_t kMaxAlloc = size_t{1} << 46;

uint64_t nextUniqueId() {
  RegionTable& t = regionTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  return t.nextId++;
}

}  // namespace

chorusResult_t memAlloc(void** ptr, size_t size) {
  if (!ptr) CHORUS_FAIL(chorusInvalidArgument, "chorusMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) CHORUS_FAIL(chorusInvalidArgument, "chorusMemAlloc: size is 0");
  if (size > kMaxAlloc)
    CHORUS_FAIL(chorusInvalidArgument, "chorusMemAlloc: size %zu is larger than %zu", size,
                kMaxAlloc);
  const long page = sysconf(_SC_PAGESIZE);
  const size_t bytes = (size + static_cast<size_t>(page) - 1) / static_cast<size_t>(page) *
                       static_cast<size_t>(page);
  // A memfd has no name in /dev/shm, so nothing is left behind whatever happens to the
  // process; peers reach it through /proc/<pid>/fd while the process lives.
  const int fd = static_cast<int>(syscall(SYS_memfd_create, "chorus-mem", 1u /*MFD_CLOEXEC*/));
  if (fd < 0)
    CHORUS_FAIL(chorusSystemError, "chorusMemAlloc: memfd_create failed: %s", strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int e = errno;
    close(fd);
    CHORUS_FAIL(chorusSystemError, "chorusMemAlloc: ftruncate(%zu bytes) failed: %s", bytes,
                strerror(e));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int e = errno;
    close(fd);
    CHORUS_FAIL(chorusSystemError, "chorusMemAlloc: mmap(%zu bytes) failed: %s", bytes,
                strerror(e));
  }
  RegionTable& t = regionTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.regions.push_back(MemRegion{reinterpret_cast<uintptr_t>(base), bytes, fd, t.nextId++});
  CHORUS_INFO(kLogAlloc, "chorusMemAlloc: %zu bytes at %p (memfd %d)", bytes, base, fd);
  *ptr = base;
  return chorusSuccess;
}

chorusResult_t memFree(void* ptr) {
  if (!ptr) CHORUS_FAIL(chorusInvalidArgument, "chorusMemFree: ptr is NULL");
  RegionTable& t = regionTable();
  MemRegion r;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = std::find_if(t.regions.begin(), t.regions.end(), [ptr](const MemRegion& m) {
      return m.base == reinterpret_cast<uintptr_t>(ptr);
    });
    if (it == t.regions.end())
      CHORUS_FAIL(chorusInvalidArgument,
                  "chorusMemFree: %p was not returned by chorusMemAlloc, or was freed already",
                  ptr);
    r = *it;
    t.regions.erase(it);
  }
  munmap(reinterpret_cast<void*>(r.base), r.bytes);
  close(r.fd);
  return chorusSuccess;
}

bool memFind(const void* p, size_t bytes, MemRegion* out) {
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  RegionTable& t = regionTable();
  std::lock_guard<std::mutex> lock(t.mutex);
  for (const MemRegion& m : t.regions)
    if (lo >= m.base && lo - m.base <= m.bytes && bytes <= m.bytes - (lo - m.base)) {
      *out = m;
      return true;
    }
  return false;
}

PeerMem::~PeerMem() {
  for (PeerMapping& m : maps)
    if (m.base) munmap(m.base, m.bytes);
}

chorusResult_t peerMemInit(chorusComm* comm) {
  PeerMem& pm = comm->peerMem;
  const int64_t thr = paramInt(Param::SingleCopyBytes);
  pm.threshold = thr < 0 ? SIZE_MAX : static_cast<size_t>(thr);
  // auto (the default): no fixed limit; each call's path is chosen from timed calls.
  pm.cmaAuto = paramString(Param::CmaMax) == "auto";
  const int64_t lim = pm.cmaAuto ? -1 : paramInt(Param::CmaMax);
  pm.cmaLimit = lim < 0 ? SIZE_MAX : static_cast<size_t>(lim);
  pm.cma = false;
  const int n = comm->nranks;
  // Single copy (and the direct LL schedules that assume cheap same-host hops) only when
  // shared memory joins every pair: one host, and shm is the one transport connected (not
  // disabled, not replaced by a test's transport table). The same answer on every rank.
  pm.allShm = n >= 2 && comm->localRanks == n && comm->transports.size() == 1 &&
              std::strcmp(comm->transports[0]->name(), "shm") == 0;
  if (!pm.allShm) return chorusSuccess;
  pm.cookie = comm->commHash ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(comm->rank + 1));
  struct Probe {
    uint64_t addr;
    int32_t wanted;  // CHORUS_CMA_DISABLE=0 on this rank
    int32_t ok;      // this rank could read every peer's cookie
  };
  std::vector<Probe> all(static_cast<size_t>(n));
  Probe& me = all[static_cast<size_t>(comm->rank)];
  me.addr = reinterpret_cast<uint64_t>(&pm.cookie);
  me.wanted = paramInt(Param::CmaDisable) == 0 ? 1 : 0;
  CHORUS_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Probe)));
  int firstFail = -1, err = 0;
  for (int p = 0; p < n && me.wanted; ++p) {
    if (p == comm->rank) continue;
    uint64_t got = 0;
    struct iovec local = {&got, sizeof got};
    struct iovec remote = {reinterpret_cast<void*>(all[static_cast<size_t>(p)].addr), sizeof got};
    const ssize_t r =
        process_vm_readv(comm->peers[static_cast<size_t>(p)].pid, &local, 1, &remote, 1, 0);
    const uint64_t want = comm->commHash ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(p + 1));
    if (r != static_cast<ssize_t>(sizeof got) || got != want) {
      firstFail = p;
      err = r < 0 ? errno : 0;
      break;
    }
  }
  me.ok = me.wanted && firstFail < 0 ? 1 : 0;
  CHORUS_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Probe)));
  bool allOk = true, allWanted = true;
  for (const Probe& p : all) {
    allOk = allOk && p.ok;
    allWanted = allWanted && p.wanted;
  }
  pm.cma = allOk;
  if (comm->rank != 0 && firstFail < 0) return chorusSuccess;
  if (pm.cma && pm.cmaAuto)
    CHORUS_INFO(kLogInit,
                "rank %d: single copy: process_vm_readv works between all %d ranks; from %zu "
                "result bytes (CHORUS_SINGLE_COPY_THRESHOLD) each collective times CMA against "
                "the FIFO per size and uses the faster (CHORUS_CMA_MAX=auto; changes are logged "
                "at INFO TUNING); registered chorusMemAlloc buffers are read directly",
                comm->rank, n, pm.threshold);
  else if (pm.cma && pm.cmaLimit == 0)
    CHORUS_INFO(kLogInit,
                "rank %d: single copy: process_vm_readv works between all %d ranks but is not "
                "used (CHORUS_CMA_MAX=0); registered chorusMemAlloc buffers are read directly "
                "from %zu result bytes (CHORUS_SINGLE_COPY_THRESHOLD)",
                comm->rank, n, pm.threshold);
  else if (pm.cma)
    CHORUS_INFO(kLogInit,
                "rank %d: single copy: process_vm_readv works between all %d ranks; "
                "used for results from %zu bytes (CHORUS_SINGLE_COPY_THRESHOLD) below %zu "
                "(CHORUS_CMA_MAX); registered chorusMemAlloc buffers at any size above the "
                "threshold",
                comm->rank, n, pm.threshold, pm.cmaLimit);
  else if (!allWanted)
    CHORUS_INFO(kLogInit,
                "rank %d: single copy: CMA off (CHORUS_CMA_DISABLE); registered "
                "chorusMemAlloc buffers still read directly",
                comm->rank);
  else if (firstFail >= 0)
    CHORUS_INFO(kLogInit,
                "rank %d: single copy: process_vm_readv of rank %d (pid %d) failed "
                "(%s): CMA off (Yama ptrace_scope, different users or a seccomp filter); "
                "registered chorusMemAlloc buffers still read directly",
                comm->rank, firstFail, comm->peers[static_cast<size_t>(firstFail)].pid,
                err ? strerror(err) : "wrong value");
  else
    CHORUS_INFO(kLogInit,
                "rank %d: single copy: CMA off (another rank cannot reach its "
                "peers); registered chorusMemAlloc buffers still read directly",
                comm->rank);
  return chorusSuccess;
}

BufRef peerMemRef(chorusComm* comm, const void* p, size_t bytes) {
  BufRef ref;
  ref.addr = reinterpret_cast<uint64_t>(p);
  PeerMem& pm = comm->peerMem;
  std::lock_guard<std::mutex> lock(pm.mutex);
  if (pm.regs.empty()) return ref;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  for (const Registration& r : pm.regs)
    if (r.region.id && lo >= r.lo && lo <= r.hi && bytes <= r.hi - lo) {
      // A region freed while registered (and its address reused) is not offered to peers.
      MemRegion now;
      if (!memFind(p, bytes, &now) || now.id != r.region.id) continue;
      ref.regionId = r.region.id;
      ref.regionBase = r.region.base;
      ref.regionBytes = r.region.bytes;
      ref.fd = r.region.fd;
      break;
    }
  return ref;
}

namespace {

// The peer's region, mapped here (cached; at most kMaxMappings, oldest dropped first).
constexpr size_t kMaxMappings = 64;

chorusResult_t mapRegion(chorusComm* comm, int peer, const BufRef& ref, char** base) {
  PeerMem& pm = comm->peerMem;
  for (PeerMapping& m : pm.maps)
    if (m.peer == peer && m.regionId == ref.regionId) {
      *base = m.base;
      return chorusSuccess;
    }
  const int pid = comm->peers[static_cast<size_t>(peer)].pid;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, ref.fd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    CHORUS_FAIL(chorusSystemError, "rank %d cannot open rank %d's registered buffer (%s): %s",
                comm->rank, peer, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < ref.regionBytes) {
    close(fd);
    CHORUS_FAIL(chorusSystemError,
                "rank %d: rank %d's registered buffer (%s) is not the %llu-byte region it "
                "named: was it freed while registered?",
                comm->rank, peer, path, static_cast<unsigned long long>(ref.regionBytes));
  }
  void* p = mmap(nullptr, ref.regionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED)
    CHORUS_FAIL(chorusSystemError, "rank %d: mmap of rank %d's registered buffer failed: %s",
                comm->rank, peer, strerror(e));
  if (pm.maps.size() >= kMaxMappings) {
    munmap(pm.maps.front().base, pm.maps.front().bytes);
    pm.maps.erase(pm.maps.begin());
  }
  pm.maps.push_back(PeerMapping{peer, ref.regionId, static_cast<char*>(p), ref.regionBytes});
  CHORUS_INFO(kLogAlloc, "rank %d: mapped rank %d's registered region %llu (%llu bytes)",
              comm->rank, peer, static_cast<unsigned long long>(ref.regionId),
              static_cast<unsigned long long>(ref.regionBytes));
  *base = static_cast<char*>(p);
  return chorusSuccess;
}

chorusResult_t cmaMove(chorusComm* comm, int peer, uint64_t remoteAddr, void* local, size_t bytes,
                       bool write) {
  const int pid = comm->peers[static_cast<size_t>(peer)].pid;
  size_t done = 0;
  while (done < bytes) {
    struct iovec l = {static_cast<char*>(local) + done, bytes - done};
    struct iovec r = {reinterpret_cast<void*>(remoteAddr + done), bytes - done};
    const ssize_t got =
        write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      const int e = got < 0 ? errno : EIO;
      if (e == ESRCH)
        CHORUS_FAIL(chorusRemoteError, "rank %d (pid %d, same host) is gone", peer, pid);
      CHORUS_FAIL(chorusSystemError, "rank %d: process_vm_%sv %s rank %d failed: %s", comm->rank,
                  write ? "write" : "read", write ? "to" : "from", peer, strerror(e));
    }
    done += static_cast<size_t>(got);
  }
  return chorusSuccess;
}

}  // namespace

chorusResult_t peerMemMapped(chorusComm* comm, int peer, const BufRef& ref, size_t off, char** p) {
  if (!ref.regionId)
    CHORUS_FAIL(chorusInternalError, "rank %d: rank %d's buffer is not registered memory",
                comm->rank, peer);
  char* base = nullptr;
  CHORUS_CHECK(mapRegion(comm, peer, ref, &base));
  *p = base + (ref.addr - ref.regionBase) + off;
  return chorusSuccess;
}

chorusResult_t peerMemRead(chorusComm* comm, int peer, const BufRef& ref, size_t off, void* dst,
                           size_t bytes, bool streaming) {
  if (bytes == 0) return chorusSuccess;
  if (ref.regionId) {
    char* theirs;
    CHORUS_CHECK(peerMemMapped(comm, peer, ref, off, &theirs));
    kernels::copy(dst, theirs, bytes, streaming);
    return chorusSuccess;
  }
  return cmaMove(comm, peer, ref.addr + off, dst, bytes, false);
}

chorusResult_t peerMemWrite(chorusComm* comm, int peer, const BufRef& ref, size_t off,
                            const void* src, size_t bytes, bool streaming) {
  if (bytes == 0) return chorusSuccess;
  if (ref.regionId) {
    char* theirs;
    CHORUS_CHECK(peerMemMapped(comm, peer, ref, off, &theirs));
    kernels::copy(theirs, src, bytes, streaming);
    return chorusSuccess;
  }
  return cmaMove(comm, peer, ref.addr + off, const_cast<void*>(src), bytes, true);
}

chorusResult_t peerMemRegister(chorusComm* comm, void* buff, size_t size, void** handle) {
  if (!handle) CHORUS_FAIL(chorusInvalidArgument, "chorusCommRegister: handle is NULL");
  *handle = nullptr;
  if (!buff) CHORUS_FAIL(chorusInvalidArgument, "chorusCommRegister: buff is NULL");
  if (size == 0) CHORUS_FAIL(chorusInvalidArgument, "chorusCommRegister: size is 0");
  const uintptr_t lo = reinterpret_cast<uintptr_t>(buff);
  if (size > UINTPTR_MAX - lo)
    CHORUS_FAIL(chorusInvalidArgument, "chorusCommRegister: %p + %zu bytes wraps around", buff,
                size);
  Registration r;
  // Unique across communicators, so a handle passed to the wrong one is found missing.
  r.handle = nextUniqueId();
  r.lo = lo;
  r.hi = lo + size;
  // Any memory may be registered; chorusMemAlloc memory is what peers can map.
  if (!memFind(buff, size, &r.region)) r.region = MemRegion{};
  PeerMem& pm = comm->peerMem;
  std::lock_guard<std::mutex> lock(pm.mutex);
  // Handles are small integers dressed as pointers: never dereferenced, so a stale or
  // foreign one is found missing, never read.
  pm.regs.push_back(r);
  *handle = reinterpret_cast<void*>(static_cast<uintptr_t>(r.handle) << 4 | 0x8);
  CHORUS_INFO(kLogAlloc, "rank %d: registered %p + %zu bytes (%s)", comm->rank, buff, size,
              r.region.id ? "chorusMemAlloc memory: peers map it" : "peers use CMA");
  return chorusSuccess;
}

chorusResult_t peerMemDeregister(chorusComm* comm, void* handle) {
  if (!handle) CHORUS_FAIL(chorusInvalidArgument, "chorusCommDeregister: handle is NULL");
  const uintptr_t h = reinterpret_cast<uintptr_t>(handle);
  PeerMem& pm = comm->peerMem;
  std::lock_guard<std::mutex> lock(pm.mutex);
  auto it = std::find_if(pm.regs.begin(), pm.regs.end(), [h](const Registration& r) {
    return (static_cast<uintptr_t>(r.handle) << 4 | 0x8) == h;
  });
  if (it == pm.regs.end())
    CHORUS_FAIL(chorusInvalidArgument,
                "chorusCommDeregister: handle %p is not registered on this communicator (rank "
                "%d): deregistered already, or registered on another communicator",
                handle, comm->rank);
  pm.regs.erase(it);
  return chorusSuccess;
}

}  // namespace chorus
