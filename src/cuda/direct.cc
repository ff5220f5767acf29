// direct.cc — the same-host device path: CUDA kernels reduce and move device buffers
// between the GPUs (or the one GPU) of the ranks on this host (docs/CUDA.md).
//
//   user's CUDA stream:  record in | wait(ticket) | record done
//   stream's worker:     sync in -> agree on the call -> per piece: copy my input into my
//                        scratch; meet; kernels read every rank's scratch and write my
//                        output; meet -> flag = ticket
//
// - Ordered by the host: every cross-rank dependency is a host meeting of the ranks (the
//   communicator's barrier) between pieces, so no kernel ever waits for another rank's
//   kernel. That is correct when ranks share one GPU without MPS, and when ranks of one
//   process drive several GPUs.
// - Peers read only scratch areas, never user buffers: a rank's input is copied into its
//   scratch before the first meeting, and its output is written by its own kernels only,
//   so in-place calls are safe and user buffers need no IPC registration.
// - Reductions sum the ranks' pieces in rank order (kernels/coll_body.h), so every rank
//   holds the same bits.
// - The user's stream waits for the whole call (one ticket): the worker's own stream runs
//   the copies and kernels, because what they read is known only once the peers agreed.
// - A call some rank cannot run on the device (a host buffer somewhere) is staged through
//   pinned host memory by the worker on every rank: the per-call agreement decides it.
#include <condition_variable>
#include <cstring>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/comm/flight_recorder.h"
#include "src/core/checks.h"
#include "src/core/params.h"
#include "src/cuda/device_guard.h"
#include "src/cuda/device_path.h"
#include "src/cuda/direct_parts.h"
#include "src/cuda/pieces.h"
#include "src/enqueue/ptrcheck.h"

namespace chorus {
namespace cuda {
namespace {

constexpr size_t kScratchAlign = 256;
size_t alignUp(size_t v) { return (v + kScratchAlign - 1) & ~(kScratchAlign - 1); }

}  // namespace

Op hostOp(chorusComm* comm, Coll coll, const void* send, void* recv, size_t bytes, int peer) {
  Op op{};
  op.comm = comm;
  op.stream = nullptr;
  op.args = CollArgs{};
  op.args.coll = coll;
  op.args.sendbuf = send;
  op.args.recvbuf = recv;
  op.args.count = bytes;
  op.args.type = chorusUint8;
  op.args.spec.type = chorusUint8;
  op.args.root = peer;
  return op;
}

namespace {

// The communicator's host all-gather of `bytes` per rank, on the stream's worker.
chorusResult_t hostAllGather(chorusComm* comm, const void* mine, void* all, size_t bytes,
                             const DeviceExecutor::RunHostOps& runHost) {
  std::vector<Op> ops{hostOp(comm, Coll::AllGather, mine, all, bytes, -1)};
  return runHost(ops);
}

// The ranks meet (nobody passes until everybody arrived) and learn whether any of them
// failed since the last meeting: a rank whose copy or kernel failed still comes, so the
// others stop at once with chorusRemoteError instead of waiting for it until the timeout.
chorusResult_t meet(chorusComm* comm, chorusResult_t local,
                    const DeviceExecutor::RunHostOps& runHost) {
  const int32_t mine = static_cast<int32_t>(local);
  std::vector<int32_t> all(comm->nranks);
  const chorusResult_t r = hostAllGather(comm, &mine, all.data(), sizeof mine, runHost);
  if (local != chorusSuccess) return local;
  if (r != chorusSuccess) return r;
  for (int j = 0; j < comm->nranks; ++j)
    if (all[j] != chorusSuccess)
      CHORUS_FAIL(chorusRemoteError, "device path: rank %d failed this call (%s)", j,
                  chorusGetErrorString(static_cast<chorusResult_t>(all[j])));
  return chorusSuccess;
}

PathMode modeOf(const StreamBinding* b) {
  if (b->forcedMode >= 0) return static_cast<PathMode>(b->forcedMode);
  PathMode m = PathMode::Auto;
  (void)parsePathMode(paramString(Param::CudaPath), &m, nullptr);  // checked at first use
  return m;
}

// Runs on the worker: scratch, header, all-gather, verdict, peers' scratch.
chorusResult_t exchange(StreamBinding* b, chorusComm* comm, CommLink* L,
                        const DeviceExecutor::RunHostOps& runHost) {
  const Runtime& rt = *b->rt;
  DeviceGuard guard(rt, b->device);
  std::string err;
  PeerHeader mine;
  mine.mode = static_cast<int32_t>(modeOf(b));
  mine.oneHost = comm->nHosts == 1 ? 1 : 0;
  mine.device = b->device;
  mine.process = processToken();
  int ndev = 0;
  if (guard.ok() && rt.deviceCount(&ndev, &err))
    for (int d = 0; d < ndev && d < 64; ++d) {
      bool can = false;
      if (rt.canAccessPeer(b->device, d, &can, &err) && can) mine.accessMask |= uint64_t{1} << d;
    }
  const size_t piece = pieceBytes() ? pieceBytes() : size_t{4} << 20;
  L->pieceBytes = piece;
  // The work stream also carries a staged first call's copies (stageOnWorker), whatever
  // the verdict: ranks on several hosts need it too.
  const bool stream = guard.ok() && (b->workStream || rt.streamCreate(&b->workStream, &err));
  if (mine.oneHost && stream &&
      rt.deviceMalloc(alignUp(piece) * (comm->nranks + 1), &L->scratch, &err) &&
      rt.ipcGetHandle(L->scratch, &mine.handle, &err)) {
    mine.scratchOk = 1;
    mine.scratch = reinterpret_cast<uintptr_t>(L->scratch);
  }
  std::vector<PeerHeader> all(comm->nranks);
  CHORUS_CHECK(hostAllGather(comm, &mine, all.data(), sizeof mine, runHost));
  for (int j = 0; j < comm->nranks; ++j)
    if (all[j].magic != mine.magic)
      CHORUS_FAIL(chorusInvalidUsage,
                  "device buffers: rank %d answered the device-path exchange with something "
                  "else (do all ranks use a CUDA stream for this call?)",
                  j);
  L->verdict = decidePath(all, &L->why);
  if (L->verdict != Verdict::Device) return chorusSuccess;
  // Peers' scratch: the raw address within this process, else opened through IPC. Every
  // rank then says whether it reached all of them, so a failure stages everywhere.
  int32_t ok = 1;
  L->peerScratch.assign(comm->nranks, nullptr);
  L->peerAddr.assign(comm->nranks, 0);
  for (int j = 0; j < comm->nranks; ++j) L->peerAddr[j] = all[j].scratch;
  for (int j = 0; j < comm->nranks; ++j) {
    if (all[j].process == mine.process) {
      L->peerScratch[j] = reinterpret_cast<void*>(all[j].scratch);
    } else if (rt.ipcOpenHandle(all[j].handle, &L->peerScratch[j], &err)) {
      L->opened.push_back(L->peerScratch[j]);
    } else {
      ok = 0;
      L->why = "rank " + std::to_string(j) + "'s scratch cannot be opened: " + err;
    }
  }
  std::vector<int32_t> oks(comm->nranks);
  CHORUS_CHECK(hostAllGather(comm, &ok, oks.data(), sizeof ok, runHost));
  for (int j = 0; j < comm->nranks; ++j)
    if (!oks[j]) {
      if (L->why.empty()) L->why = "rank " + std::to_string(j) + " cannot open a peer's scratch";
      L->verdict = mine.mode == static_cast<int32_t>(PathMode::Device) ? Verdict::NoDevice
                                                                       : Verdict::Staging;
    }
  return chorusSuccess;
}

// What every rank says about one call before it runs.
struct CallHeader {
  int32_t eligible;  // every buffer of this call is device memory on this rank
  int32_t coll, type, root;
  uint64_t count;
};

// The device path of one piece (elements [first, first + c) of every block). Runs on the
// worker; kernels and copies go to b->workStream.
class PieceRunner {
 public:
  PieceRunner(StreamBinding* b, const Op& op, CommLink* L, const DeviceExecutor::RunHostOps& run)
      : b_(b),
        rt_(*b->rt),
        op_(op),
        L_(L),
        runHost_(run),
        comm_(op.comm),
        n_(op.comm->nranks),
        me_(op.comm->rank),
        layout_(callLayout(op.args.coll, n_, me_, op.args.root)),
        elem_(kernels::typeBytes(op.args.type)) {}

  chorusResult_t run(const Piece& pc) {
    chorusResult_t local = copyIn(pc);
    if (local == chorusSuccess) local = syncWork();
    CHORUS_CHECK(meet(comm_, local, runHost_));  // every rank's input is in its scratch
    bool twoShot = false;
    local = compute(pc, &twoShot);
    if (local == chorusSuccess) local = syncWork();
    if (twoShot) {  // my reduced segment is in my scratch: everybody copies every segment
      CHORUS_CHECK(meet(comm_, local, runHost_));
      local = gatherSegments(pc);
      if (local == chorusSuccess) local = syncWork();
    }
    return meet(comm_, local, runHost_);  // nobody reads a scratch any more: next piece
  }

 private:
  unsigned char* out(const Piece& pc, int block) const {  // my output's block, at this piece
    return static_cast<unsigned char*>(op_.args.recvbuf) +
           (static_cast<size_t>(block) * op_.args.count + pc.first) * elem_;
  }
  const unsigned char* in(int rank, size_t offBytes) const {  // a rank's scratch
    return static_cast<const unsigned char*>(L_->peerScratch[rank]) + offBytes;
  }
  size_t segFirst(const Piece& pc, int r) const { return pc.count * static_cast<size_t>(r) / n_; }

  // The piece's kernels (the first half of a two-shot all-reduce: *twoShot).
  chorusResult_t compute(const Piece& pc, bool* twoShot) {
    const size_t c = pc.count, bytes = c * elem_;
    const int root = op_.args.root;
    std::vector<void*> dst;
    std::vector<const void*> src;
    switch (op_.args.coll) {
      case Coll::AllReduce:
        if (n_ > 1 && bytes >= twoShotBytes()) {
          // Rank r reduces segment r of every rank's input into its own scratch.
          *twoShot = true;
          const size_t f = segFirst(pc, me_), len = segFirst(pc, me_ + 1) - f;
          return reduceAll(myOut() + f * elem_, f * elem_, len, true);
        }
        return reduceAll(out(pc, 0), 0, c, true);
      case Coll::Reduce: return me_ == root ? reduceAll(out(pc, 0), 0, c, true) : chorusSuccess;
      case Coll::ReduceScatter: return reduceAll(out(pc, 0), me_ * bytes, c, true);
      case Coll::AllGather:
      case Coll::Gather:
        if (op_.args.coll == Coll::Gather && me_ != root) break;
        for (int j = 0; j < n_; ++j) {
          dst.push_back(out(pc, j));
          src.push_back(in(j, 0));
        }
        break;
      case Coll::Broadcast:
        dst.push_back(out(pc, 0));
        src.push_back(in(root, 0));
        break;
      case Coll::Scatter:
        dst.push_back(out(pc, 0));
        src.push_back(in(root, me_ * bytes));
        break;
      case Coll::AllToAll:
        for (int j = 0; j < n_; ++j) {
          dst.push_back(out(pc, j));
          src.push_back(in(j, me_ * bytes));
        }
        break;
      default: break;  // barrier: the meetings are the whole call
    }
    return dst.empty() ? chorusSuccess : copyTable(dst, src, bytes);
  }

  // The two-shot's second half: every segment from its owner's scratch into my output.
  chorusResult_t gatherSegments(const Piece& pc) {
    const size_t outOff = alignUp(L_->pieceBytes) * n_;
    for (int j = 0; j < n_; ++j) {
      const size_t fj = segFirst(pc, j), lj = segFirst(pc, j + 1) - fj;
      const std::vector<void*> d{out(pc, 0) + fj * elem_};
      const std::vector<const void*> s{in(j, outOff + fj * elem_)};
      CHORUS_CHECK(copyTable(d, s, lj * elem_));
    }
    return chorusSuccess;
  }

  size_t twoShotBytes() const {
    const int64_t v = paramInt(Param::CudaTwoShotBytes);
    return v <= 0 ? SIZE_MAX : static_cast<size_t>(v);
  }
  unsigned char* myOut() const {  // the two-shot's reduced segments, after the input area
    return static_cast<unsigned char*>(L_->scratch) + alignUp(L_->pieceBytes) * n_;
  }

  // My send blocks' piece, packed into my scratch (one 2D device-to-device copy).
  chorusResult_t copyIn(const Piece& pc) {
    const int nb = layout_.send.nblocks;
    if (nb == 0 || pc.count == 0) return chorusSuccess;
    std::string err;
    const size_t width = pc.count * elem_;
    const auto* user = static_cast<const unsigned char*>(op_.args.sendbuf) + pc.first * elem_;
    if (!rt_.memcpy2DAsync(L_->scratch, width, user, op_.args.count * elem_, width, nb,
                           b_->workStream, &err))
      CHORUS_FAIL(chorusSystemError, "device path: copying the input into scratch: %s",
                  err.c_str());
    return chorusSuccess;
  }

  chorusResult_t syncWork() {
    std::string err;
    if (!rt_.streamSynchronize(b_->workStream, &err))
      CHORUS_FAIL(chorusSystemError, "device path: waiting for the kernels: %s", err.c_str());
    return chorusSuccess;
  }

  // dst[i] = post(pre(r0[i]) OP pre(r1[i]) ...) over every rank's scratch at `off`, in rank
  // order, 8 sources per launch (later launches continue from dst).
  chorusResult_t reduceAll(void* dst, size_t off, size_t c, bool post) {
    if (c == 0) return chorusSuccess;
    const kernels::ReduceSpec& spec = op_.args.spec;
    int next = 0;
    while (next < n_) {
      kernels::ReduceArgs a;
      a.spec = spec;
      a.dst = dst;
      a.count = c;
      if (next > 0) a.src[a.nsrc++] = dst;  // the running result, already pre-multiplied
      while (a.nsrc < kernels::kMaxSources && next < n_) {
        if (spec.preMul) a.preMask |= 1u << a.nsrc;
        a.src[a.nsrc++] = static_cast<const unsigned char*>(L_->peerScratch[next++]) + off;
      }
      a.post = post && next == n_ && spec.postDiv > 1;
      std::string err;
      if (!rt_.launchReduce(a, b_->workStream, &err))
        CHORUS_FAIL(chorusSystemError, "device path: %s", err.c_str());
    }
    return chorusSuccess;
  }

  chorusResult_t copyTable(const std::vector<void*>& dst, const std::vector<const void*>& src,
                           size_t bytes) {
    for (size_t i = 0; i < dst.size() && bytes > 0; i += kernels::kMaxSources) {
      kernels::CopyArgs a;
      a.bytes = bytes;
      for (size_t j = i; j < dst.size() && a.n < kernels::kMaxSources; ++j, ++a.n) {
        a.dst[a.n] = dst[j];
        a.src[a.n] = src[j];
      }
      std::string err;
      if (!rt_.launchCopy(a, b_->workStream, &err))
        CHORUS_FAIL(chorusSystemError, "device path: %s", err.c_str());
    }
    return chorusSuccess;
  }

  StreamBinding* b_;
  const Runtime& rt_;
  const Op& op_;
  CommLink* L_;
  const DeviceExecutor::RunHostOps& runHost_;
  chorusComm* comm_;
  int n_, me_;
  CallLayout layout_;
  size_t elem_;
};

}  // namespace

bool isDevice(const Runtime& rt, const void* p) {
  PtrInfo info;
  std::string ignored;
  return rt.classify(p, &info, &ignored) && info.kind == MemKind::Device;
}

// A call some rank holds in host memory: the whole call staged through pinned memory by the
// worker (device buffers copied on the work stream, host ones by memcpy), run by the host.
chorusResult_t stageOnWorker(StreamBinding* b, const Op& op,
                             const DeviceExecutor::RunHostOps& runHost) {
  const Runtime& rt = *b->rt;
  const CallLayout l = callLayout(op.args.coll, op.comm->nranks, op.comm->rank, op.args.root);
  const size_t elem = kernels::typeBytes(op.args.type);
  const size_t inBytes = l.send.nblocks * op.args.count * elem;
  const size_t outBytes = l.recv.nblocks * op.args.count * elem;
  std::string err;
  if (outBytes > 0 && !isDevice(rt, op.args.recvbuf))
    CHORUS_CHECK(checkHostBuffer(op.comm, op.args.recvbuf, outBytes, "a call on a CUDA stream",
                                 "recvbuff", true, describeNonHostPointer));
  // From the stream's staging pool, never freed here: freeing pinned memory may wait for
  // the whole device, where another rank's stream waits for us.
  const size_t need = alignUp(inBytes) + outBytes + kScratchAlign;
  PinnedBlock* block = nullptr;
  {
    std::lock_guard<std::mutex> lk(b->mutex);
    for (PinnedBlock& p : b->staging)
      if (!p.inUse && p.bytes >= need) {
        block = &p;
        break;
      }
    if (!block) {
      PinnedBlock p;
      p.bytes = need;
      if (!rt.hostAllocMapped(need, &p.host, &p.dev, &err))
        CHORUS_FAIL(chorusSystemError, "device buffers: pinned staging: %s", err.c_str());
      b->staging.push_back(p);
      block = &b->staging.back();
    }
    block->inUse = true;
  }
  auto* in = static_cast<unsigned char*>(block->host);
  unsigned char* out = in + alignUp(inBytes);
  auto move = [&](void* d, const void* s, size_t n, bool devSide) {
    if (n == 0) return true;
    if (!devSide) {
      std::memcpy(d, s, n);
      return true;
    }
    return rt.memcpy2DAsync(d, n, s, n, n, 1, b->workStream, &err) &&
           rt.streamSynchronize(b->workStream, &err);
  };
  chorusResult_t r = chorusSuccess;
  if (!move(in, op.args.sendbuf, inBytes, inBytes && isDevice(rt, op.args.sendbuf)))
    r = fail(chorusSystemError, __FILE__, __LINE__, "device buffers: staging in: %s", err.c_str());
  if (r == chorusSuccess) {
    std::vector<Op> ops{op};
    ops[0].stream = nullptr;
    ops[0].args.sendbuf = inBytes ? in : nullptr;
    ops[0].args.recvbuf = outBytes ? out : nullptr;
    r = runHost(ops);
  }
  if (r == chorusSuccess &&
      !move(op.args.recvbuf, out, outBytes, outBytes && isDevice(rt, op.args.recvbuf)))
    r = fail(chorusSystemError, __FILE__, __LINE__, "device buffers: staging out: %s", err.c_str());
  std::lock_guard<std::mutex> lk(b->mutex);
  block->inUse = false;
  return r;
}

CommLink* linkFor(StreamBinding* b, chorusComm* comm, bool create, bool* isNew, chorusResult_t* r) {
  std::lock_guard<std::mutex> lock(b->linkMutex);
  *isNew = false;
  auto it = b->links.find(comm);
  if (it != b->links.end()) {
    const CommLink& k = *it->second;
    if (k.rank == comm->rank && k.nranks == comm->nranks &&
        std::memcmp(&k.id, &comm->id, sizeof k.id) == 0)
      return it->second.get();
    b->retired.push_back(std::move(it->second));  // freed with the binding
    b->links.erase(it);
  }
  if (!create) return nullptr;
  PathMode m;
  std::string err;
  if (b->forcedMode < 0 && !parsePathMode(paramString(Param::CudaPath), &m, &err)) {
    *r = fail(chorusInvalidUsage, __FILE__, __LINE__, "%s", err.c_str());
    return nullptr;
  }
  auto link = std::make_unique<CommLink>();
  CommLink* L = link.get();
  L->id = comm->id;
  L->rank = comm->rank;
  L->nranks = comm->nranks;
  b->links[comm] = std::move(link);
  *isNew = true;
  return L;
}

chorusResult_t waitAgreed(CommLink* L) {
  std::unique_lock<std::mutex> lock(L->agreeMutex);
  L->agreeCv.wait(lock, [L] { return L->agreed; });
  return L->agreeResult;
}

chorusResult_t enqueueDirect(StreamBinding* b, chorusStream* s, const Op& op, CommLink* L,
                             bool agreeFirst, DeviceExecutor::RunHostOps runHost) {
  const Runtime& rt = *b->rt;
  const CallLayout l = callLayout(op.args.coll, op.comm->nranks, op.comm->rank, op.args.root);
  CallHeader h{};
  h.eligible = (l.send.nblocks == 0 || op.args.count == 0 || isDevice(rt, op.args.sendbuf)) &&
               (l.recv.nblocks == 0 || op.args.count == 0 || isDevice(rt, op.args.recvbuf));
  h.coll = static_cast<int32_t>(op.args.coll);
  h.type = op.args.type;
  h.root = op.args.root;
  h.count = op.args.count;

  std::unique_lock<std::mutex> lock(b->mutex);
  DeviceGuard guard(rt, b->device);
  std::string err;
  void *inEv = nullptr, *doneEv = nullptr;
  auto giveBack = [&] {
    for (void* ev : {inEv, doneEv})
      if (ev) b->freeEvents.push_back(ev);
  };
  auto takeEv = [&](void** ev) {
    if (!b->freeEvents.empty()) {
      *ev = b->freeEvents.back();
      b->freeEvents.pop_back();
      return true;
    }
    if (!rt.eventCreate(ev, &err)) return false;
    b->allEvents.push_back(*ev);
    return true;
  };
  if (!guard.ok() || !takeEv(&inEv) || !takeEv(&doneEv) ||
      !rt.eventRecord(inEv, b->cudaStream, &err)) {
    giveBack();
    op.comm->flight->finish(op.args.frId, chorusSystemError);
    CHORUS_FAIL(chorusSystemError, "device path: enqueueing on CUDA stream %p: %s", b->cudaStream,
                guard.ok() ? err.c_str() : guard.error().c_str());
  }
  const uint64_t ticket = ++b->issued;
  std::string setupError;
  if (!rt.waitFlag(b->flagDev, ticket, b->cudaStream, &err) ||
      !rt.eventRecord(doneEv, b->cudaStream, &err))
    setupError = err;
  op.comm->activeCalls.fetch_add(1, std::memory_order_acq_rel);

  auto job = [b, op, L, h, inEv, doneEv, ticket, setupError, runHost,
              agreeFirst]() -> chorusResult_t {
    const Runtime& rt = *b->rt;
    DeviceGuard guard(rt, b->device);
    chorusComm* comm = op.comm;
    std::string err;
    chorusResult_t r = chorusSuccess;
    if (agreeFirst) {  // this (stream, communicator)'s first call: agree on the path first
      const chorusResult_t e = exchange(b, comm, L, runHost);
      std::lock_guard<std::mutex> lk(L->agreeMutex);
      if (e != chorusSuccess) {
        L->verdict = Verdict::NoDevice;
        L->why = std::string("the device-path agreement failed: ") + chorusGetErrorString(e);
      }
      L->agreeResult = e;
      L->agreed = true;
      L->agreeCv.notify_all();
      r = e;
    }
    if (r == chorusSuccess && L->verdict != Verdict::Device) {
      // Only a first call gets here: later calls take the pipelined staging (or fail) at once.
      if (L->verdict != Verdict::Staging)
        r = fail(chorusInvalidUsage, __FILE__, __LINE__, "device buffers: CHORUS_CUDA_PATH: %s",
                 L->why.c_str());
      else if (!setupError.empty() || !rt.eventSynchronize(inEv, &err))
        r = fail(chorusSystemError, __FILE__, __LINE__, "device buffers: the input: %s",
                 setupError.empty() ? err.c_str() : setupError.c_str());
      else
        r = stageOnWorker(b, op, runHost);
    }
    const bool deviceCall = r == chorusSuccess && L->verdict == Verdict::Device;
    if (!setupError.empty() && r == chorusSuccess)
      r = fail(chorusSystemError, __FILE__, __LINE__, "device path: enqueueing: %s",
               setupError.c_str());
    if (r == chorusSuccess && deviceCall && !rt.eventSynchronize(inEv, &err))
      r = fail(chorusSystemError, __FILE__, __LINE__, "device path: waiting for the input: %s",
               err.c_str());
    const bool p2p = op.args.coll == Coll::Send || op.args.coll == Coll::Recv;
    if (r == chorusSuccess && deviceCall && p2p) r = runDirectP2p(b, op, L, runHost);
    // Every rank says what it is about to run; all must agree, and all must hold device
    // buffers for the kernels to run, else every rank stages this call.
    std::vector<CallHeader> all(p2p || !deviceCall ? 0 : comm->nranks);
    if (r == chorusSuccess && !all.empty())
      r = hostAllGather(comm, &h, all.data(), sizeof h, runHost);
    bool device = true;
    for (size_t j = 0; j < all.size() && r == chorusSuccess; ++j) {
      const CallHeader& p = all[j];
      if (p.coll != h.coll || p.type != h.type || p.root != h.root || p.count != h.count)
        r = fail(chorusInvalidUsage, __FILE__, __LINE__,
                 "device path: rank %d called %s (count %llu, type %d, root %d) where rank %d "
                 "called %s (count %llu, type %d, root %d)",
                 static_cast<int>(j), collName(static_cast<Coll>(p.coll)),
                 static_cast<unsigned long long>(p.count), p.type, p.root, comm->rank,
                 collName(static_cast<Coll>(h.coll)), static_cast<unsigned long long>(h.count),
                 h.type, h.root);
      device = device && p.eligible;
    }
    if (r == chorusSuccess && deviceCall && !p2p) {
      if (device) {
        PieceRunner runner(b, op, L, runHost);
        for (const Piece& pc :
             splitPieces(op.args.count, kernels::typeBytes(op.args.type), L->pieceBytes))
          if ((r = runner.run(pc)) != chorusSuccess) break;
      } else {
        r = stageOnWorker(b, op, runHost);
      }
    }
    if (r != chorusSuccess) {
      int expected = chorusSuccess;
      comm->asyncError.compare_exchange_strong(expected, r);
    }
    comm->flight->finish(op.args.frId, r);
    // Always: the user's stream must go on, success or not.
    __atomic_store_n(b->flagHost, ticket, __ATOMIC_RELEASE);
    if (setupError.empty()) (void)rt.eventSynchronize(doneEv, &err);
    {
      std::lock_guard<std::mutex> lk(b->mutex);
      b->freeEvents.push_back(inEv);
      b->freeEvents.push_back(doneEv);
    }
    comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
    return r;
  };
  chorusResult_t pushed = streamPush(s, std::move(job));
  lock.unlock();
  if (pushed != chorusSuccess) {
    __atomic_store_n(b->flagHost, ticket, __ATOMIC_RELEASE);
    op.comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
    return pushed;
  }
  if (!setupError.empty())
    CHORUS_FAIL(chorusSystemError, "device path: enqueueing on CUDA stream %p failed: %s",
                b->cudaStream, setupError.c_str());
  return chorusSuccess;
}

void releaseLinks(StreamBinding* b) {
  const Runtime& rt = *b->rt;
  for (auto& kv : b->links) b->retired.push_back(std::move(kv.second));
  for (auto& L : b->retired) {
    for (void* p : L->opened) rt.ipcCloseHandle(p);
    if (L->scratch) rt.deviceFree(L->scratch);
  }
  b->links.clear();
  b->retired.clear();
  if (b->workStream) rt.streamDestroy(b->workStream);
  b->workStream = nullptr;
}

}  // namespace cuda
}  // namespace chorus
