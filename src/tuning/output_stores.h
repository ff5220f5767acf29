// output_stores.h — whether a call writes the user's output with streaming (non-temporal)
// stores (Plan::streaming) or ordinary ones.
//
// Streaming stores pay where the output cannot stay in cache anyway: they skip reading every
// destination line first and do not push the call's other lines out. Where the output does
// fit, they send it to memory that the next call (or the caller) reads back, and lose: on the
// AMD EPYC (Zen 5) VM of docs/PERF.md#perf-big8m, np 2 at 8 MiB, ordinary stores took
// 0.33-0.86x the time of streaming ones for all-gather, all-to-all, all-reduce and gather,
// in place and out of place, whether the two vCPUs shared an L3 or not.
//
// So on one host the measure is the host's last-level cache (hwloc: one L3's size times their
// number) shared out among its ranks, `cacheShareBytes`: an all-gather, all-to-all or
// all-reduce streams when the bytes a rank touches (its input and its output, once in
// place) exceed its share; a gather when the root's output alone reaches it. Measured on the
// same VM at 16 MiB (share 16 MiB there), ordinary stores won in place (0.28-0.67x) and
// were level or lost out of place and for gather in place (up to 1.8x where the vCPUs shared
// the L3), which is where the rule sends them.
//
// Broadcast, scatter, reduce, reduce-scatter, the ordered plan (src/tuning/ordered_plan.cc)
// and calls between hosts keep the fixed `ntBytes` (CHORUS_NT_THRESHOLD's 8 MiB): a broadcast
// receiver lost with ordinary stores at 8 MiB where the vCPUs shared the L3 (1.3-1.6x in
// place), and the others were not measured. The broadcast root's own copy has its rule
// (streamingRootCopy, below). A number in CHORUS_NT_THRESHOLD applies to every call, as before.
#pragma once

#include <cstddef>

#include "src/core/coll.h"

namespace chorus {

/// `ntBytes`: CHORUS_NT_THRESHOLD (results at least this large stream); `cacheShareBytes`:
/// this rank's share of its host's last-level cache under CHORUS_NT_THRESHOLD=auto (0: a
/// number was given, or the calls cross hosts: `ntBytes` decides).
inline bool streamingOutput(size_t ntBytes, size_t cacheShareBytes, int nranks, Coll coll,
                            size_t bytes, bool inPlace) {
  if (cacheShareBytes == 0) return bytes >= ntBytes;
  const size_t input = bytes / static_cast<size_t>(nranks > 0 ? nranks : 1);
  switch (coll) {
    case Coll::AllGather: return bytes + (inPlace ? 0 : input) > cacheShareBytes;
    case Coll::AllToAll:
    case Coll::AllReduce: return (inPlace ? bytes : 2 * bytes) > cacheShareBytes;
    case Coll::Gather: return bytes >= cacheShareBytes;
    default: return bytes >= ntBytes;
  }
}

/// A broadcast root's copy of its own input into its output, out of place (the receivers'
/// outputs follow streamingOutput). The root writes every piece twice, into the slot its
/// peer reads and into its output, so it sets the pace; the output is the one buffer of the
/// call nobody reads, yet streaming it cost the FIFO broadcast at np 2 where it fits the
/// cache: ordinary stores took 0.56-0.63x the time at 8 MiB and 0.78-0.91x at 16 MiB in both
/// windows, level at 32 MiB, 1.08x the time at 64 MiB (docs/PERF.md#perf-big8m). So under
/// auto the root streams its own copy only from the host's whole last-level cache (the
/// share times the ranks, every rank being on the host).
inline bool streamingRootCopy(size_t ntBytes, size_t cacheShareBytes, int nranks, size_t bytes) {
  if (cacheShareBytes == 0) return bytes >= ntBytes;
  return bytes >= cacheShareBytes * static_cast<size_t>(nranks > 0 ? nranks : 1);
}

}  // namespace chorus
