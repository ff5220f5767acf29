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

}  // namespace chorus
