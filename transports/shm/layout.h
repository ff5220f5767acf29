// layout.h — how one rank's shared-memory segment is laid out.
//
// Each rank owns one segment that holds everything other ranks of its host write *to* it:
// a doorbell to wake it, and one connection area per peer. An area holds the slot FIFO
// (control lines + slots) and the low-latency (LL) buffers. The sender writes slots, slot
// sizes and LL lines in the receiver's segment; the receiver writes its tail and LL
// acknowledgement back into the same area. Every counter sits on its own 64-byte line so
// the two sides never false-share.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "src/core/wait.h"

namespace chorus {
namespace shm {

constexpr uint64_t kSegmentMagic = 0x43484f5253484d31ull;  // "CHORSHM1"
constexpr int kMaxDepth = 14;                              // slot sizes share the head's cache line
// Long LL buffers in flight per connection. 8 was tried once the doorbell lost its fence
// (src/core/asym_fence.h; the sender then runs ahead until the ring is full): np 2, far
// cores, 1 KiB scatter 0.20 us against main's 0.31, but 2 KiB broadcast 0.60 against 0.45
// and 1 KiB all-reduce 0.65 against 0.52 (docs/PERF.md #perf-asym-fence). Kept at 4.
constexpr int kLlDepth = 4;
constexpr int kLlShortDepth = 32;  // short (line) LL buffers in flight per connection
constexpr size_t kPage = 4096;

/// Written by the sender: how many slots it has posted and their payload sizes. One line,
/// so the receiver learns both with a single cache-line transfer.
struct alignas(64) HeadLine {
  std::atomic<uint64_t> head;
  uint32_t sizes[kMaxDepth];
};
static_assert(sizeof(HeadLine) == 64, "head line");

/// Written by the receiver: how many slots it has released.
struct alignas(64) TailLine {
  std::atomic<uint64_t> tail;
  char pad[56];
};

/// Written by the receiver: the last LL sequence number it has consumed.
struct alignas(64) LlAckLine {
  std::atomic<uint64_t> consumed;
  char pad[56];
};

struct alignas(64) ConnCtrl {
  HeadLine head;
  TailLine tail;
  LlAckLine llAck;
};

struct alignas(64) SegmentHeader {
  uint64_t magic;
  int32_t owner;
  int32_t nranks;
  char pad[48];
  Doorbell bell;
};

/// A board's control (board.h), at the start of the board in its owner's segment: one line,
/// the owner's last posted epoch, on a page of its own (no reader writes to the board).
struct alignas(64) BoardLine {
  std::atomic<uint64_t> epoch;
  char pad[56];
};
static_assert(sizeof(BoardLine) == 64, "board line");

/// Waits until `line`'s owner has posted `epoch` (its release store, read with acquire):
/// waitUntil on this rank's doorbell `bell`, watching the owner's process `ownerPid`, the
/// owner's doorbell `ownerBell`. The one wait of the boards (board.h) and the pair cells
/// (pair_cells.h), whose posted words are both BoardLines.
inline chorusResult_t waitLinePosted(BoardLine& line, uint64_t epoch, const WaitCtx& w,
                                     Doorbell* bell, int ownerPid, const Doorbell* ownerBell) {
  std::atomic<uint64_t>& posted = line.epoch;
  return waitUntil([&posted, epoch] { return posted.load(std::memory_order_acquire) >= epoch; }, w,
                   bell, ownerPid, ownerBell);
}

/// An LL message goes in one of two kinds of buffer by its size (AreaGeometry).
///
/// Short messages (up to kLlLineMax = 448 bytes) go in a short buffer of 64-byte lines:
/// each line carries up to 56 bytes of the message and, in its last 8 bytes, its
/// own flag saying which message the line belongs to. The sender fills a line's data, then
/// stores that line's flag with release order, line after line; the reader checks the
/// flags of all the message's lines in one branch-free poll (acquire) and takes each line's
/// data with it. A line is one cache-line transfer that brings its flag and its data
/// together, and the lines of a multi-line message are polled, so travel, in parallel
/// rather than "flag line, then data line" one after the other. A one-line message is read
/// in place; a longer one is gathered into the receiver's private buffer.
///
/// Longer messages go contiguous at a long buffer's start, followed by one flag in a line of
/// its own at a fixed place (after room for llMax bytes): the reader polls it,
/// then reads the bytes in place (one flag line per message; polling every line of a long message
/// while the sender writes it would only pull lines away from the sender).
///
/// Short and long buffers were once one (the lines after the long flag); data still never
/// goes where a flag of either layout sits, so stale data can never pose as a
/// flag, whatever its bytes; a flag word only ever holds flags, and a stale one is an
/// earlier message's (see llFlagValue).
constexpr size_t kLlLineBytes = 64;
constexpr size_t kLlLineData = 56;  // data bytes per line; the flag takes the rest
constexpr size_t kLlLineCount = 8;  // lines of the short-message area (polled at once)
constexpr size_t kLlLineMax = kLlLineCount * kLlLineData;  // largest short message
/// Lines a short message of `bytes` takes (at least one: an empty message has a flag).
inline size_t llLines(size_t bytes) {
  return bytes == 0 ? 1 : (bytes + kLlLineData - 1) / kLlLineData;
}
/// Where a long message's flag sits in a buffer whose long messages hold up to llMax bytes
/// (a long message's bytes start at the buffer's start, as before short messages had lines:
/// with them at offset 512 instead, 4 KiB all-reduces at np 2 took 2.4-4.4 us against 0.4,
/// medians of 15 runs on Zen 4, while 2 and 8 KiB did not change; cause not pinned down).
inline size_t llLongFlagOffset(size_t llMax) {
  return (llMax + kLlLineBytes - 1) / kLlLineBytes * kLlLineBytes;
}
/// Bytes of one long buffer: the message, then its flag's line.
inline size_t llLongStride(size_t llMax) { return llLongFlagOffset(llMax) + kLlLineBytes; }
/// Bytes of one short buffer: its lines.
constexpr size_t kLlShortBytes = kLlLineCount * kLlLineBytes;
/// Where line `i`'s flag sits, from the start of the lines.
inline size_t llLineFlagOffset(size_t i) { return i * kLlLineBytes + kLlLineData; }
/// The flag word that says "message `seq` is here" (in a line, or for the whole long
/// message). A flag word left from an earlier message of the same buffer holds that
/// message's flag, and this function is a bijection (odd multiplier, xor), so no earlier
/// sequence number gives the same word. Scrambled rather than `seq` itself: a second line
/// of defence kept from the layout before fixed flag places, where a short message's flag
/// sat where a longer one's data had been (a single-copy "done" was once read from the
/// previous descriptor's bytes).
inline uint64_t llFlagValue(uint64_t seq) {
  return (seq * 0x9E3779B97F4A7C15ull) ^ 0xC3A5C85C97CB3127ull;
}

/// Sizes of the pieces of one connection area, all derived from the same parameters on
/// every rank.
struct AreaGeometry {
  size_t slotBytes;
  int depth;
  size_t llMax;            // largest LL message
  size_t boardBuffer = 0;  // bytes of one board buffer (0: no board)
  size_t pairCell = 0;     // bytes of this rank's pair cell (pair_cells.h; 0: none)
  int pairs = 0;           // pair areas: one per partner rank ^ 2^k, k < pairs (0: none)

  static size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }
  size_t ctrlBytes() const { return roundUp(sizeof(ConnCtrl), kPage); }
  /// The LL area: kLlDepth long buffers, then kLlShortDepth short ones. Message `seq` uses
  /// long buffer seq % kLlDepth or short buffer seq % kLlShortDepth by its size (one sequence
  /// for both). Short ones get the deeper ring: a sender reloads the receiver's
  /// acknowledgement line only when it is a ring behind, and every reload is a cache miss on
  /// the sender's path plus a line the receiver must take back before its next
  /// acknowledgement (with 4, one call in four of an 8-byte all-reduce paid both).
  size_t llLongOffset(uint64_t seq) const {
    return static_cast<size_t>(seq % kLlDepth) * llLongStride(llMax);
  }
  size_t llShortOffset(uint64_t seq) const {
    return kLlDepth * llLongStride(llMax) +
           static_cast<size_t>(seq % kLlShortDepth) * kLlShortBytes;
  }
  size_t llBytes() const {
    return roundUp(kLlDepth * llLongStride(llMax) + kLlShortDepth * kLlShortBytes, kPage);
  }
  size_t slotsOffset() const { return ctrlBytes() + llBytes(); }
  size_t areaBytes() const { return slotsOffset() + roundUp(slotBytes * depth, kPage); }
  size_t headerBytes() const { return kPage; }
  size_t areaOffset(int peer) const {
    return headerBytes() + static_cast<size_t>(peer) * areaBytes();
  }
  /// The board (board.h) after the areas: its control lines, then two buffers.
  size_t boardOffset(int nranks) const { return areaOffset(nranks); }
  size_t boardCtrlBytes() const { return kPage; }
  size_t boardBytes() const {
    return boardBuffer == 0 ? 0 : boardCtrlBytes() + 2 * roundUp(boardBuffer, kPage);
  }
  /// The pair areas (pair_cells.h) after the board, area k for the pair with rank ^ 2^k
  /// (two ranks: area 0, the peer): one line (the last exchange this rank posted on that
  /// pair) on a page of its own, then this rank's one of the pair's two cells.
  size_t pairOffset(int nranks, int k = 0) const {
    return boardOffset(nranks) + boardBytes() + static_cast<size_t>(k) * pairBytes();
  }
  size_t pairBytes() const { return pairCell == 0 ? 0 : kPage + roundUp(pairCell, kPage); }
  size_t segmentBytes(int nranks) const {
    return pairOffset(nranks) + static_cast<size_t>(pairCell == 0 ? 0 : pairs) * pairBytes();
  }
};

}  // namespace shm
}  // namespace chorus
