// copy_path.h — how a same-host all-gather, all-to-all, broadcast, gather or scatter (or an
// all-reduce from 64 KiB) on buffers that are not registered moves its bytes: twice
// through the shared FIFO (into a slot, out of it, pipelined) or once, by
// process_vm_readv/writev (CMA: the kernel pins the peer's pages and copies).
//
// Which one wins is a property of the CPU and of where the host put the vCPUs, not of the
// code: on the AMD EPYC (Zen 5) VM of docs/PERF.md#perf-single-copy-cma-loses the
// FIFO was 1.5-4x faster at every size from 8 KiB (a cache-resident FIFO copy runs at
// 35-40 GB/s, the kernel's at 7-15), and on the Intel Xeon (Emerald Rapids) VM of
// docs/PERF.md#perf-copy-path-intel CMA was 1.2-2x faster from 32 KiB (one core copies at
// 10-19 GB/s there, so the second copy costs more than the kernel's pinning). So the
// choice is measured on the calls themselves (two_way_chooser.h), one chooser per
// collective, by the one rank whose choice every rank follows (single_copy.cc). Each way
// is judged on calls in a row (setWarmAfterSwitch): a CMA call right after FIFO calls reads
// inputs the slots pushed out of the caches and took up to 1.4x its steady time on the
// Intel VM (all-gather np 2, 2 MiB: 267 against 193 us), which alone picked the FIFO.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/core/coll.h"
#include "src/tuning/two_way_chooser.h"

namespace chorus {

enum class CopyPath : uint8_t { Fifo = 0, Cma = 1 };

inline const char* copyPathName(CopyPath c) { return c == CopyPath::Cma ? "CMA" : "FIFO"; }

using CopyPathChooser = TwoWayChooser<CopyPath>;

/// The collectives whose same-host calls can copy once, each with a chooser of its own.
enum class CopyPathUse : uint8_t {
  AllGather = 0,
  AllToAll = 1,
  Broadcast = 2,
  Gather = 3,
  Scatter = 4,
  AllReduce = 5
};
constexpr size_t kCopyPathUses = 6;  // the values of CopyPathUse

/// The chooser a collective's same-host calls learn in.
inline CopyPathUse copyPathUse(Coll c) {
  switch (c) {
    case Coll::AllReduce: return CopyPathUse::AllReduce;
    case Coll::AllToAll: return CopyPathUse::AllToAll;
    case Coll::Broadcast: return CopyPathUse::Broadcast;
    case Coll::Gather: return CopyPathUse::Gather;
    case Coll::Scatter: return CopyPathUse::Scatter;
    default: return CopyPathUse::AllGather;
  }
}

/// The rank whose copy path every rank follows in a call: one whose descriptor every rank
/// receives (the root; rank 0 where all swap with all), so the ranks never disagree.
inline int copyPathDecider(Coll c, int root) {
  return c == Coll::Broadcast || c == Coll::Gather || c == Coll::Scatter ? root : 0;
}

class CopyPathChoosers : public TwoWayChoosers<CopyPath, CopyPathUse, kCopyPathUses> {
 public:
  CopyPathChoosers() { setWarmAfterSwitch(true); }
};

// Under CHORUS_CMA_MAX=auto, where the kernel's copy takes at least this many times as long
// as a user copy (CmaProbe::kernelSlowdown, the least of all ranks), every collective starts
// settled on the FIFO instead of timing CMA in its first calls; CMA is still tried every
// 1024 calls of a size (TwoWayChooser::presume). The FIFO moves a peer's bytes with two user
// copies, CMA with one kernel copy: at 4x, CMA's one copy alone costs twice the FIFO's two.
// Measured: 8.2 on the AMD EPYC KVM VM, where CMA calls took 1.7-2.3x the FIFO's from 32 KiB
// to 16 MiB and each size's three first CMA tries cost a 16 MiB gather or all-gather 2-4% of
// a 37-call run; on the Intel Xeon VM a core's copy runs at 10-19 GB/s, as slow as the
// kernel's, and CMA won (docs/PERF.md#perf-cma-probe).
constexpr double kCmaHopeless = 4.0;

/// How CHORUS_CMA_MAX=auto starts a communicator's copy paths: both ways timed from the
/// first calls; settled on the FIFO with a CMA try every 1024 calls; or the FIFO only.
enum class CopyPathStart : uint8_t { Timed, FifoFirst, FifoOnly };

/// From the init probe (the kernel's copy over a user copy) and the most crowded kernel's
/// ranks per CPU. Where the kernel's copy is hopeless and ranks outnumber the CPUs, the
/// FIFO only: a call's time there is mostly waiting for a turn on a CPU, so a CMA try can
/// win on a lucky turn (twice in a row) and hold a size on CMA for hundreds of calls.
/// Measured, np 4 on 2 vCPUs of the AMD EPYC VM (docs/PERF.md#perf-crowded-cma): broadcast
/// 32 KiB out of place 7-10 us in the launches that had switched against 2.2-2.7 us on
/// the FIFO, scatter 128-512 KiB 1.4-1.5x slower timed; 2-32 MiB level within the noise.
inline CopyPathStart copyPathStart(double kernelSlowdown, double ranksPerCpu) {
  if (!(kernelSlowdown >= kCmaHopeless)) return CopyPathStart::Timed;
  return ranksPerCpu > 1.0 ? CopyPathStart::FifoOnly : CopyPathStart::FifoFirst;
}

}  // namespace chorus
