// pair_cells.h — an optional transport capability for a pair of ranks on one host: two
// shared cells that the pair's ranks swap at every exchange (both send, both receive). Two-rank
// communicators have one pair; a host holding all of a power-of-two number of ranks has one
// per pair rank ^ 2^k (the partners of recursive halving and doubling), each on its own.
//
// At exchange x rank r writes cell (x + r) % 2 and reads the other one, which its peer wrote.
// So the cell a rank writes at x + 1 is the one it read at x: it has finished with it (its own
// program order), and its peer, which wrote it for x, writes it again only at x + 2, after
// it has read this rank's x + 1; what a rank reads at x stays until it posts x + 1.
// No credit goes back (a FIFO's release, the board's "read" word), and a rank writes into
// lines it holds already, the ones it just read. Intel MPI's shared-memory transport hands
// its cells round this way too (docs/PERF.md#perf-farlab: where the two cores sat on
// different dies, the FIFO's way, each rank rewriting its own slot, took 1.23-1.37x as long).
//
// Only for schedules where every exchange has both ranks write one cell and read the
// other's: two-rank all-gather, all-to-all, all-reduce and reduce-scatter
// (src/algorithms/pair.cc), and the all-reduce by halving and doubling on 4, 8, ... ranks
// (src/algorithms/pair_halving.cc). Not for one-way streams (broadcast, reduce, gather, scatter):
// there the writer must wait for its reader before it rewrites a cell, a credit as the
// FIFO's, and with two cells it can run only two pieces ahead where the FIFO runs eight
// (built and measured: level with the FIFO or slower, docs/PERF.md#perf-np2rooted).
// Exchanges count the steps of a pair; both ranks run the same steps on it, so their
// counts agree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chorus.h"
#include "src/core/wait.h"

namespace chorus {

class PairCells {
 public:
  virtual ~PairCells() = default;
  /// Capacity of one cell.
  virtual size_t cellBytes() const = 0;
  /// The next exchange of this communicator (1, 2, ...): both ranks take the same sequence.
  virtual uint64_t nextExchange() = 0;
  /// This rank's cell for exchange x: free to write at once.
  virtual char* own(uint64_t x) = 0;
  /// Publishes this rank's cell of exchange x to the peer (and wakes it if asleep).
  virtual void post(uint64_t x) = 0;
  /// Waits until the peer has posted exchange x; *cell: its cell, readable until this rank
  /// posts x + 1. Returns what waitUntil returns (timeout, abort, the peer's process gone).
  virtual chorusResult_t waitPeer(uint64_t x, const char** cell, const WaitCtx& w) = 0;
  /// The peer's rank (for messages).
  virtual int peer() const = 0;
};

}  // namespace chorus
