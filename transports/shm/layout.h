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
constexpr int kLlDepth = 4;                                // LL buffers in flight per connection
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

/// An LL buffer holds one small message: its bytes, padded to 8, then an 8-byte flag with
/// the message's sequence number. The sender writes the bytes, then stores the flag with
/// release order; the reader polls the flag with acquire order and then reads the bytes in
/// place. For messages up to 56 bytes data and flag share one cache line, so the reader's
/// poll brings the data with it: one cache-line transfer per message.
inline size_t llFlagOffset(size_t bytes) { return (bytes + 7) & ~static_cast<size_t>(7); }
/// The flag word that says "message `seq` is here". Not `seq` itself: the flag's place
/// depends on the message's size, so a reader expecting a short message polls a word that
/// an earlier, longer message in the same buffer filled with data, and data that happens
/// to equal the small number `seq` (a count, a handle, an earlier flag) would read as an
/// arrival of stale bytes (seen: a single-copy "done" read from the previous descriptor).
/// A scrambled 64-bit value does not turn up in such data.
inline uint64_t llFlagValue(uint64_t seq) {
  return (seq * 0x9E3779B97F4A7C15ull) ^ 0xC3A5C85C97CB3127ull;
}

/// Sizes of the pieces of one connection area, all derived from the same parameters on
/// every rank.
struct AreaGeometry {
  size_t slotBytes;
  int depth;
  size_t llMax;  // largest LL message

  static size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }
  size_t ctrlBytes() const { return roundUp(sizeof(ConnCtrl), kPage); }
  size_t llStride() const { return roundUp(llMax + 8, 64); }  // one buffer, flag included
  size_t llBytes() const { return roundUp(kLlDepth * llStride(), kPage); }
  size_t slotsOffset() const { return ctrlBytes() + llBytes(); }
  size_t areaBytes() const { return slotsOffset() + roundUp(slotBytes * depth, kPage); }
  size_t headerBytes() const { return kPage; }
  size_t areaOffset(int peer) const {
    return headerBytes() + static_cast<size_t>(peer) * areaBytes();
  }
  size_t segmentBytes(int nranks) const {
    return headerBytes() + static_cast<size_t>(nranks) * areaBytes();
  }
};

}  // namespace shm
}  // namespace chorus
