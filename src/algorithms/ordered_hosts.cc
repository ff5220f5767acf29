// ordered_hosts.cc — reproducible mode's all-reduce where shared memory does not join every
// pair (several hosts, or tcp forced): the rank-order result ((x0 OP x1) OP x2) OP ... with
// each link between hosts crossed as little as the order allows (docs/ARCHITECTURE.md,
// "Reproducible mode"; the plan: orderedPlan, src/tuning/ordered_plan.cc).
#include "src/algorithms/ordered_hosts.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

using kernels::kApplyPost;
using kernels::kApplyPre;

namespace {

// The communicator's ranks host by host (hosts in the order of comm->hostLeaders, each
// host's ranks ascending), and where each host's run starts in that order.
struct HostOrder {
  std::vector<int> ranks;  // host by host
  std::vector<int> first;  // host h's ranks are ranks[first[h] .. first[h + 1])
  std::vector<int> pos;    // rank r is at ranks[pos[r]]
};

HostOrder hostOrderOf(const chorusComm* comm) {
  HostOrder o;
  const size_t n = static_cast<size_t>(comm->nranks);
  o.pos.assign(n, 0);
  for (const int leader : comm->hostLeaders) {
    o.first.push_back(static_cast<int>(o.ranks.size()));
    const uint64_t host = comm->peers[static_cast<size_t>(leader)].hostHash;
    for (size_t r = 0; r < n; ++r)
      if (comm->peers[r].hostHash == host) {
        o.pos[r] = static_cast<int>(o.ranks.size());
        o.ranks.push_back(static_cast<int>(r));
      }
  }
  o.first.push_back(static_cast<int>(o.ranks.size()));
  return o;
}

// Whether the hosts hold contiguous runs of ranks in the leaders' order (host 0 ranks
// 0 .. k-1, host 1 the next, ...): the same answer on every rank, from the communicator's
// tables alone.
bool hostsInRankOrder(const HostOrder& o) {
  for (size_t i = 0; i < o.ranks.size(); ++i)
    if (o.ranks[i] != static_cast<int>(i)) return false;
  return true;
}

// The steps of a chain of `members` in order (orderedAllReduceChain, leaderChain): at step s,
// member i runs piece s up (while pieces remain) and, but on the last member (where the sum
// turns back), piece s - lag down, lag = 2 (members-1-i): member i sends piece k + lag up
// before it waits for piece k coming down (why no cycle of waits forms: the comment above
// orderedAllReduceChain, docs/ARCHITECTURE.md). `after(s)` ends each step.
template <typename Up, typename Down, typename After>
chorusResult_t chainSteps(size_t pieces, int member, int members, Up up, Down down, After after) {
  const size_t lag = 2 * static_cast<size_t>(members - 1 - member);
  for (size_t s = 0; s < pieces + lag; ++s) {
    if (s < pieces) CHORUS_CHECK(up(s));
    if (member < members - 1 && s >= lag) CHORUS_CHECK(down(s - lag));
    CHORUS_CHECK(after(s));
  }
  return chorusSuccess;
}

// The chain of the host leaders (hostsInRankOrder only), in pieces: leader h receives
// piece k of the partial sum of ranks 0 .. first(h)-1 from leader h-1, adds its own host's
// inputs to it one rank at a time in rank order, and passes it to leader h+1; the last
// leader's piece is the rank-order sum, which goes back down the leaders by copies. Each link
// between hosts carries the call once a direction (the swap carries every rank of the host),
// and the schedule is orderedAllReduceChain's with the leaders for ranks: leader h sends
// piece k + 2 (H-1-h) up before it waits for piece k coming down, so the same argument
// rules out a cycle of waits. `all` holds this host's pre-multiplied inputs at their
// HostOrder positions; the leader's output piece holds the partial until it was sent up.
template <typename GatherTo, typename HandTo>
chorusResult_t leaderChain(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p,
                           const HostOrder& o, int me, const char* all, GatherTo gatherTo,
                           HandTo handTo) {
  const std::vector<int>& leaders = comm->hostLeaders;
  const int hosts = static_cast<int>(leaders.size()), n = comm->nranks;
  const size_t elem = p.elemSize(), bytes = a.count * elem;
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const size_t pieces = (a.count + pieceElems - 1) / pieceElems;
  const int prev = me > 0 ? leaders[static_cast<size_t>(me - 1)] : -1;
  const int next = me < hosts - 1 ? leaders[static_cast<size_t>(me + 1)] : -1;
  const int lo = o.first[static_cast<size_t>(me)], hi = o.first[static_cast<size_t>(me) + 1];
  char* out = static_cast<char*>(a.recvbuf);
  size_t done = 0;  // bytes of the result this leader holds
  auto up = [&](size_t k) -> chorusResult_t {
    const size_t off = k * pieceElems * elem, cnt = std::min(pieceElems, a.count - k * pieceElems);
    CHORUS_CHECK(gatherTo(off + cnt * elem));
    char* d = out + off;
    int r = lo;
    if (me == 0) {
      kernels::reduce(a.spec, d, nullptr, all + static_cast<size_t>(r) * bytes + off, cnt, 0u);
    } else {
      CHORUS_CHECK(p.recvReduceCopy(prev, all + static_cast<size_t>(r) * bytes + off, d, cnt,
                                    r == n - 1, false));
    }
    for (++r; r < hi; ++r)
      kernels::reduce(a.spec, d, d, all + static_cast<size_t>(r) * bytes + off, cnt,
                      r == n - 1 ? kApplyPost : 0u);
    if (next < 0) done = off + cnt * elem;
    return p.send(next >= 0 ? next : prev, d, cnt, false);
  };
  auto down = [&](size_t k) -> chorusResult_t {
    const size_t off = k * pieceElems * elem, cnt = std::min(pieceElems, a.count - k * pieceElems);
    done = off + cnt * elem;
    if (me == 0) return p.recv(next, out + off, cnt);
    return p.recvCopySend(next, prev, out + off, cnt);
  };
  // The host's other ranks get each piece of the sum as it comes, once they have handed over
  // all their input (before, a mate may still be waiting for room to send it).
  auto handAfter = [&](size_t s) { return s + 1 >= pieces ? handTo(done) : chorusSuccess; };
  CHORUS_CHECK(chainSteps(pieces, me, hosts, up, down, handAfter));
  return handTo(bytes);
}

}  // namespace

// Up to a few tens of KiB (orderedPlan) the cost is the crossings, not the bytes. Every
// rank hands its pre-multiplied input to its host's leader (shared memory, LL pieces), the
// leaders send each other their hosts' inputs as they are (one message per leader pair:
// each link crossed once each way, as the default leaders' doubling does), and every leader
// adds all n inputs in rank order: the same operands in the same order on every leader, so
// the same bits; it hands the sum back to its host's ranks (copies). The previous plan (all
// to rank 0, the sum back) crossed twice: 2.0-2.6x the default at 8 B-16 KiB on 2 hosts x 2.
// Where the hosts hold contiguous runs of ranks, host 0's ranks are the first operands of
// every leader's loop: its leader adds them once and sends that partial sum instead (host
// 0's link carries the call once, not once per rank: 1.05-1.5x the default up to 32 KiB on
// 2 hosts x 2, where the raw inputs cost 1.2-2.0x; docs/PERF.md "The host leaders' rails").
// The leaders' exchange cannot deadlock: a leader whose message fits every link's buffer
// (llBufferedBytes) sends it to all before receiving; one whose message does not sends when
// its turn comes in the receive order, leader 0 first, so by induction on the turn every
// message a leader waits for is sent or being drained.
// With plan.chain (orderedPlan: at 64 KiB), where the hosts hold contiguous runs of ranks,
// the leaders chain partial sums instead (leaderChain): the swap's messages from hosts after
// the first are their hosts' inputs, ranks-per-host times the call, and from there their
// bytes cost more than a second crossing does. Hosts interleaved in rank order keep the swap
// at every size.
chorusResult_t orderedAllReduceLeaders(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                       Prims& p) {
  noteRan(comm, Algo::Direct, Proto::LL);
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), bytes = a.count * elem;
  const kernels::ReduceSpec& spec = a.spec;
  const std::vector<int>& mates = comm->hostMates;
  const int leader = mates[0];
  const size_t piece = std::max(elem, comm->tuning.llBytes / elem * elem);
  if (rank != leader) return allReduceThroughLeader(comm, a, p, leader, piece);
  const HostOrder o = hostOrderOf(comm);
  const std::vector<int>& leaders = comm->hostLeaders;
  const int hosts = static_cast<int>(leaders.size());
  int me = 0;
  while (leaders[static_cast<size_t>(me)] != rank) ++me;
  const bool inOrder = hosts > 1 && hostsInRankOrder(o);
  // Every rank's input, host by host: a host's inputs are one contiguous message.
  char* all =
      static_cast<char*>(comm->scratch.get(comm->scratch.b, bytes * static_cast<size_t>(n)));
  auto at = [&](int position) { return all + static_cast<size_t>(position) * bytes; };
  auto hostBytes = [&](int h) {
    if (inOrder && h == 0) return bytes;  // host 0's partial sum
    return static_cast<size_t>(o.first[static_cast<size_t>(h) + 1] -
                               o.first[static_cast<size_t>(h)]) *
           bytes;
  };
  kernels::reduce(spec, at(o.pos[static_cast<size_t>(rank)]), nullptr, a.sendbuf, a.count,
                  kApplyPre);
  // The mates' inputs into `all`, up to byte `end` of each (LL pieces, in order).
  std::vector<size_t> got(mates.size(), 0);
  auto gatherTo = [&](size_t end) -> chorusResult_t {
    for (size_t i = 1; i < mates.size(); ++i) {
      char* d = at(o.pos[static_cast<size_t>(mates[i])]);
      while (got[i] < end) {
        const size_t len = std::min(piece, bytes - got[i]);
        CHORUS_CHECK(p.recvLL(mates[i], d + got[i], len));
        got[i] += len;
      }
    }
    return chorusSuccess;
  };
  if (plan.chain && inOrder) {
    // The result to the mates, in the LL pieces they wait for, up to byte `end` as it comes.
    size_t handed = 0;
    const char* result = static_cast<const char*>(a.recvbuf);
    auto handTo = [&](size_t end) -> chorusResult_t {
      while (handed < end && (end - handed >= piece || end == bytes)) {
        const size_t len = std::min(piece, bytes - handed);
        for (size_t i = 1; i < mates.size(); ++i)
          CHORUS_CHECK(p.sendLL(mates[i], result + handed, len));
        handed += len;
      }
      return chorusSuccess;
    };
    return leaderChain(comm, a, plan, p, o, me, all, gatherTo, handTo);
  }
  CHORUS_CHECK(gatherTo(bytes));
  if (inOrder && me == 0)  // host 0's partial sum, in rank order, into position 0
    for (int r = 1; r < o.first[1]; ++r) kernels::reduce(spec, at(0), at(0), at(r), a.count, 0u);
  const char* mine = at(o.first[static_cast<size_t>(me)]);
  const size_t myBytes = hostBytes(me);
  bool fits = true;
  for (int h = 0; h < hosts; ++h)
    if (h != me &&
        myBytes >
            comm->sendConn[static_cast<size_t>(leaders[static_cast<size_t>(h)])]->llBufferedBytes())
      fits = false;
  auto sendToAll = [&]() -> chorusResult_t {
    for (int k = 1; k < hosts; ++k)
      CHORUS_CHECK(p.sendLL(leaders[static_cast<size_t>((me + k) % hosts)], mine, myBytes));
    return chorusSuccess;
  };
  if (fits) CHORUS_CHECK(sendToAll());
  for (int h = 0; h < hosts; ++h) {
    if (h == me) {
      if (!fits) CHORUS_CHECK(sendToAll());
      continue;
    }
    CHORUS_CHECK(p.recvLL(leaders[static_cast<size_t>(h)], at(o.first[static_cast<size_t>(h)]),
                          hostBytes(h)));
  }
  // The one loop that adds, the same on every leader: rank order.
  char* out = static_cast<char*>(a.recvbuf);
  // (In rank order, position 0 holds host 0's partial sum, the first o.first[1] operands.)
  for (int r = inOrder ? o.first[1] : 0; r < n; ++r) {
    const char* src = at(o.pos[static_cast<size_t>(r)]);
    const unsigned post = r == n - 1 ? kApplyPost : 0u;
    const char* acc = r == 0 ? nullptr : inOrder && r == o.first[1] ? at(0) : out;
    kernels::reduce(spec, out, acc, src, a.count, post);
  }
  return leaderHandsBack(comm, p, out, bytes, piece);
}

// Above that, where the hosts' runs of ranks are not contiguous and equal (else the leaders'
// rails, ordered_rails.cc), a chain in rank order: rank r adds its pre-multiplied input to the
// partial sum of ranks 0 .. r-1 that rank r-1 sends and passes it on, so rank n-1 ends with
// ((x0 OP x1) OP ...) OP x(n-1), which goes back down the chain, n-1 -> ... -> 0, by copies.
// The ranks of a host are contiguous in the usual layouts, so the partial crosses each link
// between hosts once a direction, where the direct exchange sends every block to every
// remote peer. The two directions overlap: rank r sends piece k + lag(r) up before it waits
// for piece k coming down, lag(r) = 2 (n - 1 - r) pieces (the round trip from r to the end
// of the chain and back), so both directions of a link carry pieces at once (one after the
// other: 1.3-1.7x the default from 32 MiB on 2 hosts x 2).
// No cycle of waits: rank r waits for piece k from r + 1 only after sending piece
// k + lag(r) up, and rank r + 1 sends piece k down after receiving piece k + lag(r + 1) <=
// k + lag(r); rank r's sends up wait only for r + 1 to drain, which it does before each wait
// for a piece from r + 2, and so on up to n - 1, whose sends down wait for nothing but room.
// In place is safe: rank r writes piece k of its output (coming down) only after it sent
// piece k up, and rank n-1 reduces element by element.
chorusResult_t orderedAllReduceChain(chorusComm* comm, const CollArgs& a, const Plan& plan,
                                     Prims& p) {
  noteRan(comm, Algo::Direct, Proto::Simple);
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const size_t pieces = (a.count + pieceElems - 1) / pieceElems;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  auto up = [&](size_t k) -> chorusResult_t {
    const size_t off = k * pieceElems, cnt = std::min(pieceElems, a.count - off);
    const char* x = in + off * elem;
    if (rank == 0) return p.send(1, x, cnt, true);
    if (rank < n - 1) return p.recvReduceSend(rank - 1, rank + 1, x, cnt, true);
    return p.recvReduceCopySend(rank - 1, rank - 1, x, out + off * elem, cnt, true);
  };
  auto down = [&](size_t k) -> chorusResult_t {
    const size_t off = k * pieceElems, cnt = std::min(pieceElems, a.count - off);
    char* d = out + off * elem;
    if (rank == 0) return p.recv(1, d, cnt);
    return p.recvCopySend(rank + 1, rank - 1, d, cnt);
  };
  return chainSteps(pieces, rank, n, up, down, [](size_t) { return chorusSuccess; });
}

}  // namespace chorus
