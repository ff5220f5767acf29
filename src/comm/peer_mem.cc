#include "src/comm/peer_mem.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

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

chorusResult_t peerMemInit(chorusComm* comm) {
  PeerMem& pm = comm->peerMem;
  const int64_t thr = paramInt(Param::SingleCopyBytes);
  pm.threshold = thr < 0 ? SIZE_MAX : static_cast<size_t>(thr);
  // auto (the default): no fixed limit; each call's path is chosen from timed calls.
  // timed: as auto, but every size times both ways from its first calls whatever the probe
  // below says (the tests that exercise the switches between the two ways).
  const std::string& cmaMax = paramString(Param::CmaMax);
  const bool startFromProbe = cmaMax == "auto";  // the one setting that uses the timing below
  pm.cmaAuto = startFromProbe || cmaMax == "timed";
  const int64_t lim = pm.cmaAuto ? -1 : paramInt(Param::CmaMax);
  pm.cmaLimit = lim < 0 ? SIZE_MAX : static_cast<size_t>(lim);
  pm.cma = false;
  const int n = comm->nranks;
  // Single copy (and the direct LL schedules that assume cheap same-host hops) only when
  // shared memory joins every pair: one host, and a transport that shares memory is the one
  // connected (not disabled, not replaced by a test's transport table). The same answer on
  // every rank.
  // Asked of the transport by capability: it shares memory and reaches peers' memory.
  pm.access = nullptr;
  if (n >= 2 && comm->localRanks == n && comm->transports.size() == 1 &&
      comm->transports[0]->sharesMemory())
    pm.access = comm->transports[0]->peerAccess();
  pm.allShm = pm.access != nullptr;
  pm.board = pm.allShm ? comm->transports[0]->sharedBoard() : nullptr;
  pm.pair = pm.allShm && n == 2 ? comm->transports[0]->pairCells(1 - comm->rank) : nullptr;
  // Halving's partners rank ^ 2^k (a power of two of ranks on one host): all or none. Every
  // rank's segments have the same areas (their sizes must agree), so all ranks agree too.
  pm.halvingPairs.clear();
  if (pm.allShm && n >= 4 && (n & (n - 1)) == 0) {
    for (int bit = 1; bit < n; bit <<= 1) {
      PairCells* c = comm->transports[0]->pairCells(comm->rank ^ bit);
      if (c == nullptr) {
        pm.halvingPairs.clear();
        break;
      }
      pm.halvingPairs.push_back(c);
    }
  }
  if (!pm.allShm) return chorusSuccess;
  CmaProbe probe;
  CHORUS_CHECK(pm.access->probeCma(
      [comm](void* data, size_t bytes) { return comm->bootstrap->allGather(data, bytes); },
      paramInt(Param::CmaDisable) == 0, /*timeCopy=*/startFromProbe, &probe));
  const bool allOk = probe.works, allWanted = probe.allWanted;
  const int firstFail = probe.firstFail, err = probe.error;
  pm.cma = allOk;
  const CopyPathStart start = pm.cma && startFromProbe
                                  ? copyPathStart(probe.kernelSlowdown, comm->maxRanksPerKernelCpu)
                                  : CopyPathStart::Timed;
  const bool cmaSlow = start != CopyPathStart::Timed;
  if (start == CopyPathStart::FifoFirst) pm.copyPaths.presume(CopyPath::Fifo);
  if (start == CopyPathStart::FifoOnly) pm.copyPaths.fix(CopyPath::Fifo);
  // The all-reduce's two ways add in different orders on 3 or more ranks (CMA: each share's
  // owner folds its own input first, then the others' in rank order; the FIFO: the plan's
  // ring, where each piece's order depends on where it starts around the ring), so a timed
  // pick would give other bits from one launch to the next, and within a job whenever it
  // switches (issue 36: same world size, settings and layout, same bits). There `auto` keeps
  // the FIFO, the faster at np 3 and 4 on the AMD VM (CMA 1.3-2.7x slower from 64 KiB:
  // docs/PERF.md "Default mode: one copy path for the all-reduce"); CHORUS_CMA_MAX=-1 still
  // asks for CMA. On 2 ranks both ways add the same two operands (a + b == b + a in IEEE),
  // so the choice stays timed.
  if (pm.cmaAuto && n >= 3) pm.copyPaths[CopyPathUse::AllReduce].fix(CopyPath::Fifo);
  if (comm->rank != 0 && firstFail < 0) return chorusSuccess;
  if (cmaSlow)
    CHORUS_INFO(kLogInit,
                "rank %d: single copy: the kernel's copy took %.1fx as long as a user copy "
                "(the least of all ranks; at least %.0fx): every collective %s "
                "(CHORUS_CMA_MAX=auto)",
                comm->rank, probe.kernelSlowdown, kCmaHopeless,
                start == CopyPathStart::FifoOnly
                    ? "keeps the FIFO (ranks outnumber the CPUs: a timed try would be timing "
                      "turns on a CPU)"
                    : "starts on the FIFO and tries CMA every 1024 calls of a size");
  if (pm.cma && pm.cmaAuto)
    CHORUS_INFO(kLogInit,
                "rank %d: single copy: process_vm_readv works between all %d ranks; from %zu "
                "result bytes (CHORUS_SINGLE_COPY_THRESHOLD) each collective times CMA against "
                "the FIFO per size and uses the faster (CHORUS_CMA_MAX=auto; changes are logged "
                "at INFO TUNING)%s; registered chorusMemAlloc buffers are read directly",
                comm->rank, n, pm.threshold,
                n >= 3 ? ", but the all-reduce, whose two ways add in different orders, keeps "
                         "the FIFO"
                       : "");
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
