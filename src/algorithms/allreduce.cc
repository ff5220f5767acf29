// allreduce.cc — all-reduce three ways.
//
// direct (LL): every rank sends its whole (small) input to every other rank on the
//   low-latency path and reduces all inputs in rank order: one hop of latency, and every
//   rank computes the same bits because the order is the same everywhere.
// direct on the FIFOs (where ranks crowd their CPUs on one host): block r reduced by rank
//   r from every rank's slot, then sent to every rank.
// ring: reduce-scatter then all-gather around the ring, in pieces so the ranks pipeline;
//   each element is reduced exactly once, by its owner, then copied around.
// tree: double binary tree (topology-driven, comm->trees): half of the data reduced up and
//   broadcast down each tree, piece by piece.
// recursive doubling (LL; by default only over tcp where ranks crowd their CPUs, else
//   CHORUS_ALGO=doubling): log2(n) rounds; in round k every rank swaps its partial result
//   with rank ^ 2^k and combines the two. log2(n) messages per rank instead of n-1. Where
//   hosts hold several ranks, only each host's lowest rank takes part (allReduceLeaders).
#include <algorithm>
#include <cstring>
#include <vector>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/bits.h"
#include "src/core/checks.h"

namespace chorus {

using kernels::kApplyPost;
using kernels::kApplyPre;

chorusResult_t allReduceDirect(chorusComm* comm, const CollArgs& a, Prims& p) {
  noteRan(comm, Algo::Direct, Proto::LL);
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), bytes = a.count * elem;
  const kernels::ReduceSpec& spec = a.spec;
  const void* mine = a.sendbuf;
  // Our contribution, pre-multiplied once, and kept safe from the in-place output.
  if (spec.preMul) {
    void* t = comm->scratch.get(comm->scratch.a, bytes);
    kernels::reduce(spec, t, nullptr, a.sendbuf, a.count, kApplyPre);
    mine = t;
  } else if (a.sendbuf == a.recvbuf && n > 1) {
    void* t = comm->scratch.get(comm->scratch.a, bytes);
    std::memcpy(t, a.sendbuf, bytes);
    mine = t;
  }
  for (int k = 1; k < n; ++k) CHORUS_CHECK(p.sendLL((rank + k) % n, mine, bytes));
  for (int k = 0; k < n; ++k) {
    const void* src = mine;
    if (k != rank) CHORUS_CHECK(p.waitLL(k, &src, bytes));  // reduce straight from it
    const unsigned post = k == n - 1 ? kApplyPost : 0u;
    if (k == 0) {
      if (post && spec.postDiv > 1)
        kernels::reduce(spec, a.recvbuf, nullptr, src, a.count, post);
      else if (src != a.recvbuf)
        std::memcpy(a.recvbuf, src, bytes);
    } else {
      kernels::reduce(spec, a.recvbuf, a.recvbuf, src, a.count, post);
    }
    if (k != rank) p.releaseLL(k);
  }
  return chorusSuccess;
}

// Recursive doubling among `size` ranks, at(i) the rank at position i (an order every member
// agrees on, lower positions holding lower ranks), this rank at position `me`; `acc` holds
// this rank's partial result (pre-multiplied) and ends with the result, post applied.
// Positions from pow2 on (size not a power of two) first hand theirs to me - pow2 and get
// the result back at the end. In every round the two partners hold partial results of two
// disjoint groups and both compute (lower group's) OP (higher group's): the same operands
// in the same order, so every member ends with the same bits. Partners send at once,
// unless the message is larger than the LL threshold and than what the link buffers
// (llBufferedBytes): then they take turns, the lower first, so neither waits for room the
// other frees only later.
template <class At>
static chorusResult_t doublingAmong(chorusComm* comm, const CollArgs& a, Prims& p, int size, int me,
                                    At at, void* acc) {
  const size_t bytes = a.count * p.elemSize();
  const kernels::ReduceSpec& spec = a.spec;
  const int pow2 = static_cast<int>(floorPow2(static_cast<uint64_t>(size)));
  const int extra = size - pow2;
  if (me >= pow2) {
    CHORUS_CHECK(p.sendLL(at(me - pow2), acc, bytes));
    return p.recvLL(at(me - pow2), acc, bytes);  // the result, post already applied
  }
  const void* src;
  if (me < extra) {
    CHORUS_CHECK(p.waitLL(at(me + pow2), &src, bytes));
    kernels::reduce(spec, acc, acc, src, a.count, 0u);
    p.releaseLL(at(me + pow2));
  }
  for (int mask = 1; mask < pow2; mask <<= 1) {
    const int peer = at(me ^ mask);
    const bool lower = me < (me ^ mask);
    const bool turns = bytes > comm->sendConn[static_cast<size_t>(peer)]->llBufferedBytes() &&
                       bytes > comm->tuning.llBytes;
    const unsigned post = mask * 2 == pow2 ? kApplyPost : 0u;
    if (!turns || lower) CHORUS_CHECK(p.sendLL(peer, acc, bytes));
    CHORUS_CHECK(p.waitLL(peer, &src, bytes));
    if (lower) {
      kernels::reduce(spec, acc, acc, src, a.count, post);
    } else {
      if (turns) CHORUS_CHECK(p.sendLL(peer, acc, bytes));  // ours, before combining
      kernels::reduce(spec, acc, src, acc, a.count, post);
    }
    p.releaseLL(peer);
  }
  if (me < extra) CHORUS_CHECK(p.sendLL(at(me + pow2), acc, bytes));
  return chorusSuccess;
}

chorusResult_t allReduceThroughLeader(chorusComm* comm, const CollArgs& a, Prims& p, int leader,
                                      size_t piece) {
  const size_t bytes = a.count * p.elemSize();
  const kernels::ReduceSpec& spec = a.spec;
  const char* in = static_cast<const char*>(a.sendbuf);
  if (spec.preMul) {
    void* t = comm->scratch.get(comm->scratch.a, bytes);
    kernels::reduce(spec, t, nullptr, a.sendbuf, a.count, kApplyPre);
    in = static_cast<const char*>(t);
  }
  for (size_t off = 0; off < bytes; off += piece)
    CHORUS_CHECK(p.sendLL(leader, in + off, std::min(piece, bytes - off)));
  char* out = static_cast<char*>(a.recvbuf);
  for (size_t off = 0; off < bytes; off += piece)  // the result, post already applied
    CHORUS_CHECK(p.recvLL(leader, out + off, std::min(piece, bytes - off)));
  return chorusSuccess;
}

chorusResult_t leaderHandsBack(chorusComm* comm, Prims& p, const char* result, size_t bytes,
                               size_t piece) {
  const std::vector<int>& mates = comm->hostMates;
  for (size_t i = 1; i < mates.size(); ++i)
    for (size_t off = 0; off < bytes; off += piece)
      CHORUS_CHECK(p.sendLL(mates[i], result + off, std::min(piece, bytes - off)));
  return chorusSuccess;
}

// Across hosts that hold several ranks each: every rank hands its input to its host's
// lowest rank (the leader) over shared memory, the leaders run recursive doubling among
// themselves, and each leader hands the result back. One tcp message each way per leader
// pair, where plain doubling sends one per rank pair. Measured on 2 namespaced hosts x 2
// ranks sharing 2 CPUs (docs/PERF.md#perf-leaders), 8 B-8 KiB: 16-19 us against
// plain doubling's 27-31 (four processes in tcp at once) and Open MPI's 24-34.
// Leaders reduce their host's inputs in rank order and the leaders' rounds combine
// (lower group) OP (higher group) on both sides, so every rank ends with the same bits.
// Up to kLeadersMaxBytes: the shm hops go in pieces of at most CHORUS_LL_THRESHOLD (what
// an LL buffer holds); the leaders' rounds take turns only where the tcp FIFO cannot hold
// a whole message (doublingAmong; tcp's default 4 MiB does. Taking turns always, 2 x 2 at
// 32 / 256 KiB: 40 / 190-205 us against 25 / 137-166).
static chorusResult_t allReduceLeaders(chorusComm* comm, const CollArgs& a, Prims& p) {
  const int rank = comm->rank;
  const size_t elem = p.elemSize(), bytes = a.count * elem;
  const kernels::ReduceSpec& spec = a.spec;
  const std::vector<int>& mates = comm->hostMates;
  const std::vector<int>& leaders = comm->hostLeaders;
  const int leader = mates[0];
  const size_t piece = std::max(elem, comm->tuning.llBytes / elem * elem);
  char* acc = static_cast<char*>(a.recvbuf);
  if (rank != leader) return allReduceThroughLeader(comm, a, p, leader, piece);
  if (spec.preMul)
    kernels::reduce(spec, acc, nullptr, a.sendbuf, a.count, kApplyPre);
  else if (a.sendbuf != acc)
    std::memcpy(acc, a.sendbuf, bytes);
  const void* src;
  for (size_t i = 1; i < mates.size(); ++i)
    for (size_t off = 0; off < bytes; off += piece) {
      const size_t len = std::min(piece, bytes - off);
      CHORUS_CHECK(p.waitLL(mates[i], &src, len));
      kernels::reduce(spec, acc + off, acc + off, src, len / elem, 0u);
      p.releaseLL(mates[i]);
    }
  int me = 0;
  while (leaders[static_cast<size_t>(me)] != rank) ++me;
  CHORUS_CHECK(doublingAmong(
      comm, a, p, static_cast<int>(leaders.size()), me,
      [&](int i) { return leaders[static_cast<size_t>(i)]; }, acc));
  return leaderHandsBack(comm, p, acc, bytes, piece);
}

// Every rank decides alike: both counts are the communicator's, not this host's. (The
// model's leadersDoubling is the same shape, less shm-disabled runs it prices as plain.)
static bool leadersRun(const chorusComm* comm) {
  return comm->nHosts > 1 && comm->nHosts < comm->nranks;
}

size_t doublingMaxBytes(const chorusComm* comm) {
  // Plain doubling's LL messages must fit a shared-memory LL buffer; the leaders' shm hops
  // go in pieces.
  return leadersRun(comm) ? std::max(comm->tuning.llBytes, kLeadersMaxBytes) : comm->tuning.llBytes;
}

chorusResult_t allReduceRecDoubling(chorusComm* comm, const CollArgs& a, Prims& p) {
  noteRan(comm, Algo::Doubling, Proto::LL);
  if (leadersRun(comm)) return allReduceLeaders(comm, a, p);
  // The partial result lives in recvbuf: our pre-multiplied input to begin with.
  void* acc = a.recvbuf;
  if (a.spec.preMul)
    kernels::reduce(a.spec, acc, nullptr, a.sendbuf, a.count, kApplyPre);
  else if (a.sendbuf != acc)
    std::memcpy(acc, a.sendbuf, a.count * p.elemSize());
  return doublingAmong(
      comm, a, p, comm->nranks, comm->rank, [](int i) { return i; }, acc);
}

// One loop of a reduce-scatter + all-gather schedule (allReduceDirectFifo, the ring): the
// elements from `base` split evenly over n chunks of at most pieceElems; where the vector
// ends, the last chunks are short or empty.
struct LoopChunks {
  LoopChunks(size_t base, size_t count, size_t pieceElems, int n)
      : base(base),
        count(count),
        chunk(std::min(pieceElems, (count - base + n - 1) / static_cast<size_t>(n))) {}
  size_t off(int c) const { return std::min(base + static_cast<size_t>(c) * chunk, count); }
  size_t len(int c) const {
    return std::min(base + static_cast<size_t>(c + 1) * chunk, count) - off(c);
  }
  size_t base, count, chunk;
};

// Direct on the FIFOs: in each loop every rank sends block c of its input to rank c, rank r
// folds the n - 1 blocks it gets into its own (pre(own) OP from r-1 OP from r-2 ..., the
// same order every call; only rank r computes block r, so every rank gets the same bits),
// then sends the result to every rank and receives theirs. Per piece a rank waits twice, for
// whichever peers have run (the ring waits 2(n-1) times, each for one particular peer), so
// where ranks outnumber their CPUs (choosePlan) fewer waits cost a scheduler turn. The bytes
// moved are the ring's. A FIFO carries a peer's block then its result, in the order the
// peer reads them, so one free slot per direction is enough to make progress.
// In place, block c of our input is sent before the result for block c overwrites it, and
// block r is reduced in place element by element.
// Two ranks: each sends its whole input, piece by piece, and reduces both into its output,
// rank 0's input first on both ranks (the same operands in the same order: the same bits
// everywhere, NaNs and min/max included). One hand-off per piece, where the ring's reduce-
// scatter + all-gather waits for the peer's half, reduces, and waits again for the peer's
// result: the bytes read from the peer are the same, the second cross-core wait is gone, and
// each rank reduces the whole vector instead of half of it.
static chorusResult_t allReduceTwoRanks(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                        Prims& p) {
  const int peer = 1 - comm->rank;
  const size_t elem = p.elemSize(), count = a.count;
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* mine = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  if (a.spec.preMul) {  // both operands pre-multiplied once, ours into scratch
    char* t = static_cast<char*>(comm->scratch.get(comm->scratch.a, count * elem));
    kernels::reduce(a.spec, t, nullptr, mine, count, kApplyPre);
    mine = t;
  }
  for (size_t off = 0; off < count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, count - off), o = off * elem;
    // In place, this piece of our input is in the slot before the reduction overwrites it.
    CHORUS_CHECK(p.send(peer, mine + o, cnt, false));
    if (comm->rank == 0)
      CHORUS_CHECK(p.recvReduceCopyAfter(peer, mine + o, out + o, cnt));
    else
      CHORUS_CHECK(p.recvReduceCopy(peer, mine + o, out + o, cnt, true, false));
  }
  return chorusSuccess;
}

chorusResult_t allReduceDirectFifo(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                   Prims& p) {
  noteRan(comm, Algo::Direct, Proto::Simple);
  const int n = comm->nranks, rank = comm->rank;
  if (n == 2 && pairRuns(comm)) return allReduceTwoRanksPair(comm, a, plan, p);
  if (n == 2) return allReduceTwoRanks(comm, a, plan, p);
  const size_t elem = p.elemSize();
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t count = a.count;
  const size_t loopElems = pieceElems * static_cast<size_t>(n);
  for (size_t base = 0; base < count; base += loopElems) {
    const LoopChunks ch(base, count, pieceElems, n);
    for (int k = 1; k < n; ++k) {
      const int to = (rank + k) % n;
      CHORUS_CHECK(p.send(to, in + ch.off(to) * elem, ch.len(to), true));
    }
    const size_t mine = ch.off(rank) * elem, cnt = ch.len(rank);
    for (int k = 1; k < n; ++k) {
      const int from = (rank - k + n) % n;
      // dst = post?(slot OP pre?(local)): our own block, pre-multiplied, on the first fold.
      CHORUS_CHECK(p.recvReduceCopy(from, k == 1 ? in + mine : out + mine, out + mine, cnt,
                                    k == n - 1, k == 1));
    }
    for (int k = 1; k < n; ++k) CHORUS_CHECK(p.send((rank + k) % n, out + mine, cnt, false));
    for (int k = 1; k < n; ++k) {
      const int from = (rank - k + n) % n;
      CHORUS_CHECK(p.recv(from, out + ch.off(from) * elem, ch.len(from)));
    }
  }
  return chorusSuccess;
}

static chorusResult_t allReduceRingSteps(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                         Prims& p);

chorusResult_t allReduceRing(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  noteRan(comm, Algo::Ring, Proto::Simple);
  if (comm->nranks == 2 && pairRuns(comm)) return allReduceRingPair(comm, a, plan, p);
  // Slot stores, chosen per call from the timing of earlier ones (CHORUS_SLOT_STORES).
  return runWithSlotStores(comm, a, plan, p, SlotStoreUse::AllReduce, a.count * p.elemSize(),
                           a.sendbuf == a.recvbuf, allReduceRingSteps);
}

static chorusResult_t allReduceRingSteps(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                         Prims& p) {
  // Chunks are numbered by ring position (comm->ring), not rank: any numbering every rank
  // agrees on works, and this one keeps each host's ranks adjacent.
  const int n = comm->nranks, rank = comm->ring.me;
  const int next = comm->ring.next, prev = comm->ring.prev;
  const size_t elem = p.elemSize();
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t count = a.count;
  const size_t loopElems = pieceElems * static_cast<size_t>(n);

  for (size_t base = 0; base < count; base += loopElems) {
    const LoopChunks ch(base, count, pieceElems, n);

    // Reduce-scatter: chunk `rank` starts here, chunk `rank+1` finishes here.
    int c = rank;
    CHORUS_CHECK(p.send(next, in + ch.off(c) * elem, ch.len(c), true));
    for (int s = 1; s < n - 1; ++s) {
      c = (rank - s + n) % n;
      CHORUS_CHECK(p.recvReduceSend(prev, next, in + ch.off(c) * elem, ch.len(c)));
    }
    c = (rank + 1) % n;
    CHORUS_CHECK(p.recvReduceCopySend(prev, next, in + ch.off(c) * elem, out + ch.off(c) * elem,
                                      ch.len(c), true));
    // All-gather of the finished chunks.
    for (int s = 1; s < n - 1; ++s) {
      c = (rank + 1 - s + n) % n;
      CHORUS_CHECK(p.recvCopySend(prev, next, out + ch.off(c) * elem, ch.len(c)));
    }
    c = (rank + 2) % n;
    CHORUS_CHECK(p.recv(prev, out + ch.off(c) * elem, ch.len(c)));
  }
  return chorusSuccess;
}

namespace {

// One piece up one tree: ((pre(own) OP child0) OP child1) OP child2, the same association
// on every run; the root applies post and keeps the result in `pout`.
chorusResult_t treeUp(const TreeLinks& t, Prims& p, const char* pin, char* pout, size_t cnt) {
  const int parent = t.parent, nc = t.nchildren;
  const int* ch = t.children.data();
  if (nc == 0) return p.send(parent, pin, cnt, true);
  if (nc == 1) {
    if (parent < 0) return p.recvReduceCopy(ch[0], pin, pout, cnt, true);
    return p.recvReduceSend(ch[0], parent, pin, cnt);
  }
  // First partial into the output buffer (as scratch), then fold in the other children.
  // The partial is already pre-multiplied, so no pre after the first step.
  CHORUS_CHECK(p.recvReduceCopy(ch[0], pin, pout, cnt, false));
  for (int i = 1; i < nc - 1; ++i)
    CHORUS_CHECK(p.recvReduceCopy(ch[i], pout, pout, cnt, false, false));
  if (parent < 0) return p.recvReduceCopy(ch[nc - 1], pout, pout, cnt, true, false);
  return p.recvReduceSend(ch[nc - 1], parent, pout, cnt, false);
}

// The root's result back down the same tree.
chorusResult_t treeDown(const TreeLinks& t, Prims& p, char* pout, size_t cnt) {
  if (t.parent < 0) return p.sendMany(t.children.data(), t.nchildren, pout, cnt);
  if (t.nchildren > 0)
    return p.recvCopySendMany(t.parent, t.children.data(), t.nchildren, pout, cnt);
  return p.recv(t.parent, pout, cnt);
}

}  // namespace

chorusResult_t allReduceTree(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  noteRan(comm, Algo::Tree, Proto::Simple);
  // Double binary tree (comm->trees): the first half of the elements goes up and down tree 0,
  // the second half tree 1. A host that is an interior node of one tree is a leaf of the
  // other, so both halves move at once without doubling any link's load. Every rank runs
  // the same sequence of phases (piece k: up tree 0, up tree 1, down tree 0, down tree 1),
  // so the FIFO between two ranks carries messages in the same order at both ends and no
  // wait can form a cycle. Each element is reduced at its tree's root in a fixed order and
  // broadcast, so all ranks get the same bits.
  const size_t elem = p.elemSize();
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t half = (a.count + 1) / 2;
  const size_t first[2] = {0, half};
  const size_t len[2] = {half, a.count - half};

  for (size_t k = 0; k < half; k += pieceElems) {
    for (int t = 0; t < 2; ++t) {
      if (k >= len[t]) continue;
      const size_t off = first[t] + k, cnt = std::min(pieceElems, len[t] - k);
      CHORUS_CHECK(
          treeUp(comm->trees[static_cast<size_t>(t)], p, in + off * elem, out + off * elem, cnt));
    }
    for (int t = 0; t < 2; ++t) {
      if (k >= len[t]) continue;
      const size_t off = first[t] + k, cnt = std::min(pieceElems, len[t] - k);
      CHORUS_CHECK(treeDown(comm->trees[static_cast<size_t>(t)], p, out + off * elem, cnt));
    }
  }
  return chorusSuccess;
}

}  // namespace chorus
