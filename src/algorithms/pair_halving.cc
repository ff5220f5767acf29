// pair_halving.cc — all-reduce by recursive halving, then doubling (Rabenseifner's), for a
// power-of-two number of ranks on one host, each pairwise step through the pair cells
// (transports/pair_cells.h) that the step's two ranks share, instead of the FIFO slots.
//
// The vector goes in pieces of up to two cells. Per piece, with n = 2^m ranks and the
// partners' bits in a fixed order b_0 ... b_(m-1) (kHalvingBitOrder below):
//
// Reduce-scatter. Step s pairs rank r with r ^ b_s; both hold a partial result of the same
// range, split it at the same line-aligned middle, and each hands the partner the half it
// does not keep (the lower half stays with the rank whose bit b_s is clear). Each step is one
// exchange on that pair's cells: post the half to give, wait for the partner's, reduce.
// The reduction of step s goes straight to where step s + 1 needs it: the part this rank
// gives at s + 1 into its cell of the next pair (then posted at once), the part it keeps into
// its output; the last step's into the cell of the same pair, where the first all-gather step
// reads it (the cell a rank writes at an exchange is the one it read at the one before:
// reduced in place, pair_cells.h), and from there into the output.
//
// All-gather. The same pairs in reverse order: each step swaps the ranges the two ranks
// hold, doubling them. Before it waits for step s's partner, a rank copies the range it holds
// into its cell of the next pair (step s - 1's); the partner's range then goes out of its
// cell to the output and beside it into that cell, which is posted.
//
// Every exchange is one post and one wait, for one particular partner: 2m waits per piece
// where the boards (board.cc) wait 2 (n - 1) times, each for every peer. No credit goes
// back: each pair's two cells are swapped (pair_cells.h). Per piece every pair makes two
// exchanges (one each way of the schedule), the same on both ranks of the pair, so their
// exchange counts agree. Ranges of a step may be empty (counts below n lines): the exchange
// still happens, so both ranks take the same steps.
//
// The sum of each element is made once, at the rank whose final range holds it, as a tree of
// pairwise operations fixed by the ranks' numbers and the bit order ((x0 ⊕ x1) ⊕ (x2 ⊕ x3)
// with the lowest bit first), and copied to every other rank: every rank gets the same bits,
// run after run (docs/REPRODUCIBLE.md, default mode). Not the rank order of the reproducible
// mode, which keeps its own plans (src/tuning/ordered_plan.cc runs before this one is chosen).
// Pre-multiplication applies to each rank's own input as it first enters a reduction (or
// a cell); post (integer avg's division) at the last reduction.
#include <algorithm>
#include <cstring>
#include <vector>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

namespace {

// Partners by ascending bit: the larger halves go to rank ^ 1 first. Against the highest bit
// first (np 4 on 2 CPUs, AMD EPYC Zen 5, one sitting of 5 rounds, docs/PERF.md#perf-np4rab):
// medians 1.1-1.2x faster at 1-4 MiB, 0.87-0.92x at 256-512 KiB, where single rounds
// spread more than that either way. Four more sittings (docs/PERF.md#perf-np4order): level
// where the vCPUs sat near (0.94-0.99x), the highest first faster at 128-512 KiB where far
// (1.05-1.28x medians) but in only about half of the rounds; no size rule won robustly.
constexpr bool kLowBitFirst = true;

struct Range {
  size_t lo = 0, hi = 0;  // elements [lo, hi) of the piece
  size_t size() const { return hi - lo; }
};

// One piece's schedule for this rank: per step, the range before it, the half kept, the half
// given (both ranks of a pair compute the same split from the same range).
struct Steps {
  std::vector<Range> parent, keep, give;
};

Steps stepsFor(int rank, const std::vector<int>& bits, size_t pieceElems, size_t lineElems) {
  Steps st;
  Range cur{0, pieceElems};
  for (int bit : bits) {
    const size_t half = (cur.size() + 1) / 2;
    const size_t mid =
        cur.lo + std::min(cur.size(), (half + lineElems - 1) / lineElems * lineElems);
    const Range lower{cur.lo, mid}, upper{mid, cur.hi};
    const bool keepLower = (rank & bit) == 0;
    st.parent.push_back(cur);
    st.keep.push_back(keepLower ? lower : upper);
    st.give.push_back(keepLower ? upper : lower);
    cur = st.keep.back();
  }
  return st;
}

chorusResult_t allReducePiece(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p,
                              const std::vector<PairCells*>& cells, const std::vector<int>& bits,
                              size_t base, size_t cnt) {
  const kernels::ReduceSpec& spec = p.spec();
  const size_t elem = p.elemSize();
  const size_t lineElems = std::max<size_t>(1, 64 / elem);
  const int m = static_cast<int>(bits.size());
  const Steps st = stepsFor(comm->rank, bits, cnt, lineElems);
  const char* in = static_cast<const char*>(a.sendbuf) + base * elem;
  char* out = static_cast<char*>(a.recvbuf) + base * elem;
  const unsigned outFlags = plan.streaming ? kernels::kStreaming : 0u;
  auto at = [elem](size_t e) { return e * elem; };

  // The all-gather's first step's cell of the next pair and its exchange (filled by the
  // reduce-scatter's last step, before it posts).
  char* firstNext = nullptr;
  uint64_t firstXn = 0;
  // Reduce-scatter. Step 0's half to give, pre-multiplied where the op says so.
  uint64_t x = cells[0]->nextExchange();
  {
    const Range& g = st.give[0];
    putOwnInput(p, cells[0]->own(x), in + at(g.lo), g.size());
    cells[0]->post(x);
  }
  for (int s = 0; s < m; ++s) {
    const size_t k = static_cast<size_t>(s);
    const char* local = s == 0 ? in : out;  // this rank's partial of the kept range
    const unsigned pre = s == 0 ? kernels::kApplyPre : 0u;
    const Range& keep = st.keep[k];
    const char* peer = nullptr;  // the partner's partial of `keep`, from its start
    CHORUS_CHECK(takePeerPiece(cells[k], p, x, &peer));
    if (s + 1 < m) {
      const Range& g = st.give[k + 1];
      const Range& kn = st.keep[k + 1];
      x = cells[k + 1]->nextExchange();
      kernels::reduce(spec, cells[k + 1]->own(x), peer + at(g.lo - keep.lo), local + at(g.lo),
                      g.size(), pre);
      cells[k + 1]->post(x);
      kernels::reduce(spec, out + at(kn.lo), peer + at(kn.lo - keep.lo), local + at(kn.lo),
                      kn.size(), pre);
    } else {
      // The last step: the result, in place in the cell just read (the cell this rank writes
      // at the pair's next exchange, the all-gather's first).
      x = cells[k]->nextExchange();
      char* cell = cells[k]->own(x);
      kernels::reduce(spec, cell, peer, local + at(keep.lo), keep.size(),
                      pre | kernels::kApplyPost);
      // The result out of the cell (to the output, and to the next pair's cell for the
      // all-gather's first step) before the post: once posted, the partner may rewrite this
      // cell as soon as it reads it (its next exchange on this pair, which follows its
      // exchanges with its other partners, maybe the next call's), so this rank must not
      // read its own cell after the post. (Read after it, the partner's next call could
      // land first: determinism_np4 saw ranks 2 and 3 get other bits, 2 runs in 25.)
      const Range parent = st.parent[k];
      if (k > 0) {
        firstXn = cells[k - 1]->nextExchange();
        firstNext = cells[k - 1]->own(firstXn);
        kernels::reduceCopy(spec, firstNext + at(keep.lo - parent.lo), out + at(keep.lo), nullptr,
                            cell, keep.size(), outFlags);
      } else {
        kernels::copy(out + at(keep.lo), cell, at(keep.size()), plan.streaming);
      }
      cells[k]->post(x);
    }
  }

  // All-gather, the pairs in reverse; `held`: the range this rank holds, complete, in its
  // cell of exchange x on the pair of step s (and, from the second step on, in its output).
  Range held = st.keep[static_cast<size_t>(m - 1)];
  for (int s = m - 1; s >= 0; --s) {
    const size_t k = static_cast<size_t>(s);
    const Range parent = st.parent[k];
    const Range other =
        held.lo == parent.lo ? Range{held.hi, parent.hi} : Range{parent.lo, held.lo};
    char* next = nullptr;
    uint64_t xn = 0;
    if (s == m - 1) {
      // Our own result is already in the output and the next pair's cell (above).
      next = firstNext;
      xn = firstXn;
    } else if (s > 0) {
      xn = cells[k - 1]->nextExchange();
      next = cells[k - 1]->own(xn);
      std::memcpy(next + at(held.lo - parent.lo), out + at(held.lo), at(held.size()));
    }
    const char* peer = nullptr;  // the partner's range `other`, from its start
    CHORUS_CHECK(takePeerPiece(cells[k], p, x, &peer));
    if (s > 0) {
      kernels::reduceCopy(spec, next + at(other.lo - parent.lo), out + at(other.lo), nullptr, peer,
                          other.size(), outFlags);
      cells[k - 1]->post(xn);
      x = xn;
    } else {
      kernels::copy(out + at(other.lo), peer, at(other.size()), plan.streaming);
    }
    held = parent;
  }
  return chorusSuccess;
}

}  // namespace

bool halvingPairsRun(const chorusComm* comm) {
  const size_t m = comm->peerMem.halvingPairs.size();
  return m > 0 && comm->nranks == (1 << m);
}

chorusResult_t allReduceHalvingPairs(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p) {
  const size_t elem = p.elemSize();
  const std::vector<PairCells*>& byBit = comm->peerMem.halvingPairs;
  if (!halvingPairsRun(comm) || plan.pieceBytes < elem || plan.pieceBytes > byBit[0]->cellBytes())
    return planCannotRun(comm, a, plan, a.count * elem);
  noteRan(comm, Algo::Halving, Proto::Simple);
  comm->plans.record.ran.pairCells = true;
  // The steps' bits and their cells, in the schedule's order.
  std::vector<int> bits;
  std::vector<PairCells*> cells;
  for (size_t k = 0; k < byBit.size(); ++k) {
    const size_t i = kLowBitFirst ? k : byBit.size() - 1 - k;
    bits.push_back(1 << i);
    cells.push_back(byBit[i]);
  }
  // A piece: two halves of up to plan.pieceBytes (whole lines, so each half fits its cell).
  const size_t lineElems = std::max<size_t>(1, 64 / elem);
  const size_t halfElems = std::max(lineElems, plan.pieceBytes / elem / lineElems * lineElems);
  const size_t pieceElems = 2 * std::min(halfElems, byBit[0]->cellBytes() / elem);
  for (size_t base = 0; base < a.count; base += pieceElems)
    CHORUS_CHECK(
        allReducePiece(comm, a, plan, p, cells, bits, base, std::min(pieceElems, a.count - base)));
  return chorusSuccess;
}

}  // namespace chorus
