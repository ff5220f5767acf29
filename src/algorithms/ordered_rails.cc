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

namespace {
// Part j of the call (rail j) is elements [j * partElems, ...), the last part up to the end,
// in pieces of pieceElems; every part has the same number of pieces (the last part's may be
// short, long or empty).
struct Rails {
  size_t count, partElems, pieceElems, pieces;
  int k;
  size_t end(int j) const {
    return j == k - 1 ? count : std::min(count, static_cast<size_t>(j + 1) * partElems);
  }
  size_t off(int j, size_t s) const {
    return std::min(end(j), static_cast<size_t>(j) * partElems + s * pieceElems);
  }
  size_t len(int j, size_t s) const {
    const size_t e = std::min(end(j), static_cast<size_t>(j) * partElems + (s + 1) * pieceElems);
    return e - std::min(e, off(j, s));
  }
  size_t largestPart() const {
    return std::max(partElems, count - std::min(count, static_cast<size_t>(k - 1) * partElems));
  }
};

// What of a rail's part leaves as one packet over tcp: a message of up to 65160 bytes (45
// segments of 1448, the MSS of a 1500-byte MTU with timestamps, under the kernel's 64 KiB
// GSO limit) goes out as one, 24 of them the transport's stripe header; one byte more and
// it takes a second, small packet, which costs both ends about as much as a full one
// (docs/PERF.md#perf-r36tail: 2 x 2 at 128 KiB, 64 KiB parts, 1.24-1.38x the default with
// each host's ranks on one CPU, against 1.01-1.21x when one part fits one packet). Where
// every one of k equal parts would just overflow a packet, parts 0..k-2 take one packet's
// worth each and the last one the rest: k + 1 packets each way instead of 2k. Elsewhere (a
// larger MTU, other transports) the split only makes the last part a little larger.
constexpr size_t kOnePacketPartBytes = 45 * 1448 - 24;

// From parts of 512 KiB (1 MiB calls on 2 ranks a host), pieces of at most 256 KiB: 2 x 2
// over tcp, each host's ranks on one CPU, 1 MiB 1.09x the default against 1.26x in one piece,
// 2 MiB 0.91-0.97x against 1.09-1.23x in 512 KiB pieces (one rank of each host per CPU: 0.97x
// against 1.06x, 0.91-1.00x against 1.10-1.16x); 512 KiB calls (256 KiB parts) in two pieces
// were slower with one rank of each host per CPU (docs/PERF.md#perf-r36tail).
constexpr size_t kTwoPiecesPartBytes = 512 << 10;

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
  noteRan(comm, Algo::Direct, Proto::Simple);
  const int n = comm->nranks, rank = comm->rank, hosts = n / k;
  const int h = rank / k, j = rank % k, first = h * k;
  const size_t elem = p.elemSize();
  Rails rails{a.count, (a.count + static_cast<size_t>(k) - 1) / static_cast<size_t>(k), 0, 0, k};
  rails.pieceElems = std::max<size_t>(1, std::min(plan.pieceBytes / elem, rails.partElems));
  // A part of kTwoPiecesPartBytes or more in one piece (or in slot-sized ones) runs up the
  // rail in long stretches before any of it comes down; in pieces of half that, the next one
  // goes up while the last comes down.
  if (rails.partElems * elem >= kTwoPiecesPartBytes)
    rails.pieceElems =
        std::max<size_t>(1, std::min(rails.pieceElems, kTwoPiecesPartBytes / 2 / elem));
  rails.pieces = (rails.partElems + rails.pieceElems - 1) / rails.pieceElems;
  // One piece per part, each just over a packet: the uneven split above, if the last part
  // still fits a slot. The same on every rank (count, k, elem, the plan, CHORUS_CHUNKSIZE).
  const size_t onePacket = kOnePacketPartBytes / elem, ku = static_cast<size_t>(k);
  if (rails.pieces == 1 && onePacket > 0 && a.count > ku * onePacket &&
      a.count <= (ku + 1) * onePacket &&
      (a.count - (ku - 1) * onePacket) * elem <= comm->tuning.slotBytes) {
    rails.partElems = onePacket;
    rails.pieceElems = rails.largestPart();
  }
  const size_t lag = 2 * static_cast<size_t>(hosts - 1 - h);
  const int prev = h > 0 ? rank - k : -1, next = h < hosts - 1 ? rank + k : -1;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  // The partial sums of part j go through scratch, never reused within the call (a tcp send
  // may read them until the call settles).
  char* acc = static_cast<char*>(comm->scratch.get(comm->scratch.b, rails.largestPart() * elem));
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
