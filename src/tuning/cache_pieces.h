// cache_pieces.h — the largest piece a same-host FIFO broadcast sends, from the core's L2.
//
// The broadcast root (src/algorithms/broadcast.cc) reads each piece of its input once and
// writes it twice, into the slot its peer reads and, out of place, into its own output; the
// receiver then takes the slot's lines from the root's cache. While the root writes piece
// k + 1 the receiver still reads piece k, so four pieces are live in the root's L2 at once:
// where they do not fit, the slot's first lines have gone to the L3 or memory by the time the
// receiver reads them. The default slot (CHORUS_CHUNKSIZE, 512 KiB) is a quarter of the 2 MiB
// L2 of Intel Xeon from Sapphire Rapids on, but twice a quarter of the 1 MiB L2 of AMD Zen 4
// and Zen 5 (and of Intel Xeon up to Cascade Lake): there a 4 MiB broadcast took 211 us
// with 512 KiB pieces against 120 us with 256 KiB ones in a window where the two vCPUs shared
// an L3 (docs/PERF.md#perf-gather3). So a piece is at most a quarter of the L2, at least
// 64 KiB (a smaller L2 is of an older core, where the hand-offs would cost more than the
// cache saves), and 64-byte aligned; no L2 known (0): no cap.
#pragma once

#include <algorithm>
#include <cstddef>

namespace chorus {

constexpr size_t kBroadcastPieceFloor = 64 << 10;

/// The cap on a same-host FIFO broadcast's piece for an L2 of `l2Bytes` (0: unknown).
inline size_t broadcastPieceCap(size_t l2Bytes) {
  if (l2Bytes == 0) return ~size_t{0};
  return std::max(kBroadcastPieceFloor, (l2Bytes / 4) & ~size_t{63});
}

}  // namespace chorus
