// peer_mem.h — reaching another local rank's memory directly: the single-copy path.
//
// Two ways, chosen per buffer:
// - A buffer inside a chorusMemAlloc region (a memfd) that the owner registered on the
//   communicator: a peer maps the region once (open /proc/<pid>/fd/<fd>, mmap; cached per
//   communicator) and then reads or writes it with plain loads and stores.
// - Any other buffer: process_vm_readv / process_vm_writev ("CMA": one kernel copy, no
//   staging), when the kernel lets local ranks reach each other (same user, no Yama
//   ptrace_scope restriction, no seccomp filter). peerMemInit probes that once per
//   communicator and every rank agrees on the answer; whether a call uses it or the FIFO
//   is then timed per collective and size (CHORUS_CMA_MAX=auto, src/tuning/copy_path.h).
// The algorithms exchange BufRefs through the FIFOs' LL path at the start of a call
// (src/algorithms/single_copy.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "chorus.h"
#include "src/tuning/copy_path.h"

struct chorusComm;

namespace chorus {

/// One region made by chorusMemAlloc.
struct MemRegion {
  uintptr_t base = 0;
  size_t bytes = 0;
  int fd = -1;      // the memfd behind it (peers open it through /proc/<pid>/fd)
  uint64_t id = 0;  // unique in this process, never reused (0: none)
};

/// chorusMemAlloc / chorusMemFree: the process-wide table of regions (the one piece of
/// process-wide mutable state this file adds: an allocation has no communicator).
chorusResult_t memAlloc(void** ptr, size_t size);
chorusResult_t memFree(void* ptr);
/// The region holding all of [p, p + bytes), if any.
bool memFind(const void* p, size_t bytes, MemRegion* out);

/// What a peer needs to reach one of this rank's buffers; travels in an LL message.
struct BufRef {
  uint64_t addr = 0;
  uint64_t regionId = 0;  // 0: not in a registered chorusMemAlloc region
  uint64_t regionBase = 0;
  uint64_t regionBytes = 0;
  int32_t fd = -1;
  int32_t pad = 0;
};

/// One chorusCommRegister.
struct Registration {
  uint64_t handle = 0;  // what the user holds (never 0; unique in the process)
  uintptr_t lo = 0, hi = 0;
  MemRegion region;  // id 0 when the buffer is not chorusMemAlloc memory
};

/// A peer's region mapped here.
struct PeerMapping {
  int peer = -1;
  uint64_t regionId = 0;
  char* base = nullptr;
  size_t bytes = 0;
};

/// The communicator's part: whether CMA works, the registrations, peers' mapped regions.
struct PeerMem {
  bool allShm = false;   // every rank on this host, every pair joined by shared memory
  bool cma = false;      // every local pair can process_vm_readv/writev each other
  size_t threshold = 0;  // CHORUS_SINGLE_COPY_THRESHOLD (result bytes); SIZE_MAX: off
  size_t cmaLimit = 0;   // CHORUS_CMA_MAX: CMA only for results below this
  bool cmaAuto = false;  // CHORUS_CMA_MAX=auto: CMA or the FIFO, whichever copyPaths times faster
  /// Per collective, the faster of FIFO and CMA learnt from the calls (CHORUS_CMA_MAX=auto);
  /// only the rank that decides a call for all (single_copy.cc) consults and feeds its own.
  /// Used under execMutex. copyPathLogs: INFO lines so far.
  CopyPathChoosers copyPaths;
  int copyPathLogs = 0;
  /// Per collective (CopyPathUse), this rank's last call that could copy once: its sequence
  /// number and how long it took here. Receivers of a broadcast or scatter send it to the
  /// root in their next call's descriptor: on the FIFO path the root returns once its bytes
  /// are in the slots, so only the receivers' times say how long the call took.
  struct LastCall {
    uint64_t seq = 0;
    uint64_t ns = 0;
  };
  std::array<LastCall, kCopyPathUses> lastCall{};
  /// The root's timed broadcast or scatter waiting for its receivers' times (seq 0: none).
  struct PendingCall {
    uint64_t seq = 0;
    size_t bytes = 0;
    bool inPlace = false;
    CopyPath way = CopyPath::Fifo;
    uint64_t ns = 0;
  };
  std::array<PendingCall, kCopyPathUses> pending{};
  uint64_t cookie = 0;  // read by peers during the probe
  std::mutex mutex;     // registrations come from any thread
  std::vector<Registration> regs;
  std::vector<PeerMapping> maps;  // used by the thread running operations only
  ~PeerMem();
};

/// Probes CMA between every pair of local ranks (collective over the bootstrap: every rank
/// calls it); logs the outcome at INFO once. Single copy runs only when every rank is on
/// one host.
chorusResult_t peerMemInit(chorusComm* comm);

/// Describes `bytes` at `p` for peers (registered chorusMemAlloc memory or a plain address).
BufRef peerMemRef(chorusComm* comm, const void* p, size_t bytes);
/// Whether a peer's buffer described by `ref` can be reached (mapped, or by CMA).
inline bool peerMemReachable(const BufRef& ref, bool cma) { return ref.regionId != 0 || cma; }
/// dst = peer's [ref.addr + off, + bytes). `streaming`: from a mapping (registered), write
/// dst with streaming stores (an output too large to stay in cache); the kernel's copy (CMA)
/// writes as it does.
chorusResult_t peerMemRead(chorusComm* comm, int peer, const BufRef& ref, size_t off, void* dst,
                           size_t bytes, bool streaming = false);
/// Where the peer's registered buffer described by `ref` (regionId != 0) lies mapped in this
/// process, plus `off`: for kernels that read a peer's bytes in place (reductions).
chorusResult_t peerMemMapped(chorusComm* comm, int peer, const BufRef& ref, size_t off, char** p);
/// peer's [ref.addr + off, + bytes) = src; `streaming` as for peerMemRead.
chorusResult_t peerMemWrite(chorusComm* comm, int peer, const BufRef& ref, size_t off,
                            const void* src, size_t bytes, bool streaming = false);

/// chorusCommRegister / chorusCommDeregister on the communicator's table.
chorusResult_t peerMemRegister(chorusComm* comm, void* buff, size_t size, void** handle);
chorusResult_t peerMemDeregister(chorusComm* comm, void* handle);

}  // namespace chorus
