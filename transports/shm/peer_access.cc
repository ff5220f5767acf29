// shm/peer_access.cc — CMA copies and mappings of peers' registered regions
// (transports/peer_access.h).
#include "transports/shm/peer_access.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/host/host_reduce.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"

namespace chorus {
namespace shm {
namespace {

constexpr size_t kMaxMappings = 64;

// What rank r's cookie must read: distinct per communicator and rank.
uint64_t cookieOf(uint64_t commHash, int r) {
  return commHash ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(r + 1));
}

// How many times longer the kernel's copy of a cache-resident buffer takes than ours
// (CmaProbe::kernelSlowdown); 0 where the read fails. This process's own memory: the kernel
// pins and copies it as it would a peer's, and the user copy is what the FIFO's copies cost
// per byte. The fastest of a few tries each, so one preemption does not decide it.
double kernelCopySlowdown() {
  constexpr size_t kBytes = 256 * 1024;
  constexpr int kTries = 5;
  std::vector<char> from(kBytes, 1), to(kBytes, 2);
  int64_t user = INT64_MAX, kernel = INT64_MAX;
  for (int i = 0; i < kTries; ++i) {
    int64_t t0 = nowNs();
    std::memcpy(to.data(), from.data(), kBytes);
    asm volatile("" : : "r"(to.data()) : "memory");
    user = std::min(user, nowNs() - t0);
    struct iovec local = {to.data(), kBytes};
    struct iovec remote = {from.data(), kBytes};
    t0 = nowNs();
    const ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    kernel = std::min(kernel, nowNs() - t0);
    if (r != static_cast<ssize_t>(kBytes)) return 0;
  }
  return user > 0 ? static_cast<double>(kernel) / static_cast<double>(user) : 0;
}

}  // namespace

ShmPeerAccess::~ShmPeerAccess() {
  for (Mapping& m : maps_)
    if (m.base) munmap(m.base, m.bytes);
}

void ShmPeerAccess::init(const TransportContext& ctx) {
  rank_ = ctx.rank;
  commHash_ = ctx.commHash;
  pids_.clear();
  for (const PeerInfo& p : *ctx.peers) pids_.push_back(p.pid);
}

chorusResult_t ShmPeerAccess::probeCma(const AllGather& allGather, bool wanted, bool timeCopy,
                                       CmaProbe* out) {
  const int n = static_cast<int>(pids_.size());
  cookie_ = cookieOf(commHash_, rank_);
  struct Probe {
    uint64_t addr;
    int32_t wanted;         // this rank allows CMA
    int32_t ok;             // this rank could read every peer's cookie
    uint32_t slowdownX100;  // kernelCopySlowdown() x 100 (0: not measured)
    uint32_t pad;
  };
  std::vector<Probe> all(static_cast<size_t>(n));
  Probe& me = all[static_cast<size_t>(rank_)];
  me.addr = reinterpret_cast<uint64_t>(&cookie_);
  me.wanted = wanted ? 1 : 0;
  CHORUS_CHECK(allGather(all.data(), sizeof(Probe)));
  int firstFail = -1, err = 0;
  for (int p = 0; p < n && me.wanted; ++p) {
    if (p == rank_) continue;
    uint64_t got = 0;
    struct iovec local = {&got, sizeof got};
    struct iovec remote = {reinterpret_cast<void*>(all[static_cast<size_t>(p)].addr), sizeof got};
    const ssize_t r = process_vm_readv(pids_[static_cast<size_t>(p)], &local, 1, &remote, 1, 0);
    if (r != static_cast<ssize_t>(sizeof got) || got != cookieOf(commHash_, p)) {
      firstFail = p;
      err = r < 0 ? errno : 0;
      break;
    }
  }
  me.ok = me.wanted && firstFail < 0 ? 1 : 0;
  me.slowdownX100 =
      me.ok && timeCopy ? static_cast<uint32_t>(std::min(1e6, kernelCopySlowdown() * 100.0)) : 0u;
  CHORUS_CHECK(allGather(all.data(), sizeof(Probe)));
  out->works = true;
  out->allWanted = true;
  uint32_t least = UINT32_MAX;
  for (const Probe& p : all) {
    out->works = out->works && p.ok;
    out->allWanted = out->allWanted && p.wanted;
    least = std::min(least, p.slowdownX100);
  }
  out->kernelSlowdown = out->works ? least / 100.0 : 0;
  out->firstFail = firstFail;
  out->error = err;
  return chorusSuccess;
}

// The peer's region, mapped here (cached; at most kMaxMappings, oldest dropped first).
chorusResult_t ShmPeerAccess::mapRegion(int peer, const BufRef& ref, char** base) {
  for (Mapping& m : maps_)
    if (m.peer == peer && m.regionId == ref.regionId) {
      *base = m.base;
      return chorusSuccess;
    }
  const int pid = pids_[static_cast<size_t>(peer)];
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, ref.fd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    CHORUS_FAIL(chorusSystemError, "rank %d cannot open rank %d's registered buffer (%s): %s",
                rank_, peer, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < ref.regionBytes) {
    close(fd);
    CHORUS_FAIL(chorusSystemError,
                "rank %d: rank %d's registered buffer (%s) is not the %llu-byte region it "
                "named: was it freed while registered?",
                rank_, peer, path, static_cast<unsigned long long>(ref.regionBytes));
  }
  void* p = mmap(nullptr, ref.regionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (p == MAP_FAILED)
    CHORUS_FAIL(chorusSystemError, "rank %d: mmap of rank %d's registered buffer failed: %s", rank_,
                peer, strerror(e));
  if (maps_.size() >= kMaxMappings) {
    munmap(maps_.front().base, maps_.front().bytes);
    maps_.erase(maps_.begin());
  }
  maps_.push_back(Mapping{peer, ref.regionId, static_cast<char*>(p), ref.regionBytes});
  CHORUS_INFO(kLogAlloc, "rank %d: mapped rank %d's registered region %llu (%llu bytes)", rank_,
              peer, static_cast<unsigned long long>(ref.regionId),
              static_cast<unsigned long long>(ref.regionBytes));
  *base = static_cast<char*>(p);
  return chorusSuccess;
}

chorusResult_t ShmPeerAccess::cmaMove(int peer, uint64_t remoteAddr, void* local, size_t bytes,
                                      bool write) {
  const int pid = pids_[static_cast<size_t>(peer)];
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
      CHORUS_FAIL(chorusSystemError, "rank %d: process_vm_%sv %s rank %d failed: %s", rank_,
                  write ? "write" : "read", write ? "to" : "from", peer, strerror(e));
    }
    done += static_cast<size_t>(got);
  }
  return chorusSuccess;
}

chorusResult_t ShmPeerAccess::mapped(int peer, const BufRef& ref, size_t off, char** p) {
  if (!ref.regionId)
    CHORUS_FAIL(chorusInternalError, "rank %d: rank %d's buffer is not registered memory", rank_,
                peer);
  char* base = nullptr;
  CHORUS_CHECK(mapRegion(peer, ref, &base));
  *p = base + (ref.addr - ref.regionBase) + off;
  return chorusSuccess;
}

chorusResult_t ShmPeerAccess::read(int peer, const BufRef& ref, size_t off, void* dst, size_t bytes,
                                   bool streaming) {
  if (bytes == 0) return chorusSuccess;
  if (ref.regionId) {
    char* theirs;
    CHORUS_CHECK(mapped(peer, ref, off, &theirs));
    kernels::copy(dst, theirs, bytes, streaming);
    return chorusSuccess;
  }
  return cmaMove(peer, ref.addr + off, dst, bytes, false);
}

chorusResult_t ShmPeerAccess::write(int peer, const BufRef& ref, size_t off, const void* src,
                                    size_t bytes, bool streaming) {
  if (bytes == 0) return chorusSuccess;
  if (ref.regionId) {
    char* theirs;
    CHORUS_CHECK(mapped(peer, ref, off, &theirs));
    kernels::copy(theirs, src, bytes, streaming);
    return chorusSuccess;
  }
  return cmaMove(peer, ref.addr + off, const_cast<void*>(src), bytes, true);
}

}  // namespace shm
}  // namespace chorus
