// single_copy.cc — same-host collectives that copy once, straight between user buffers.
//
// The FIFO path copies every byte twice (into a slot, out of it). When all ranks share a
// host, a rank can instead reach a peer's buffer directly, through the shm transport's
// PeerAccess (transports/peer_access.h): process_vm_readv/writev (CMA) when the kernel
// allows it, or a mapping of the peer's registered chorusMemAlloc region. The plan
// (choosePlan) routes a call here and says whether CMA may be used. Each call then runs in three
// steps:
//   1. the ranks that touch each other's buffers swap descriptors (addresses, and the
//      region when registered) on the LL path;
//   2. each rank copies what it needs, one copy per byte;
//   3. each rank tells the owners of the buffers it touched that it is done, and waits for
//      the same from the ranks that touch its buffers, so no call returns while a peer
//      still reads its input or writes its output.
// The work is spread over all ranks: in all-gather and all-to-all every rank reads its
// blocks from the others, in gather every rank writes its block into the root's output,
// in scatter every rank reads its block from the root's input, in broadcast the root
// writes part of every receiver's output while the receivers read the rest, and in a large
// all-reduce every rank reduces one share from all inputs and writes each reduced piece
// into every rank's output (reduce once, write each output byte once, where the FIFO ring
// adds a staging copy).
// Whether a call runs here is decided by the plan from what every rank knows (size, CMA
// probe), and, after step 1, from descriptors seen by both ends of every pair, so the ranks
// never disagree; a buffer that cannot be reached falls back to the plan's FIFO schedule.
#include <algorithm>
#include <cstring>
#include <vector>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "transports/peer_access.h"
#include "src/core/checks.h"
#include "src/core/debug.h"

namespace chorus {
namespace {

using Desc = PeerDesc;

int decidingRank(const CollArgs& a) { return copyPathDecider(a.coll, a.root); }

// The most calls one FIFO lease covers (singleCopyLeased). A call that falls back to the
// FIFO paid a descriptor swap for nothing: a round trip on the LL path that, at np 2, made
// gather and scatter of 32 KiB 0.67 us where the FIFO alone takes 0.40 (AMD EPYC Zen 5,
// docs/PERF.md#perf-fifo-lease), and serialised the calls (a gather's sender waited for the
// root's descriptor, so back-to-back calls could not pipeline). Up to this many following
// calls of the same collective, size and deciding rank skip the swap: the swap's cost is
// then spread over 64 calls (well under 1% at any size it runs), and registered buffers
// that follow ordinary ones of the same size run on the FIFO for at most 63 calls. The
// chooser's own schedule of CMA tries (src/tuning/copy_path.h) bounds it further.
constexpr uint32_t kFifoLeaseMax = 63;

// Collectives whose root leaves the FIFO path before its receivers have their bytes: the
// root times a call with its receivers' times, which come with their next descriptors.
bool rootLeavesEarly(Coll c) { return c == Coll::Broadcast || c == Coll::Scatter; }

// Collectives whose FIFO the chooser judges on leased calls. The gather's deciding rank lags
// its peers on the FIFO: the root copies its own block and every peer's out of the slots,
// each sender one block in, so over a lease a sender runs ahead by as many calls as the FIFO
// holds (8 at np 2). The swap that ends the
// lease then runs in series: the sender, often asleep by then (the root is up to 8 calls
// behind), waits for the root's descriptor, is woken, and only then writes the call's
// block, while the root waits for it. Timed, that call took 1.8-76x the leased calls' time
// (np 2, AMD EPYC Zen 5, near, where the chooser switched: 256 KiB 10-14 us against 3-4,
// 512 KiB 20-580 against 7.6-8.3, 1 MiB 36-660 against 13-21), so it took CMA (9, 16 and
// 32 us there) for 32 calls and more at 2-3x the FIFO's time (docs/PERF.md#perf-gather4).
// Such a rank times every call of each lease instead, and the swap call gives the chooser
// their mean (the lease's last call alone, as before docs/PERF.md#perf-z3gather: one sample,
// and in a short try lease, below, one the pipeline may still be filling for).
//
// The all-gather's FIFO (at np 2 the pair cells, pair.cc) lags no rank, but its single swap
// calls misjudge it the same way: on AMD EPYC Zen 3 (2 vCPUs, near window) a 2 MiB
// all-gather's FIFO took 109-113 us a call forced (`CHORUS_CMA_MAX=0`, every call leased),
// where the chooser's timed FIFO calls read 300-331 us as the size's first tries and 143-244
// us as tries after CMA calls (the one uncounted call after a switch does not cover it; why
// those calls run slow was not measured): the chooser took CMA (175-200 us) for most of a
// run, and auto read 129-176 us against the FIFO's 109-113 (docs/PERF.md#perf-agfar). Its
// rank 0 (the decider) times its FIFO leases alike, but gives the chooser the fastest call
// of a lease, not the mean: a lease's mean, one slow call in 8 weighing in (39.2 us where
// calls take 13-15), switched 256 KiB to CMA (near, medians of 10 launches: 16.72 us against
// main's 13.83; with the fastest call 13.91 against 13.66), and the chooser's own figure for a
// chosen way is likewise the lower of two calls (noise only adds time).
bool fifoJudgedOnLeases(Coll c) { return c == Coll::Gather || c == Coll::AllGather; }

// The lease such a rank offers with a FIFO call that the chooser times (its first tries, a
// try of the FIFO against CMA), so the FIFO is judged on leased calls there too. A try
// was a single swap call, run in series: on AMD EPYC Zen 3 (2 vCPUs, near) a 2 MiB gather's
// FIFO tries read 222-237 us, where leased calls take 76-85, so every size settled on CMA
// (133-145 us; docs/PERF.md#perf-z3gather). As many calls as the FIFO lets a sender run
// ahead at the slot size (8 slots), so the pipeline fills within the lease.
constexpr uint32_t kFifoTryLease = 8;

// Feeds one timed call to the collective's chooser; logs a change of path at INFO.
void recordCopyPath(chorusComm* comm, Coll coll, size_t bytes, bool inPlace, CopyPath way,
                    uint64_t ns) {
  PeerMem& pm = comm->peerMem;
  CopyPathChooser& ch = pm.copyPaths[copyPathUse(coll)];
  if (!ch.record(bytes, inPlace, way, static_cast<double>(ns)) || pm.copyPathLogs >= 32) return;
  ++pm.copyPathLogs;
  CHORUS_INFO(kLogTuning,
              "rank %d: %s of %zu result B%s: copy path now %s for every rank (recent calls "
              "%.1f us FIFO, %.1f us CMA; CHORUS_CMA_MAX=auto)%s",
              comm->rank, collName(coll), bytes, inPlace ? " in place" : "",
              copyPathName(ch.choose(bytes, inPlace)),
              ch.ewmaNs(bytes, inPlace, CopyPath::Fifo) / 1e3,
              ch.ewmaNs(bytes, inPlace, CopyPath::Cma) / 1e3,
              pm.copyPathLogs == 32 ? "; no more of these lines" : "");
}

class SingleCopy {
 public:
  SingleCopy(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p, uint64_t seq,
             size_t resultBytes, CopyPathCall* call)
      : comm_(comm), a_(a), p_(p), seq_(seq), n_(comm->nranks), rank_(comm->rank) {
    bytes_ = a.count * p.elemSize();
    // The plan says whether CMA may carry unregistered buffers (below CHORUS_CMA_MAX, and,
    // under CHORUS_CMA_MAX=auto, on the deciding rank, its chooser's pick for this call);
    // registered buffers are reached through mappings at every size. Every rank takes the
    // deciding rank's choice from its descriptor (swap).
    cma_ = plan.cma;
    // The FIFO lease this rank offers, if it decides the call (the others' offers go unread).
    const bool inPlace = a.sendbuf == a.recvbuf;
    if (rank_ == decidingRank(a) && !cma_)
      offer_ = plan.cmaTimed ? comm->peerMem.copyPaths[copyPathUse(a.coll)].runway(
                                   resultBytes, inPlace, CopyPath::Fifo, kFifoLeaseMax)
                             : kFifoLeaseMax;  // CMA off for this size: the FIFO every time
    // A FIFO call that the chooser times (its first tries, a try against CMA) where the FIFO
    // is judged on leases: a short lease, so the swap after it reports the leased calls'
    // figure (their mean; all-gather's, the fastest: fifoJudgedOnLeases) instead of the swap
    // call's own time.
    if (rank_ == decidingRank(a) && !cma_ && plan.cmaTimed && fifoJudgedOnLeases(a.coll) &&
        offer_ == 0)
      offer_ = kFifoTryLease;
    if (plan.cmaTimed) {
      call->chose = true;
      call->use = copyPathUse(a.coll);
      call->bytes = resultBytes;
      call->inPlace = inPlace;
      call->way = cma_ ? CopyPath::Cma : CopyPath::Fifo;
    }
    theirs_.resize(static_cast<size_t>(n_));
  }

  // This call took the single-copy route: CMA where the deciding rank allowed it, else
  // registered buffers' mappings only.
  void ran() { noteRan(comm_, Algo::Direct, Proto::Simple, cma_ ? PathRan::Cma : PathRan::Mapped); }

  // Sends our descriptor to every rank in `to`, receives one from every rank in `from`.
  chorusResult_t swap(const std::vector<int>& to, const std::vector<int>& from, bool sendSide,
                      bool recvSide) {
    Desc mine{};
    const size_t n = static_cast<size_t>(n_);
    const size_t sendBytes =
        (a_.coll == Coll::AllToAll || (a_.coll == Coll::Scatter && rank_ == a_.root)) ? bytes_ * n
                                                                                      : bytes_;
    const size_t recvBytes = (a_.coll == Coll::AllGather || a_.coll == Coll::AllToAll ||
                              (a_.coll == Coll::Gather && rank_ == a_.root))
                                 ? bytes_ * n
                                 : bytes_;
    if (sendSide) mine.send = peerMemRef(comm_, a_.sendbuf, sendBytes);
    mine.send.pad = a_.sendbuf == a_.recvbuf ? 1 : 0;
    if (recvSide) mine.recv = peerMemRef(comm_, a_.recvbuf, recvBytes);
    mine.seq = seq_;
    mine.bytes = bytes_;
    mine.cma = cma_ ? 1 : 0;
    mine.fifoLease = offer_;
    const PeerMem::LastCall& last =
        comm_->peerMem.lastCall[static_cast<size_t>(copyPathUse(a_.coll))];
    mine.lastSeq = last.seq;
    mine.lastNs = last.ns;
    theirs_[static_cast<size_t>(rank_)] = mine;
    for (int peer : to) CHORUS_CHECK(p_.sendLL(peer, &mine, sizeof mine));
    const int64_t waitFrom = nowNs();
    for (int peer : from) {
      Desc& d = theirs_[static_cast<size_t>(peer)];
      CHORUS_CHECK(p_.recvLL(peer, &d, sizeof d));
      if (d.seq != seq_ || d.bytes != bytes_)
        return fail(chorusInvalidUsage, __FILE__, __LINE__,
                    "%s #%llu on rank %d: rank %d is in call #%llu with %llu bytes where this "
                    "rank has %zu: the ranks called different collectives, counts or types",
                    collName(a_.coll), static_cast<unsigned long long>(seq_), rank_, peer,
                    static_cast<unsigned long long>(d.seq),
                    static_cast<unsigned long long>(d.bytes), bytes_);
    }
    cma_ = theirs_[static_cast<size_t>(decidingRank(a_))].cma == 1;
    // A root that leaves early runs ahead of its receivers through a FIFO lease (up to 63
    // calls, and as many as the FIFO holds), so the swap that ends the lease waits here for
    // the receivers to drain the calls before: the leased calls' time, not this call's.
    // Counted, it made the FIFO's timed calls 3-12x its leased ones (scatter np 2, 128 KiB:
    // 3.4-47 us against 1.2-1.5), most of all in place, where the root, with no copy of its
    // own, runs furthest ahead: the chooser then took CMA at 5.8 us for dozens of calls and
    // in-place scatter ran at twice the FIFO's time (docs/PERF.md#perf-gather2). CMA calls
    // wait for each other at every call (finish), so their swap holds no such backlog.
    if (rootLeavesEarly(a_.coll) && rank_ == a_.root && !cma_) catchUpNs_ = nowNs() - waitFrom;
    if (rootLeavesEarly(a_.coll) && rank_ == a_.root) recordPending(from);
    return chorusSuccess;
  }

  // The root's last timed call of this collective, now that the receivers' times of it
  // came with their descriptors: the call took as long as its slowest rank.
  void recordPending(const std::vector<int>& from) {
    PeerMem::PendingCall& pc = comm_->peerMem.pending[static_cast<size_t>(copyPathUse(a_.coll))];
    if (pc.seq == 0) return;
    uint64_t ns = pc.ns;
    for (int peer : from) {
      const Desc& d = theirs_[static_cast<size_t>(peer)];
      if (d.lastSeq == pc.seq) ns = std::max(ns, d.lastNs);
    }
    recordCopyPath(comm_, a_.coll, pc.bytes, pc.inPlace, pc.way, ns);
    pc = PeerMem::PendingCall{};
  }

  // Step 3: "done" to every rank in `to`, and wait for it from every rank in `from`.
  chorusResult_t finish(const std::vector<int>& to, const std::vector<int>& from) {
    for (int peer : to) CHORUS_CHECK(p_.sendLL(peer, &seq_, sizeof seq_));
    for (int peer : from) {
      uint64_t got = 0;
      CHORUS_CHECK(p_.recvLL(peer, &got, sizeof got));
      if (got != seq_)
        return fail(chorusInternalError, __FILE__, __LINE__,
                    "%s #%llu on rank %d: rank %d finished call #%llu", collName(a_.coll),
                    static_cast<unsigned long long>(seq_), rank_, peer,
                    static_cast<unsigned long long>(got));
    }
    return chorusSuccess;
  }

  // The call falls back to the FIFO schedule (no buffer reachable, or the FIFO chosen).
  chorusResult_t fellBack() {
    fifo_ = true;
    return chorusSuccess;
  }

  // After the swap, on every rank alike: a call that fell back to the FIFO takes the deciding
  // rank's lease for the next calls (singleCopyLeased); one that copied once ends any lease.
  void noteLease(const Plan& plan, size_t resultBytes) {
    const int d = decidingRank(a_);
    const uint32_t lease = fifo_ ? of(d).fifoLease : 0;
    const CopyPathUse u = copyPathUse(a_.coll);
    comm_->peerMem.fifoLease[static_cast<size_t>(u)] = PeerMem::FifoLease{resultBytes, d, lease};
    if (lease && rank_ == d && plan.cmaTimed)
      comm_->peerMem.copyPaths[u].skipped(resultBytes, a_.sendbuf == a_.recvbuf, lease);
  }

  const Desc& of(int r) const { return theirs_[static_cast<size_t>(r)]; }
  // The transport's reach into peers' memory (planned only where there is one: allShm).
  PeerAccess& access() const { return *comm_->peerMem.access; }
  bool cma() const { return cma_; }
  std::vector<int> others() const {
    std::vector<int> v;
    for (int k = 1; k < n_; ++k) v.push_back((rank_ + k) % n_);
    return v;
  }
  std::vector<int> othersFrom() const {  // the receive order that matches others() sends
    std::vector<int> v;
    for (int k = 1; k < n_; ++k) v.push_back((rank_ - k + n_) % n_);
    return v;
  }

  chorusComm* comm_;
  const CollArgs& a_;
  Prims& p_;
  uint64_t seq_;
  int n_, rank_;
  size_t bytes_;
  bool cma_;
  uint32_t offer_ = 0;      // the FIFO lease in our descriptor
  uint64_t catchUpNs_ = 0;  // swap: a root that leaves early waited for its receivers
  bool fifo_ = false;       // fellBack()
  std::vector<Desc> theirs_;
};

// Every rank reads block `rank` (all-to-all) or the whole input (all-gather) of every other.
chorusResult_t allToAllLike(SingleCopy& s, const Plan& plan, bool* done) {
  const bool a2a = s.a_.coll == Coll::AllToAll;
  const std::vector<int> to = s.others(), from = s.othersFrom();
  CHORUS_CHECK(s.swap(to, from, true, false));
  for (int r = 0; r < s.n_; ++r)
    if (!peerReachable(s.of(r).send, s.cma())) return s.fellBack();  // all see the same
  const size_t b = s.bytes_;
  char* out = static_cast<char*>(s.a_.recvbuf);
  const char* in = static_cast<const char*>(s.a_.sendbuf);
  const size_t mine = static_cast<size_t>(s.rank_);
  const char* own = a2a ? in + mine * b : in;
  // Our own block: streaming stores where the plan says the output is too large to stay
  // in cache (CHORUS_NT_THRESHOLD; all-gather np 2, 16 MiB: 1874 against 2185 us).
  if (out + mine * b != own) {
    if (plan.streaming)
      kernels::copy(out + mine * b, own, b, true);
    else
      std::memmove(out + mine * b, own, b);
  }
  // Peers' blocks: the kernel's copy (CMA), or, from a registered peer's mapping, a copy
  // with streaming stores where the output is too large to stay in cache, like our own
  // block (np 2, -R 1, 64 MiB: all-gather 6736 against 9331 us, all-to-all 8735 against
  // 10291; 8-32 MiB 1.04-1.14x).
  for (int peer : from)
    CHORUS_CHECK(s.access().read(peer, s.of(peer).send, a2a ? mine * b : 0,
                                 out + static_cast<size_t>(peer) * b, b, plan.streaming));
  CHORUS_CHECK(s.finish(to, from));
  *done = true;
  s.ran();
  return chorusSuccess;
}

// The root writes the first part of every receiver's output when it has no copy of its own
// to make (in place) and can reach it; the receivers read the rest.
chorusResult_t broadcast(SingleCopy& s, const Plan& plan, bool* done) {
  const int root = s.a_.root, n = s.n_;
  const size_t b = s.bytes_;
  std::vector<int> peersOfRoot;
  if (s.rank_ == root)
    peersOfRoot = s.others();
  else
    peersOfRoot = {root};
  CHORUS_CHECK(s.swap(peersOfRoot, peersOfRoot, s.rank_ == root, s.rank_ != root));
  if (!peerReachable(s.of(root).send, s.cma())) return s.fellBack();
  const Desc& r = s.of(root);
  // The root tells the receivers in its descriptor whether it is in place (send.pad).
  const bool rootInPlace = r.send.pad == 1;
  const size_t rootPart =
      rootInPlace ? (b / static_cast<size_t>(n)) & ~static_cast<size_t>(4095) : 0;
  if (s.rank_ == root) {
    if (!rootInPlace) kernels::copy(s.a_.recvbuf, s.a_.sendbuf, b, plan.streaming);
    for (int peer : peersOfRoot) {
      const BufRef& dst = s.of(peer).recv;
      if (rootPart && peerReachable(dst, s.cma()))
        CHORUS_CHECK(s.access().write(peer, dst, 0, s.a_.sendbuf, rootPart, plan.streaming));
    }
  } else {
    const size_t from = rootPart && peerReachable(s.of(s.rank_).recv, s.cma()) ? rootPart : 0;
    CHORUS_CHECK(s.access().read(root, r.send, from, static_cast<char*>(s.a_.recvbuf) + from,
                                 b - from, plan.streaming));
  }
  CHORUS_CHECK(s.finish(peersOfRoot, peersOfRoot));
  *done = true;
  s.ran();
  return chorusSuccess;
}

// Every rank writes its block into the root's output. Whether it can is the root's output
// alone (registered, or CMA chosen), which every rank sees in the root's descriptor: where it
// cannot, the call falls back to the FIFO schedule as a whole (gatherRun).
chorusResult_t gather(SingleCopy& s, const Plan& plan, bool* done) {
  const int root = s.a_.root;
  const size_t b = s.bytes_;
  if (s.rank_ == root) {
    const std::vector<int> to = s.others();
    CHORUS_CHECK(s.swap(to, {}, false, true));
    if (!peerReachable(s.of(root).recv, s.cma())) return s.fellBack();
    char* own = static_cast<char*>(s.a_.recvbuf) + static_cast<size_t>(root) * b;
    if (own != s.a_.sendbuf) std::memmove(own, s.a_.sendbuf, b);
    CHORUS_CHECK(s.finish({}, to));
  } else {
    CHORUS_CHECK(s.swap({}, {root}, false, false));
    const BufRef& dst = s.of(root).recv;
    if (!peerReachable(dst, s.cma())) return s.fellBack();
    CHORUS_CHECK(s.access().write(root, dst, static_cast<size_t>(s.rank_) * b, s.a_.sendbuf, b,
                                  plan.streaming));
    CHORUS_CHECK(s.finish({root}, {}));
  }
  *done = true;
  s.ran();
  return chorusSuccess;
}

// Every rank reads its block from the root's input.
chorusResult_t scatter(SingleCopy& s, const Plan& plan, bool* done) {
  const int root = s.a_.root;
  const size_t b = s.bytes_;
  if (s.rank_ == root) {
    // The receivers' descriptors carry their times of the last call (rootLeavesEarly).
    const std::vector<int> to = s.others();
    CHORUS_CHECK(s.swap(to, to, true, false));
    if (!peerReachable(s.of(root).send, s.cma())) return s.fellBack();
    const char* own = static_cast<const char*>(s.a_.sendbuf) + static_cast<size_t>(root) * b;
    if (own != s.a_.recvbuf) std::memmove(s.a_.recvbuf, own, b);
    CHORUS_CHECK(s.finish({}, to));
  } else {
    CHORUS_CHECK(s.swap({root}, {root}, false, false));
    if (!peerReachable(s.of(root).send, s.cma())) return s.fellBack();
    CHORUS_CHECK(s.access().read(root, s.of(root).send, static_cast<size_t>(s.rank_) * b,
                                 s.a_.recvbuf, b, plan.streaming));
    CHORUS_CHECK(s.finish({root}, {}));
  }
  *done = true;
  s.ran();
  return chorusSuccess;
}

// The all-reduce works in pieces of this size: CMA reads each peer's input piece into
// scratch, so what the reduction reads back is still in this core's cache; both paths write
// each reduced piece to the peers while it is still there.
constexpr size_t kReducePiece = 256 * 1024;

// One piece of our share on registered buffers: `partial` and `result` are scratch pieces
// of `cnt` elements. The result goes to our output (in the same pass) and to every peer's
// (`peers`: every rank but this one).
chorusResult_t reduceMappedPiece(SingleCopy& s, const Plan& plan, const std::vector<int>& peers,
                                 size_t off, size_t cnt, char* partial, char* result) {
  const kernels::ReduceSpec& spec = s.a_.spec;
  const size_t n = static_cast<size_t>(s.n_), me = static_cast<size_t>(s.rank_);
  const size_t bytes = cnt * s.p_.elemSize();
  const unsigned pre = spec.preMul ? kernels::kApplyPre : 0u;
  // Streaming stores where the plan says the output is too large to stay in cache, but not
  // in place: there both outputs are lines this pass has just read (ours, and the peer's
  // share of its input), so ordinary stores hit them in this core's cache, where a
  // streaming store would evict them (np 2, 8 MiB in place: 725 against 1645 us).
  const bool nt = plan.streaming && s.a_.sendbuf != s.a_.recvbuf;
  const unsigned streaming = nt ? kernels::kStreaming : 0u;
  char* out = static_cast<char*>(s.a_.recvbuf) + off;
  const char* acc = static_cast<const char*>(s.a_.sendbuf) + off;  // no pre: folded below
  if (spec.preMul) {
    kernels::reduce(spec, partial, nullptr, acc, cnt, pre);
    acc = partial;
  }
  for (size_t r = 0, folded = 1; r < n; ++r) {
    if (r == me) continue;
    char* theirs;
    CHORUS_CHECK(
        s.access().mapped(static_cast<int>(r), s.of(static_cast<int>(r)).send, off, &theirs));
    if (++folded == n) {
      kernels::reduceCopy(spec, result, out, acc, theirs, cnt,
                          pre | kernels::kApplyPost | streaming);
    } else {
      kernels::reduce(spec, partial, acc, theirs, cnt, pre);
      acc = partial;
    }
  }
  for (int peer : peers) {
    char* theirs;
    CHORUS_CHECK(s.access().mapped(peer, s.of(peer).recv, off, &theirs));
    kernels::copy(theirs, result, bytes, nt);
  }
  return chorusSuccess;
}

// Share q (cache-line aligned) is reduced by rank q alone, its own input first and then the
// others' in rank order, so every rank ends with the same bits. Piece by piece, rank q
// reduces its share and at once writes the reduced piece into every peer's output ("push"):
// the piece is read back from this core's cache, and no rank waits for the others between
// reducing and copying, so one "done" ends the call. Every output byte is written once.
//
// Registered buffers (every one mapped): the reduction loads the peers' input pieces through
// their mappings into a scratch piece, and writes our output from it in the same pass
// (reduceCopy); plain stores then copy the scratch piece into the peers' mapped outputs.
// Out of place, both outputs take streaming stores where the plan says the output is too
// large to stay in cache; the scratch piece stays in cache. Per byte of the share that is
// two inputs read and two outputs written, the least any schedule moves. Measured against
// reducing the whole share into our output and copying the other shares from their owners'
// outputs after a first "done" (np 2, Intel Xeon, docs/PERF.md#perf-registered-push): 1.2-1.7x out
// of place and 1.1-2.5x in place from 256 KiB.
//
// CMA (the deciding rank chose it, CHORUS_CMA_MAX): the kernel copies each peer's input
// piece into scratch, the reduction folds it into our output, and the kernel writes the
// reduced piece into every peer's output (process_vm_writev). Measured against reading the
// owners' outputs after a first "done" (np 2, Intel Xeon,
// docs/PERF.md#perf-push-reduced-shares): 1.1-1.6x out of place and 1.5-2x in place from
// 256 KiB.
//
// In place, peer p reads and writes only share p of our buffer, and reads each of its
// pieces before it writes it; we read and write only share q. So no byte is read after a
// peer overwrote it.
chorusResult_t allReduce(SingleCopy& s, const Plan& plan, bool* done) {
  const std::vector<int> to = s.others(), from = s.othersFrom();
  CHORUS_CHECK(s.swap(to, from, true, true));
  bool mapped = true;
  for (int r = 0; r < s.n_; ++r) mapped = mapped && s.of(r).send.regionId && s.of(r).recv.regionId;
  if (!mapped && !s.cma()) return s.fellBack();  // every rank alike: the FIFO ring
  const size_t elem = s.p_.elemSize(), count = s.a_.count;
  const size_t n = static_cast<size_t>(s.n_), me = static_cast<size_t>(s.rank_);
  const size_t align = std::max<size_t>(1, 64 / elem);
  const size_t share = ((count + n - 1) / n + align - 1) / align * align;
  auto first = [&](size_t q) { return std::min(q * share, count); };
  auto len = [&](size_t q) { return std::min((q + 1) * share, count) - first(q); };
  const kernels::ReduceSpec& spec = s.a_.spec;
  const unsigned pre = spec.preMul ? kernels::kApplyPre : 0u;
  const char* in = static_cast<const char*>(s.a_.sendbuf);
  char* out = static_cast<char*>(s.a_.recvbuf);
  const size_t pieceElems = std::max<size_t>(1, kReducePiece / elem);
  // CMA: one piece, the peer's input. Mapped: two, the partial result and the final one
  // (reduceCopy's cache-resident destination may not be its accumulator).
  char* scratch = static_cast<char*>(
      s.comm_->scratch.get(s.comm_->scratch.a, (mapped ? 2 : 1) * pieceElems * elem));
  for (size_t k = 0; k < len(me); k += pieceElems) {
    const size_t off = (first(me) + k) * elem, cnt = std::min(pieceElems, len(me) - k);
    if (mapped) {
      CHORUS_CHECK(reduceMappedPiece(s, plan, to, off, cnt, scratch, scratch + pieceElems * elem));
      continue;
    }
    // Without pre, the first peer's share folds into the pass that reads our own (the same
    // bits as copying ours first: acc OP local, in that order).
    bool started = false;
    if (spec.preMul) {
      kernels::reduce(spec, out + off, nullptr, in + off, cnt, pre);
      started = true;
    }
    for (size_t r = 0, folded = 1; r < n; ++r) {
      if (r == me) continue;
      CHORUS_CHECK(s.access().read(static_cast<int>(r), s.of(static_cast<int>(r)).send, off,
                                   scratch, cnt * elem, false));
      const unsigned last = ++folded == n ? kernels::kApplyPost : 0u;
      kernels::reduce(spec, out + off, started ? out + off : in + off, scratch, cnt, pre | last);
      started = true;
    }
    for (int peer : to)
      CHORUS_CHECK(s.access().write(peer, s.of(peer).recv, off, out + off, cnt * elem, false));
  }
  CHORUS_CHECK(s.finish(to, from));  // nobody reads or writes our buffers any more
  *done = true;
  s.ran();
  return chorusSuccess;
}

}  // namespace

chorusResult_t singleCopyRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p,
                             uint64_t seq, size_t resultBytes, bool* done, CopyPathCall* call) {
  *done = false;
  SingleCopy s(comm, a, plan, p, seq, resultBytes, call);
  chorusResult_t r = chorusSuccess;
  switch (a.coll) {
    case Coll::AllGather:
    case Coll::AllToAll: r = allToAllLike(s, plan, done); break;
    case Coll::Broadcast: r = broadcast(s, plan, done); break;
    case Coll::Gather: r = gather(s, plan, done); break;
    case Coll::Scatter: r = scatter(s, plan, done); break;
    case Coll::AllReduce: r = allReduce(s, plan, done); break;
    default: return chorusSuccess;
  }
  if (r == chorusSuccess) s.noteLease(plan, resultBytes);
  call->catchUpNs = s.catchUpNs_;
  return r;
}

bool singleCopyLeased(chorusComm* comm, const CollArgs& a, size_t resultBytes, bool* timeIt) {
  PeerMem::FifoLease& l = comm->peerMem.fifoLease[static_cast<size_t>(copyPathUse(a.coll))];
  *timeIt = false;
  if (l.left == 0 || l.bytes != resultBytes || l.decider != decidingRank(a)) return false;
  --l.left;
  *timeIt = fifoJudgedOnLeases(a.coll) && comm->rank == l.decider;
  return true;
}

void singleCopyLeaseTimed(chorusComm* comm, const CollArgs& a, size_t resultBytes, int64_t ns) {
  PeerMem::LeaseTimes& e = comm->peerMem.leaseTimes[static_cast<size_t>(copyPathUse(a.coll))];
  const bool inPlace = a.sendbuf == a.recvbuf;
  if (e.calls == 0 || e.bytes != resultBytes || e.inPlace != inPlace)
    e = PeerMem::LeaseTimes{resultBytes, inPlace, 0, 0, 0};
  const uint64_t t = static_cast<uint64_t>(ns > 0 ? ns : 0);
  e.ns += t;
  if (e.calls == 0 || t < e.least) e.least = t;
  ++e.calls;
}

void singleCopyTimed(chorusComm* comm, const CollArgs& a, const CopyPathCall& call, uint64_t seq,
                     int64_t ns) {
  PeerMem& pm = comm->peerMem;
  const size_t u = static_cast<size_t>(copyPathUse(a.coll));
  pm.lastCall[u] = PeerMem::LastCall{seq, static_cast<uint64_t>(ns)};
  if (!call.chose) return;
  if (rootLeavesEarly(a.coll)) {
    const uint64_t own = static_cast<uint64_t>(ns) > call.catchUpNs
                             ? static_cast<uint64_t>(ns) - call.catchUpNs
                             : 1;  // record() ignores a time of 0
    pm.pending[u] = PeerMem::PendingCall{seq, call.bytes, call.inPlace, call.way, own};
    return;
  }
  uint64_t figure = static_cast<uint64_t>(ns);
  if (fifoJudgedOnLeases(a.coll)) {
    // A FIFO call after a lease: the mean of the lease's calls; all-gather's, the fastest
    // (above).
    PeerMem::LeaseTimes& e = pm.leaseTimes[u];
    if (call.way == CopyPath::Fifo && e.calls > 0 && e.ns > 0 && e.bytes == call.bytes &&
        e.inPlace == call.inPlace)
      figure = a.coll == Coll::AllGather && e.least > 0 ? e.least : e.ns / e.calls;
    e = PeerMem::LeaseTimes{};
  }
  recordCopyPath(comm, a.coll, call.bytes, call.inPlace, call.way, figure);
}

}  // namespace chorus
