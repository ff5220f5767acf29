// pair_cells.h — an optional transport capability for communicators of exactly two ranks on
// one host: two shared cells that the ranks hand round, exchange after exchange.
//
// An exchange is a swap (both ranks write a cell and read the other's) or one-way (one rank
// writes, the other reads). At exchange x rank r writes cell (x + r) % 2, its own(x), and
// reads the other one, which its peer wrote; every rank posts every exchange it takes part
// in: a writer once its cell is written, a one-way reader once it has read the peer's cell.
// So the cell a rank writes at x + 1 is the one it read at x (it has finished with it: its
// own program order). In a run of swaps nothing else is needed: the peer, which wrote that
// cell for x, writes it again only at x + 2, after it has read this rank's x + 1; what a rank
// reads at x stays until it posts x + 1. No credit goes back (a FIFO's release, the board's
// "read" word), and a rank writes into lines it holds already, the ones it just read. Intel
// MPI's shared-memory transport hands its cells round this way too (docs/PERF.md#perf-farlab:
// where the two cores sat on different dies, the FIFO's way, each rank rewriting its own
// slot, took 1.23-1.37x as long).
//
// One-way exchanges (broadcast, scatter, gather, reduce: one rank writes piece after piece)
// write the same cell every other exchange, so there the peer's read is the signal: own(x)
// was last read by the peer at x - 2 at the latest, and the peer is done with x - 2 once it
// has posted x - 1, or x - 2 itself where x - 2 was one-way (its one-way post comes after
// its reading; a swap's comes before). waitOwnFree waits for that; in a run of swaps the peer
// has posted x - 1 already (this rank read its x - 1), so it costs a comparison. A one-way
// writer thus runs at most two pieces ahead of its reader: a double buffer.
//
// Exchanges count the pair steps of a communicator; both ranks run the same steps (and
// agree which are swaps), so their counts agree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chorus.h"
#include "src/core/wait.h"

namespace chorus {

/// This rank's part in one exchange.
enum class PairRole {
  Swap,     ///< writes own(x), posts, reads the peer's cell
  Send,     ///< writes own(x), posts; the peer only reads
  Receive,  ///< reads the peer's cell, then posts (that it has read it)
};

class PairCells {
 public:
  virtual ~PairCells() = default;
  /// Capacity of one cell.
  virtual size_t cellBytes() const = 0;
  /// The next exchange of this communicator (1, 2, ...) and this rank's part in it: both
  /// ranks take the same sequence, with matching parts (Swap and Swap, Send and Receive).
  virtual uint64_t nextExchange(PairRole role) = 0;
  /// This rank's cell for exchange x (the latest nextExchange): write it after waitOwnFree.
  virtual char* own(uint64_t x) = 0;
  /// Waits until the peer is done with what it last read from own(x) (see above); what
  /// waitUntil returns. At once in a run of swaps.
  virtual chorusResult_t waitOwnFree(uint64_t x, const WaitCtx& w) = 0;
  /// Publishes exchange x to the peer (and wakes it if asleep): this rank's cell is written,
  /// or, for a Receive, the peer's cell is read.
  virtual void post(uint64_t x) = 0;
  /// Waits until the peer has posted exchange x; *cell: its cell, readable until this rank
  /// posts x + 1 (a Receive: until it posts x). Returns what waitUntil returns (timeout, abort, the
  /// peer's process gone).
  virtual chorusResult_t waitPeer(uint64_t x, const char** cell, const WaitCtx& w) = 0;
  /// The peer's rank (for messages).
  virtual int peer() const = 0;
};

}  // namespace chorus
