// ordered_rails.cc — reproducible mode's all-reduce across hosts that hold equal, contiguous
// runs of ranks (host h: ranks h*k .. h*k+k-1, k >= 2): the rank-order result
// ((x0 OP x1) OP x2) OP ... computed by k chains of host leaders side by side, one per
// k-th of the call (docs/ARCHITECTURE.md, "Reproducible mode").
#include "src/algorithms/ordered_rails.h"

#include <algorithm>
#include <vector>

#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

using kernels::kApplyPost;
using kernels::kApplyPre;

int orderedRailsWidth(const chorusComm* comm) {
  const int n = comm->nranks, hosts = comm->nHosts;
  if (hosts < 2 || n % hosts != 0 || n / hosts < 2) return 0;
  const int k = n / hosts;
  // nHosts blocks of k ranks, each on one host: then each block is a host of its own.
  for (int r = 0; r < n; ++r)
    if (comm->peers[static_cast<size_t>(r)].hostHash !=
        comm->peers[static_cast<size_t>(r - r % k)].hostHash)
      return 0;
  return k;
}

namespace {
// Part j of the call (rail j) is elements [j * partElems, ...), in pieces of pieceElems; every
// part has the same number of pieces (the last part's may be short or empty).
struct Rails {
  size_t count, partElems, pieceElems, pieces;
  size_t off(int j, size_t s) const {
    return std::min(count, static_cast<size_t>(j) * partElems + s * pieceElems);
  }
  size_t len(int j, size_t s) const {
    const size_t end = std::min({count, static_cast<size_t>(j + 1) * partElems,
                                 static_cast<size_t>(j) * partElems + (s + 1) * pieceElems});
    return end - std::min(end, off(j, s));
  }
};

// A shared-memory connection holds this many LL messages that the receiver has not taken
// (transports/shm/layout.h kLlDepth): the rails' hops inside a host go on LL only where each
// rank's part for a mate fits them, since every rank sends its parts to its mates before it
// takes theirs.
constexpr size_t kRailsLLMessages = 4;

// The rails with one piece per part and the hops inside a host on LL messages, in
// CHORUS_LL_THRESHOLD pieces (orderedPlan: up to 128 KiB): on the FIFOs such a hop costs its
// receiver the whole piece's arrival before it adds, on LL it adds each message as it comes.
// The same steps and the same order of operands as orderedAllReduceRails (below), one step
// after the other: the mates' parts out (LL), the rail's sum up (tcp between hosts), down,
// the other rails' sums in (LL). No cycle of waits: a rank's LL sends in the first step
// fit the connection's buffers (kRailsLLMessages; a previous call's messages there are
// taken by a receiver that waits for nothing of this call), the sums go up as in the
// leaders' chain, and each send down waits only for a mate to take the first step's
// messages, which it does on its way up.
chorusResult_t railsLL(chorusComm* comm, const CollArgs& a, Prims& p, const Rails& rails, int k) {
  noteRan(comm, Algo::Direct, Proto::LL);
  const int n = comm->nranks, rank = comm->rank, hosts = n / k;
  const int h = rank / k, j = rank % k, first = h * k, last = first + k - 1;
  const size_t elem = p.elemSize();
  const size_t llElems = std::max<size_t>(1, comm->tuning.llBytes / elem);
  const int prev = h > 0 ? rank - k : -1, next = h < hosts - 1 ? rank + k : -1;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  auto sendLL = [&](int to, const char* src, size_t cnt) -> chorusResult_t {
    for (size_t c = 0; c < cnt; c += llElems)
      CHORUS_CHECK(p.sendLL(to, src + c * elem, std::min(llElems, cnt - c) * elem));
    return chorusSuccess;
  };
  // 1. Each mate's part of this rank's input, to the mate.
  for (int m = first; m <= last; ++m) {
    const size_t cnt = rails.len(m - first, 0);
    if (m != rank && cnt > 0) CHORUS_CHECK(sendLL(m, in + rails.off(m - first, 0) * elem, cnt));
  }
  // 2. Part j up: the partial sum from the host before, then this host's ranks in order.
  const size_t o = rails.off(j, 0), cnt = rails.len(j, 0);
  char* mine = out + o * elem;
  if (cnt > 0) {
    const char* x = in + o * elem;
    // Sums go to scratch but on the last host's final operation (its operands read by then,
    // or read element by element in that same operation).
    char* t = static_cast<char*>(comm->scratch.get(comm->scratch.b, cnt * elem));
    auto dest = [&](bool fin) { return next < 0 && fin ? mine : t; };
    const char* sum = nullptr;
    int r = first;
    if (prev >= 0) {
      if (first == rank) {  // the partial and this rank's input at once
        char* d = dest(r == last);
        CHORUS_CHECK(p.recvReduceCopy(prev, x, d, cnt, next < 0 && r == last, true));
        sum = d;
        ++r;
      } else {
        CHORUS_CHECK(p.recv(prev, t, cnt));
        sum = t;
      }
    }
    // Operand r's chunk c: this rank's input, or the mate's LL message (released after use).
    auto take = [&](int from, size_t c, size_t len, const void** src) -> chorusResult_t {
      if (from == rank) {
        *src = x + c * elem;
        return chorusSuccess;
      }
      return p.waitLL(from, src, len * elem);
    };
    for (; r <= last; ++r) {
      // With no sum yet, the first two operands at once.
      const int second = sum == nullptr ? r + 1 : -1;
      const bool fin = (second >= 0 ? second : r) == last;
      const unsigned post = fin && next < 0 ? kApplyPost : 0u;
      char* d = dest(fin);
      for (size_t c = 0; c < cnt; c += llElems) {
        const size_t len = std::min(llElems, cnt - c);
        const void* b = nullptr;
        CHORUS_CHECK(take(r, c, len, &b));
        if (second >= 0) {
          const void* b2 = nullptr;
          CHORUS_CHECK(take(second, c, len, &b2));
          kernels::reduce(a.spec, d + c * elem, b, b2, len, post);
          if (second != rank) p.releaseLL(second);
        } else {
          kernels::reduce(a.spec, d + c * elem, sum + c * elem, b, len, post);
        }
        if (r != rank) p.releaseLL(r);
      }
      sum = d;
      if (second >= 0) ++r;
    }
    // 3. Up to the next host, or down from the last: to the host before, then the mates.
    if (next >= 0) {
      CHORUS_CHECK(p.send(next, sum, cnt, false));
      CHORUS_CHECK(p.recv(next, mine, cnt));
    }
    if (prev >= 0) CHORUS_CHECK(p.send(prev, mine, cnt, false));
    for (int m = first; m <= last; ++m)
      if (m != rank) CHORUS_CHECK(sendLL(m, mine, cnt));
  }
  // 4. The other parts' sums from their rails' leaders on this host.
  for (int m = first; m <= last; ++m) {
    const size_t c = rails.len(m - first, 0), mo = rails.off(m - first, 0);
    for (size_t d = 0; m != rank && d < c; d += llElems)
      CHORUS_CHECK(p.recvLL(m, out + (mo + d) * elem, std::min(llElems, c - d) * elem));
  }
  return chorusSuccess;
}

}  // namespace

// Rail j runs through the j-th rank of every host (its leaders): rank h*k + j owns part j on
// host h. Each rank hands its input's piece of part j to rail j's leader on its host; the
// leader on host 0 adds its host's k pieces in rank order, and the leader on host h > 0 adds
// them one rank at a time, in rank order, to the partial sum of ranks 0 .. h*k-1 that rail
// j's leader on host h-1 sends it, and passes it on: the last host's leader holds the
// rank-order sum of the piece, which goes back down the rail (copies) and from each leader to
// its host's other ranks. Each host pair's link carries the call once a direction, in k
// streams, and every rank adds a k-th of the call, as the default's halving does, where one
// chain (of ranks, or of one leader per host) has each of its members add the whole call
// and hop after hop wait for the one before.
// Steps s = 0, 1, ...: each rank (1) sends its pieces s of the other rails to their leaders,
// (2) runs piece s of its own rail up, (3) piece s - lag of its rail down (to the host
// before and to its host's other ranks), (4) takes pieces s - lag of the other rails from
// their leaders, lag = 2 (H-1-h) pieces as in the leaders' chain (ordered_hosts.cc), the same
// for every rank of a host. No cycle of waits: the rails' leader chains are that schedule's,
// and a rank waits on a host mate only for what the mate sends in the same step before it
// waits for anything (1) or what the mate's rail brings down at that step (3), which needs
// only waits further down the same rail.
// In place: a rank's operands are read before the last operation of a piece writes its output
// (the partial sums go through scratch), and what it receives into its output it has sent.
chorusResult_t orderedAllReduceRails(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p, int k) {
  const int n = comm->nranks, rank = comm->rank, hosts = n / k;
  const int h = rank / k, j = rank % k, first = h * k;
  const size_t elem = p.elemSize();
  Rails rails{a.count, (a.count + static_cast<size_t>(k) - 1) / static_cast<size_t>(k), 0, 0};
  rails.pieceElems = std::max<size_t>(1, std::min(plan.pieceBytes / elem, rails.partElems));
  rails.pieces = (rails.partElems + rails.pieceElems - 1) / rails.pieceElems;
  if (plan.proto == Proto::LL && rails.pieces == 1 && !a.spec.preMul &&
      rails.partElems <= kRailsLLMessages * std::max<size_t>(1, comm->tuning.llBytes / elem))
    return railsLL(comm, a, p, rails, k);
  noteRan(comm, Algo::Direct, Proto::Simple);
  const size_t lag = 2 * static_cast<size_t>(hosts - 1 - h);
  const int prev = h > 0 ? rank - k : -1, next = h < hosts - 1 ? rank + k : -1;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  // The partial sums of part j go through scratch, never reused within the call (a tcp send
  // may read them until the call settles).
  char* acc = static_cast<char*>(comm->scratch.get(comm->scratch.b, rails.partElems * elem));
  // Down the rail: to the host before, then to this host's other ranks.
  std::vector<int> down;
  if (prev >= 0) down.push_back(prev);
  for (int m = first; m < first + k; ++m)
    if (m != rank) down.push_back(m);
  auto up = [&](size_t s) -> chorusResult_t {
    const size_t o = rails.off(j, s), cnt = rails.len(j, s);
    if (cnt == 0) return chorusSuccess;
    const char* x = in + o * elem;
    char* t = acc + (o - rails.off(j, 0)) * elem;
    // Where the sum so far goes: on the last host the output piece, once no operand still
    // to be read lives there (out of place, or this rank's input read); else scratch.
    char* mine = out + o * elem;
    bool ownRead = a.sendbuf != a.recvbuf;
    auto dest = [&](bool fin) { return next >= 0 ? t : fin || ownRead ? mine : t; };
    char* sum = nullptr;  // where the sum so far is (null: the first operand is not read)
    // The operands in order: the partial sum from the host before, then this host's ranks.
    int pending = prev >= 0 ? prev : -2;  // the first operand, unread: -1 own input, or a peer
    for (int r = first; r < first + k; ++r) {
      const bool fin = r == first + k - 1;
      const bool post = fin && next < 0;
      const int operand = r == rank ? -1 : r;
      if (sum == nullptr && pending == -2) {
        pending = operand;
        continue;
      }
      if (sum == nullptr) {
        if (pending >= 0 && operand >= 0) {  // both a peer's: the first into place, then on
          sum = dest(false);
          CHORUS_CHECK(p.recv(pending, sum, cnt));
        } else {  // a peer's and this rank's at once
          const int peer = pending >= 0 ? pending : operand;
          if (fin && next >= 0) return p.recvReduceSend(peer, next, x, cnt, true);
          ownRead = true;
          sum = dest(fin);
          CHORUS_CHECK(p.recvReduceCopy(peer, x, sum, cnt, post, true));
          continue;
        }
      }
      if (operand >= 0) {
        if (fin && next >= 0) return p.recvReduceSend(operand, next, sum, cnt, false);
        char* d = dest(fin);
        CHORUS_CHECK(p.recvReduceCopy(operand, sum, d, cnt, post, false));
        sum = d;
      } else {
        ownRead = true;
        char* d = dest(fin);
        kernels::reduce(a.spec, d, sum, x, cnt, kApplyPre | (post ? kApplyPost : 0u));
        sum = d;
        if (fin && next >= 0) return p.send(next, sum, cnt, false);
      }
    }
    return chorusSuccess;
  };
  auto goDown = [&](size_t s) -> chorusResult_t {
    const size_t o = rails.off(j, s), cnt = rails.len(j, s);
    if (cnt == 0) return chorusSuccess;
    char* d = out + o * elem;
    if (next < 0) return p.sendMany(down.data(), static_cast<int>(down.size()), d, cnt);
    return p.recvCopySendMany(next, down.data(), static_cast<int>(down.size()), d, cnt);
  };
  for (size_t s = 0; s < rails.pieces + lag; ++s) {
    if (s < rails.pieces) {
      for (int m = first; m < first + k; ++m) {
        const size_t cnt = rails.len(m - first, s);
        if (m != rank && cnt > 0)
          CHORUS_CHECK(p.send(m, in + rails.off(m - first, s) * elem, cnt, true));
      }
      CHORUS_CHECK(up(s));
    }
    if (s >= lag) {
      CHORUS_CHECK(goDown(s - lag));
      for (int m = first; m < first + k; ++m) {
        const size_t cnt = rails.len(m - first, s - lag);
        if (m != rank && cnt > 0)
          CHORUS_CHECK(p.recv(m, out + rails.off(m - first, s - lag) * elem, cnt));
      }
    }
  }
  return chorusSuccess;
}

}  // namespace chorus
