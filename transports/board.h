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
  /// This rank's buffer for `epoch`, once beginWrite(epoch) returned.
  virtual char* own(uint64_t epoch) = 0;
  /// Waits until every peer has read this rank's buffer of epoch - 2 (the last use of the
  /// buffer epoch writes). On failure *waitedFor: the peer it waited for. Waits return
  /// what waitUntil returns (timeout, abort, a peer's process gone), with no message set.
  virtual chorusResult_t beginWrite(uint64_t epoch, const WaitCtx& w, int* waitedFor) = 0;
  /// Publishes this rank's buffer of `epoch` to every peer (and wakes those asleep).
  virtual void post(uint64_t epoch) = 0;
  /// Waits until `rank` has posted `epoch`; *buf: its buffer, readable until done().
  virtual chorusResult_t waitPosted(int rank, uint64_t epoch, const char** buf,
                                    const WaitCtx& w) = 0;
  /// Tells `rank` this rank has finished reading its buffer of `epoch`.
  virtual void done(int rank, uint64_t epoch) = 0;
};

}  // namespace chorus
