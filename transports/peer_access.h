// peer_access.h — an optional transport capability: reaching a same-host peer's memory
// directly, for collectives that copy once between user buffers (src/algorithms/
// single_copy.cc).
//
// Two ways, chosen per buffer:
// - A buffer inside a chorusMemAlloc region (a memfd) that its owner registered: the peer
//   maps the region once (open /proc/<pid>/fd/<fd>, mmap; cached) and then reads or writes
//   it with plain loads and stores.
// - Any other buffer: process_vm_readv / process_vm_writev ("CMA": one kernel copy, no
//   staging), where the kernel lets local ranks reach each other (same user, no Yama
//   ptrace_scope restriction, no seccomp filter): probeCma tells, alike on every rank.
// The shared-memory transport provides it (transports/shm/peer_access.h); a communicator
// finds it by asking its transports (Transport::peerAccess), never by their names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "chorus.h"

namespace chorus {

/// What a peer needs to reach one of this rank's buffers; travels in an LL message.
struct BufRef {
  uint64_t addr = 0;
  uint64_t regionId = 0;  // 0: not in a registered chorusMemAlloc region
  uint64_t regionBase = 0;
  uint64_t regionBytes = 0;
  int32_t fd = -1;
  int32_t pad = 0;
};

/// Whether a peer's buffer described by `ref` can be reached (mapped, or by CMA).
inline bool peerReachable(const BufRef& ref, bool cma) { return ref.regionId != 0 || cma; }

/// The outcome of PeerAccess::probeCma on this rank.
struct CmaProbe {
  bool works = false;     // every rank reached every peer's memory
  bool allWanted = true;  // no rank turned CMA off
  int firstFail = -1;     // the first peer this rank could not reach (-1: none)
  int error = 0;          // its errno (0: a wrong value was read)
  /// How many times longer the kernel's copy (process_vm_readv) took than a user copy of the
  /// same cache-resident 256 KiB, the least of all ranks (0: not measured, on some rank not
  /// asked to time it). Measured: 8.2 on the AMD EPYC KVM VM where every CMA call lost to the
  /// FIFO (docs/PERF.md#perf-cma-probe).
  double kernelSlowdown = 0;
};

class PeerAccess {
 public:
  virtual ~PeerAccess() = default;
  /// Every rank of the communicator gathers `bytes` from every rank (rank order) in `data`.
  using AllGather = std::function<chorusResult_t(void* data, size_t bytes)>;
  /// Collective (every rank calls it, all on one host): probes process_vm_readv between
  /// every pair; `wanted`: this rank allows CMA at all; `timeCopy`: also time the kernel's
  /// copy against a user copy (kernelSlowdown), only where a chooser uses the answer (it
  /// costs 5 copies of 256 KiB each way at every communicator's start).
  virtual chorusResult_t probeCma(const AllGather& allGather, bool wanted, bool timeCopy,
                                  CmaProbe* out) = 0;
  /// dst = peer's [ref.addr + off, + bytes). `streaming`: from a mapping (registered), write
  /// dst with streaming stores (an output too large to stay in cache); the kernel's copy
  /// (CMA) writes as it does.
  virtual chorusResult_t read(int peer, const BufRef& ref, size_t off, void* dst, size_t bytes,
                              bool streaming) = 0;
  /// peer's [ref.addr + off, + bytes) = src; `streaming` as for read.
  virtual chorusResult_t write(int peer, const BufRef& ref, size_t off, const void* src,
                               size_t bytes, bool streaming) = 0;
  /// Where the peer's registered buffer described by `ref` (regionId != 0) lies mapped in
  /// this process, plus `off`: for kernels that read a peer's bytes in place (reductions).
  virtual chorusResult_t mapped(int peer, const BufRef& ref, size_t off, char** p) = 0;
};

}  // namespace chorus
