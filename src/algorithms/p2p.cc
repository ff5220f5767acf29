// p2p.cc — sends and receives, progressed together.
//
// A group may hold any mix of sends and receives in any order on every rank; progressing
// them one at a time could deadlock (two ranks both sending first into full FIFOs). So a
// batch advances every operation by whatever its FIFO allows, round after round, until
// all are done. Operations to the same peer in the same direction complete in call order,
// like the FIFO that carries them.
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <vector>

#include "src/algorithms/algorithms.h"
#include "src/core/checks.h"
#include "src/core/wait.h"

namespace chorus {
namespace {

struct P2pState {
  const CollArgs* op;
  size_t bytes;
  size_t done;
  bool isSend;
};

chorusResult_t runP2pOps(chorusComm* comm, const CollArgs* ops, int nops) {
  std::vector<P2pState> st;
  st.reserve(static_cast<size_t>(nops));
  std::vector<const CollArgs*> selfSends, selfRecvs;
  for (int i = 0; i < nops; ++i) {
    const CollArgs& o = ops[i];
    const size_t bytes = o.count * kernels::typeSize(o.type);
    if (bytes == 0) continue;
    if (o.root == comm->rank) {
      (o.coll == Coll::Send ? selfSends : selfRecvs).push_back(&o);
      continue;
    }
    st.push_back({&o, bytes, 0, o.coll == Coll::Send});
  }
  if (selfSends.size() != selfRecvs.size())
    CHORUS_FAIL(chorusInvalidUsage,
                "rank %d: %zu sends to itself but %zu receives from itself in one group",
                comm->rank, selfSends.size(), selfRecvs.size());
  for (size_t i = 0; i < selfSends.size(); ++i) {
    const size_t sb = selfSends[i]->count * kernels::typeSize(selfSends[i]->type);
    const size_t rb = selfRecvs[i]->count * kernels::typeSize(selfRecvs[i]->type);
    if (sb != rb)
      CHORUS_FAIL(chorusInvalidUsage,
                  "rank %d: self send of %zu bytes matched a self receive of %zu", comm->rank, sb,
                  rb);
    std::memmove(selfRecvs[i]->recvbuf, selfSends[i]->sendbuf, sb);
  }

  // Only the first unfinished op per (peer, direction) may move. `busy` is reused by every
  // round: progress runs inside the polling loop, so it must not allocate.
  std::vector<char> busy(static_cast<size_t>(comm->nranks) * 2, 0);
  auto progress = [&](bool* allDone, chorusResult_t* err) {
    bool moved = false;
    *allDone = true;
    std::fill(busy.begin(), busy.end(), 0);
    for (auto& s : st) {
      if (s.done == s.bytes) continue;
      *allDone = false;
      const int peer = s.op->root;
      char& b = busy[static_cast<size_t>(peer) * 2 + (s.isSend ? 1 : 0)];
      if (b) continue;
      b = 1;
      while (s.done < s.bytes) {
        if (s.isSend) {
          SendConn* c = comm->sendConn[static_cast<size_t>(peer)].get();
          void* slot = c->tryAcquire();
          if (!slot) break;
          size_t n = std::min(c->slotBytes(), s.bytes - s.done);
          std::memcpy(slot, static_cast<const char*>(s.op->sendbuf) + s.done, n);
          c->post(n);
          s.done += n;
          if (s.done == s.bytes) comm->flight->finish(s.op->frId, chorusSuccess);
        } else {
          RecvConn* c = comm->recvConn[static_cast<size_t>(peer)].get();
          const void* slot;
          size_t got;
          if (!c->test(&slot, &got)) break;
          size_t want = std::min(c->slotBytes(), s.bytes - s.done);
          if (got != want) {
            *err = fail(chorusInvalidUsage, __FILE__, __LINE__,
                        "rank %d: receive of %zu bytes from rank %d got a %zu-byte piece where "
                        "%zu were expected: send and receive sizes differ",
                        comm->rank, s.bytes, peer, got, want);
            return false;
          }
          std::memcpy(static_cast<char*>(s.op->recvbuf) + s.done, slot, got);
          c->release();
          s.done += got;
          if (s.done == s.bytes) comm->flight->finish(s.op->frId, chorusSuccess);
        }
        moved = true;
      }
      if (s.done < s.bytes) *allDone = false;
    }
    return moved;
  };

  // A poller never sees a waiting call's error, so now and then the blocked connections
  // are asked whether their peer is still there: a dead peer (closed socket, exited
  // process) would otherwise look like a slow one until the deadline.
  constexpr int64_t kPeerCheckNs = 200000000;
  int64_t nextPeerCheck = nowNs() + kPeerCheckNs;
  unsigned polls = 0;
  auto checkBlocked = [&]() -> chorusResult_t {
    for (auto& s : st) {
      if (s.done == s.bytes) continue;
      const size_t peer = static_cast<size_t>(s.op->root);
      char what[96];
      snprintf(what, sizeof(what), "a %s of %zu bytes %s rank %d", s.isSend ? "send" : "receive",
               s.bytes, s.isSend ? "to" : "from", s.op->root);
      chorusResult_t r =
          s.isSend ? comm->sendConn[peer]->check(what) : comm->recvConn[peer]->check(what);
      if (r != chorusSuccess) return r;
    }
    return chorusSuccess;
  };

  WaitCtx w{commDeadline(comm), &comm->abortFlag, comm->tuning.spin, "send/recv",
            &comm->waitPolicy};
  for (;;) {
    bool allDone = false;
    chorusResult_t err = chorusSuccess;
    bool moved = progress(&allDone, &err);
    if (err != chorusSuccess) return err;
    if (allDone) return chorusSuccess;
    if (moved) continue;
    chorusResult_t r = waitUntil(
        [&] {
          bool d = false;
          bool m = progress(&d, &err);
          if (m || d || err != chorusSuccess) return true;
          if ((++polls & 63) == 0 && nowNs() > nextPeerCheck) {
            nextPeerCheck = nowNs() + kPeerCheckNs;
            err = checkBlocked();
          }
          return err != chorusSuccess;
        },
        w, nullptr);
    if (err != chorusSuccess) return err;
    if (r != chorusSuccess) {
      for (auto& s : st)
        if (s.done < s.bytes) comm->flight->noteWait(s.op->frId, s.op->root, s.isSend);
      for (auto& s : st)
        if (s.done < s.bytes)
          return fail(r, __FILE__, __LINE__,
                      "rank %d: %s of %zu bytes %s rank %d stopped at byte %zu (%s): is the "
                      "matching %s posted on rank %d?",
                      comm->rank, s.isSend ? "send" : "receive", s.bytes, s.isSend ? "to" : "from",
                      s.op->root, s.done, r == chorusTimeout ? "timeout" : "aborted",
                      s.isSend ? "receive" : "send", s.op->root);
      return r;
    }
  }
}

// chorusRecvAnySource (always alone, never in a group): the sender is the first peer whose
// connection holds a message, looked for from where the previous search stopped, so a
// steady sender cannot starve the others. The message stays in place; the receive below
// takes it like any other.
chorusResult_t findAnySource(chorusComm* comm, CollArgs* op) {
  const int n = comm->nranks;
  int found = -1;
  auto scan = [&] {
    for (int i = 0; i < n; ++i) {
      const int p = (comm->anySourceNext + i) % n;
      const void* slot;
      size_t got;
      if (p != comm->rank && comm->recvConn[static_cast<size_t>(p)]->test(&slot, &got)) {
        found = p;
        return true;
      }
    }
    return false;
  };
  WaitCtx w{commDeadline(comm), &comm->abortFlag, comm->tuning.spin, "receive from any source",
            &comm->waitPolicy};
  const chorusResult_t r = waitUntil(scan, w, nullptr);
  if (r != chorusSuccess)
    return fail(r, __FILE__, __LINE__, "rank %d: receive from any source of %zu elements: %s",
                comm->rank, op->count,
                r == chorusTimeout ? "no rank sent anything before the deadline" : "aborted");
  comm->anySourceNext = (found + 1) % n;
  op->root = found;
  return chorusSuccess;
}

}  // namespace

chorusResult_t runP2pBatch(chorusComm* comm, const CollArgs* ops, int nops) {
  if (nops == 1 && ops[0].anyPeer) {
    CollArgs resolved = ops[0];
    comm->flight->start(resolved.frId, ++comm->p2pCount);
    chorusResult_t r = findAnySource(comm, &resolved);
    if (r == chorusSuccess) r = runP2pOps(comm, &resolved, 1);
    if (r == chorusSuccess) *resolved.anyPeer = resolved.root;
    comm->flight->finish(resolved.frId, r);
    if (r != chorusSuccess) frOperationFailed(comm, r, "receive from any source", comm->p2pCount);
    return r;
  }
  // Sends and receives are numbered apart from collectives (ranks make different numbers
  // of them), in call order within the batch.
  FlightRecorder& fr = *comm->flight;
  const uint64_t firstSeq = comm->p2pCount + 1;
  for (int i = 0; i < nops; ++i) fr.start(ops[i].frId, ++comm->p2pCount);
  const chorusResult_t r = runP2pOps(comm, ops, nops);
  // Zero-byte and self operations, and on failure the unfinished ones (the finished ones
  // were marked as they completed).
  for (int i = 0; i < nops; ++i) fr.finish(ops[i].frId, r);
  if (__builtin_expect(r != chorusSuccess, 0))
    frOperationFailed(comm, r, "send/recv p2p", firstSeq);
  return r;
}

}  // namespace chorus
