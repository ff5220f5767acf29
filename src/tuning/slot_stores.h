// slot_stores.h — how the FIFO paths write the slots a peer reads next: with
// ordinary stores (the lines stay in this core's cache and the peer takes them from there)
// or with streaming stores (the lines go to memory and the peer reads them from there).
//
// Which one is faster depends on how far apart the two cores are, and on a VM that changes
// while a job runs: on the Zen 5 VM of docs/PERF.md#perf-slot-stores the host moves the two
// vCPUs between cores that share an L3 (a cache line crosses in ~110 ns round trip) and
// cores on different dies (~530 ns) every few minutes. Sharing an L3, ordinary stores win
// (streaming ones 0.5-0.7x at 256 KiB-32 MiB); apart, every line the peer takes from this
// core's cache crosses the dies one at a time and streaming stores win 1.3-2x. No cache
// size or CPU model tells the two apart, so the choice is measured per communicator on the
// calls themselves (two_way_chooser.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/tuning/two_way_chooser.h"

namespace chorus {

enum class SlotStores : uint8_t { Temporal = 0, Streaming = 1 };

inline const char* slotStoresName(SlotStores s) {
  return s == SlotStores::Streaming ? "streaming" : "temporal";
}

using SlotStoreChooser = TwoWayChooser<SlotStores>;

/// The collectives whose shared-memory FIFO paths choose their slot stores per call, each
/// with a chooser of its own (their times and their best ways differ). AllReduce also
/// serves the all-reduce on the shared boards, for the reduced shares every peer reads
/// (src/algorithms/board.cc; a chooser keeps its timings per size, and a size runs on one
/// schedule or the other).
enum class SlotStoreUse : uint8_t { AllReduce = 0, AllGather = 1, AllToAll = 2 };

using SlotStoreChoosers = TwoWayChoosers<SlotStores, SlotStoreUse, 3>;

/// Two ranks' all-gather and all-to-all write each block to one slot, and the peer reads it
/// while this rank copies its own block or the peer's: the lines are still in this core's
/// cache when the peer takes them. Below this many bytes per block streaming stores gain
/// nothing where the two cores are apart (all-gather np 2 on the Zen 5 VM, far window:
/// temporal 2.6-3.3 / 4.6-5.5 us at 32 / 64 KiB blocks, streaming 3.1 / 5.7) and lose
/// 2.3-2.6x where they share a cache (near window, and every core pair of a CPU whose cores
/// share its last-level cache), and the chooser's tries of them cost calls: calls that small
/// use ordinary stores, untimed (docs/PERF.md#perf-ag2-slots). From 128 KiB blocks streaming
/// ones start to pay apart (8.3-8.5 against 8.4-10.0 us), so larger blocks, the other
/// collectives and more ranks keep the timed choice.
constexpr size_t kTimedSlotStoresFrom = size_t{128} << 10;

/// Whether a call of `bytes` bytes per block takes ordinary stores without timing (above).
inline bool slotStoresUntimed(SlotStoreUse use, int nranks, size_t bytes) {
  return nranks == 2 && (use == SlotStoreUse::AllGather || use == SlotStoreUse::AllToAll) &&
         bytes < kTimedSlotStoresFrom;
}

}  // namespace chorus
