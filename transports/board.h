// board.h — an optional transport capability: one shared area per rank that its owner
// writes and every same-host peer reads in place (a "board"), for schedules that copy each
// rank's bytes in once and let every peer take them from there (src/algorithms/board.cc).
//
// A FIFO hands a message to one peer: n-1 copies of the same block for n-1 readers, and
// each hand-off waits for that one reader. A board is written once and read by all, and a
// reader waits for the owner's "posted" word alone, not for a chain of forwards: where ranks
// outnumber their CPUs (np 4 on 2 CPUs), a waiter is woken by whichever owner ran.
//
// Each board has two buffers (epoch parity), so an owner may write epoch e + 1 while its
// readers still read epoch e. Epochs count the board steps of a communicator; every rank
// runs the same steps (the plan is the same on every rank), so their epochs agree.
//
// No reader says when it has finished with a buffer: the schedules keep two rules that make
// a peer's post of the next epoch say it.
//   (a) In every epoch each rank waits for every peer's post of that epoch (the all-gather:
//       each peer's piece; the all-reduce: every input, then every reduced share).
//   (b) A rank reads a buffer of epoch e only between seeing its post and posting its own
//       epoch e + 1 (it has taken what it needs before it moves on).
// An owner writes its buffer of epoch e where it wrote e - 2. Each peer read e - 2 before
// it posted e - 1 (b), and the owner saw every peer's post of e - 1 (a) before it got to
// epoch e: so every read of e - 2 is over (release post, acquire wait) before the rewrite.
// Readers read e while the owner writes e + 1 into the other buffer. Like the pair cells
// (transports/pair_cells.h) this sends no credit back: the per-reader "read" words this
// replaced cost each reader a store into a line of the owner's segment and each owner a
// load of n - 1 such lines per epoch, all cache-line round trips between the cores
// (docs/PERF.md#perf-np4cells).
#pragma once

#include <cstddef>
#include <cstdint>

#include "chorus.h"
#include "src/core/wait.h"

namespace chorus {

class SharedBoard {
 public:
  virtual ~SharedBoard() = default;
  /// Capacity of one buffer of a board.
  virtual size_t bufferBytes() const = 0;
  /// The next epoch of this communicator (1, 2, ...): every rank takes the same sequence.
  virtual uint64_t nextEpoch() = 0;
  /// This rank's buffer for `epoch`: free to write once this rank has seen every peer's
  /// post of epoch - 1 (rule (a) above; at once for epochs 1 and 2).
  virtual char* own(uint64_t epoch) = 0;
  /// Publishes this rank's buffer of `epoch` to every peer (and wakes those asleep). By
  /// rule (b), also says this rank has finished reading every board of epoch - 1.
  virtual void post(uint64_t epoch) = 0;
  /// Waits until `rank` has posted `epoch`; *buf: its buffer, readable until this rank
  /// posts epoch + 1. Returns what waitUntil returns (timeout, abort, a peer's process
  /// gone), with no message set.
  virtual chorusResult_t waitPosted(int rank, uint64_t epoch, const char** buf,
                                    const WaitCtx& w) = 0;
  /// Waits until any of ranks[0..count) has posted `epoch` (count >= 1); *which: its index
  /// in `ranks`, *buf: its buffer (as waitPosted). Where ranks crowd their CPUs, a rank
  /// waiting for one particular peer yields its CPU although another peer's piece is there
  /// to take (docs/PERF.md#perf-np4steady). A dead peer is noticed through ranks[0]'s process
  /// (and any other's once it is the first left).
  /// The doorbell of `rank`'s process (where it says which CPU it last waited on).
  virtual const Doorbell* bellOf(int rank) const = 0;
  virtual chorusResult_t waitAnyPosted(const int* ranks, int count, uint64_t epoch, int* which,
                                       const char** buf, const WaitCtx& w) = 0;
};

}  // namespace chorus
