// peer_mem.h — the communicator's side of same-host single copy: chorusMemAlloc regions,
// chorusCommRegister's table, whether single copy and CMA apply, and what the copy-path
// chooser learns. The copies themselves (CMA, mappings of peers' registered regions) are a
// transport capability (transports/peer_access.h), found by asking the communicator's
// transports (peerMemInit), never by their names.
//
// A buffer inside a registered chorusMemAlloc region (a memfd) is described to peers by its
// region (BufRef), which they map once; any other buffer is reached by CMA where the probe
// found it works; whether a call uses CMA or the FIFO is then timed per collective and size
// (CHORUS_CMA_MAX=auto, src/tuning/copy_path.h). The algorithms exchange BufRefs through the
// FIFOs' LL path at the start of a call (src/algorithms/single_copy.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "chorus.h"
#include "src/tuning/copy_path.h"
#include "transports/board.h"
#include "transports/pair_cells.h"
#include "transports/peer_access.h"

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

/// One chorusCommRegister.
struct Registration {
  uint64_t handle = 0;  // what the user holds (never 0; unique in the process)
  uintptr_t lo = 0, hi = 0;
  MemRegion region;  // id 0 when the buffer is not chorusMemAlloc memory
};

/// What the ranks swap at the start of a single-copy call (one LL message per peer).
struct PeerDesc {
  BufRef send;
  BufRef recv;
  uint64_t seq;
  uint64_t bytes;      // the caller's count in bytes (per block where blocks apply)
  uint32_t cma;        // the deciding rank's choice for this call: 1 CMA, 0 the FIFO
  uint32_t fifoLease;  // the decider's: if this call runs on the FIFO, next calls that do
  uint64_t lastSeq;    // this rank's last call of this collective that could copy once,
  uint64_t lastNs;     // and its time here (PeerMem::lastCall)
};

/// The communicator's part: whether single copy and CMA apply, the registrations.
struct PeerMem {
  bool allShm = false;           // every rank on this host, every pair joined by shared memory
  PeerAccess* access = nullptr;  // the shm transport's (set where allShm)
  SharedBoard* board = nullptr;  // its boards (transports/board.h), where allShm and it has them
  PairCells* pair = nullptr;     // its pair cells (transports/pair_cells.h): two ranks, allShm,
                                 // CHORUS_PAIR_CELLS=1 (the transport has none otherwise)
  bool cma = false;              // every local pair can process_vm_readv/writev each other
  size_t threshold = 0;          // CHORUS_SINGLE_COPY_THRESHOLD (result bytes); SIZE_MAX: off
  size_t cmaLimit = 0;           // CHORUS_CMA_MAX: CMA only for results below this
  bool cmaAuto = false;  // CHORUS_CMA_MAX=auto: CMA or the FIFO, whichever copyPaths times faster
  /// Pair cells with rank ^ 2^k, by k (halving and doubling on them, src/algorithms/
  /// pair_halving.cc): 4, 8, ... ranks, allShm, CHORUS_PAIR_CELLS=1; empty otherwise.
  std::vector<PairCells*> halvingPairs;
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
  /// Per collective, the calls that still run on the FIFO without swapping descriptors
  /// (single_copy.cc, singleCopyLeased): granted by the deciding rank in the last swap that
  /// fell back to the FIFO, for calls of the same result bytes and deciding rank.
  struct FifoLease {
    size_t bytes = 0;
    int decider = -1;
    uint32_t left = 0;
  };
  std::array<FifoLease, kCopyPathUses> fifoLease{};
  /// Per collective, the deciding rank's times of the calls of its current FIFO lease, where
  /// the chooser judges the FIFO on leases (gather's root, all-gather's rank 0: single_copy.cc,
  /// fifoJudgedOnLeases), kept for the swap that follows (calls 0: none): their mean (the
  /// all-gather's: the fastest) is the FIFO's steady figure, which the swap call is not.
  struct LeaseTimes {
    size_t bytes = 0;
    bool inPlace = false;
    uint64_t ns = 0;     // the calls' times added up
    uint32_t calls = 0;  // how many
    uint64_t least = 0;  // the fastest of them (all-gather's figure: single_copy.cc)
  };
  std::array<LeaseTimes, kCopyPathUses> leaseTimes{};
  std::mutex mutex;  // registrations come from any thread
  std::vector<Registration> regs;
};

/// Finds the transport that reaches same-host peers' memory and probes CMA between every
/// pair of local ranks through it (collective over the bootstrap: every rank calls it); logs
/// the outcome at INFO once. Single copy runs only when every rank is on one host.
chorusResult_t peerMemInit(chorusComm* comm);

/// Describes `bytes` at `p` for peers (registered chorusMemAlloc memory or a plain address).
BufRef peerMemRef(chorusComm* comm, const void* p, size_t bytes);

/// chorusCommRegister / chorusCommDeregister on the communicator's table.
chorusResult_t peerMemRegister(chorusComm* comm, void* buff, size_t size, void** handle);
chorusResult_t peerMemDeregister(chorusComm* comm, void* handle);

}  // namespace chorus
