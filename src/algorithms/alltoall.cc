// alltoall.cc — the direct exchanges: scatter, gather and all-to-all.
//
// Pieces go straight to their destination. All-to-all runs n-1 rounds; in round k a rank
// sends to rank+k and receives from rank-k, one piece each way at a time, so every FIFO
// drains while it fills and no cycle of full FIFOs can form. Where the plan says LL (small
// all-to-alls, gathers and scatters on one host) every block goes in one LL message instead (larger
// ones copy once where the plan routes them so: single_copy.cc).
#include <algorithm>
#include <cstring>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/core/checks.h"

namespace chorus {

namespace {

// Whether the n blocks fit the LL path (else the plan cannot run: an error that says so);
// notes the run for the plan checks. Gather, scatter and all-to-all on LL.
chorusResult_t startLL(chorusComm* comm, const CollArgs& a, const Plan& plan, size_t blockBytes) {
  const size_t total = blockBytes * static_cast<size_t>(comm->nranks);
  if (total > comm->tuning.llBytes) return planCannotRun(comm, a, plan, total);
  noteRan(comm, Algo::Direct, Proto::LL);
  return chorusSuccess;
}

// Small, one host (choosePlan): each block in one LL message between the root and its
// rank. No acknowledgement per call: the sender waits for its receiver only when it is a
// ring of LL buffers ahead (shm connection.cc), so a loop of calls streams.
chorusResult_t scatterLL(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p,
                         size_t blockBytes) {
  const int n = comm->nranks, root = a.root;
  CHORUS_CHECK(startLL(comm, a, plan, blockBytes));
  if (comm->rank != root) return p.recvLL(root, a.recvbuf, blockBytes);
  const char* in = static_cast<const char*>(a.sendbuf);
  for (int k = 1; k < n; ++k) {
    const int to = (root + k) % n;
    CHORUS_CHECK(p.sendLL(to, in + static_cast<size_t>(to) * blockBytes, blockBytes));
  }
  const char* own = in + static_cast<size_t>(root) * blockBytes;
  if (own != a.recvbuf) std::memmove(a.recvbuf, own, blockBytes);
  return chorusSuccess;
}

chorusResult_t gatherLL(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p,
                        size_t blockBytes) {
  const int n = comm->nranks, root = a.root;
  CHORUS_CHECK(startLL(comm, a, plan, blockBytes));
  if (comm->rank != root) return p.sendLL(root, a.sendbuf, blockBytes);
  char* out = static_cast<char*>(a.recvbuf);
  char* own = out + static_cast<size_t>(root) * blockBytes;
  // Our own block first (in place it is there already): the peers' messages are on their
  // way meanwhile.
  if (own != a.sendbuf) std::memmove(own, a.sendbuf, blockBytes);
  for (int k = 1; k < n; ++k) {
    const int from = (root + k) % n;
    CHORUS_CHECK(p.recvLL(from, out + static_cast<size_t>(from) * blockBytes, blockBytes));
  }
  return chorusSuccess;
}

}  // namespace

chorusResult_t scatterRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank, root = a.root;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  if (plan.proto == Proto::LL) return scatterLL(comm, a, plan, p, blockBytes);
  noteRan(comm, Algo::Direct, Proto::Simple);
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  if (rank != root) {
    char* out = static_cast<char*>(a.recvbuf);
    for (size_t off = 0; off < a.count; off += pieceElems)
      CHORUS_CHECK(p.recv(root, out + off * elem, std::min(pieceElems, a.count - off)));
    return chorusSuccess;
  }
  const char* in = static_cast<const char*>(a.sendbuf);
  for (size_t off = 0; off < a.count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, a.count - off);
    for (int k = 1; k < n; ++k) {
      int to = (root + k) % n;
      CHORUS_CHECK(p.send(to, in + static_cast<size_t>(to) * blockBytes + off * elem, cnt, false));
    }
  }
  const char* own = in + static_cast<size_t>(root) * blockBytes;
  if (own != a.recvbuf) std::memmove(a.recvbuf, own, blockBytes);
  return chorusSuccess;
}

chorusResult_t gatherRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank, root = a.root;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  if (plan.proto == Proto::LL) return gatherLL(comm, a, plan, p, blockBytes);
  noteRan(comm, Algo::Direct, Proto::Simple);
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  if (rank != root) {
    const char* in = static_cast<const char*>(a.sendbuf);
    for (size_t off = 0; off < a.count; off += pieceElems)
      CHORUS_CHECK(p.send(root, in + off * elem, std::min(pieceElems, a.count - off), false));
    return chorusSuccess;
  }
  char* out = static_cast<char*>(a.recvbuf);
  char* own = out + static_cast<size_t>(root) * blockBytes;
  const char* in = static_cast<const char*>(a.sendbuf);
  // Our own block goes piece by piece, each before the peers' pieces at the same offset: the
  // root copies twice the bytes each sender does, and while a sender refills a slot the root
  // copies some of its own instead of waiting for it (np 2, AMD EPYC Zen 5, out of place:
  // 16 MiB 402-447 against 461-502 us, 128 MiB 4.8-5.6 against 6.2-6.7 ms; one piece, up to
  // a slot: as before, own block first; docs/PERF.md#perf-fifo-lease). Streaming stores where
  // the plan says the output is too large to stay in cache, like the peers' pieces.
  const bool ownApart = own != in && (in + blockBytes <= own || own + blockBytes <= in);
  if (own != in && !ownApart) std::memmove(own, in, blockBytes);  // overlapping: not the API's
  for (size_t off = 0; off < a.count; off += pieceElems) {
    const size_t cnt = std::min(pieceElems, a.count - off);
    if (ownApart) kernels::copy(own + off * elem, in + off * elem, cnt * elem, plan.streaming);
    for (int k = 1; k < n; ++k) {
      int from = (root + k) % n;
      CHORUS_CHECK(p.recv(from, out + static_cast<size_t>(from) * blockBytes + off * elem, cnt));
    }
  }
  return chorusSuccess;
}

namespace {

// n-1 rounds; in round k a rank sends to rank+k and receives from rank-k, a piece at a time.
chorusResult_t allToAllFifo(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  const size_t pieceElems = std::max<size_t>(1, plan.pieceBytes / elem);
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const bool inPlace = in == out;
  if (inPlace) {
    // In place: a block we still have to send may be overwritten by one we receive, so
    // send from a copy.
    void* copy = comm->scratch.get(comm->scratch.a, blockBytes * static_cast<size_t>(n));
    std::memcpy(copy, in, blockBytes * static_cast<size_t>(n));
    in = static_cast<const char*>(copy);
  }
  // Out of place, our own block is copied after the first piece is sent, so the peer
  // works on that piece meanwhile (the order of copySend, primitives.cc; np 2, slow
  // window: 1.00-1.05x against copying it first; docs/PERF.md). In place it is there.
  bool ownToCopy = !inPlace;
  for (int k = 1; k < n; ++k) {
    const int to = (rank + k) % n, from = (rank - k + n) % n;
    for (size_t off = 0; off < a.count; off += pieceElems) {
      const size_t cnt = std::min(pieceElems, a.count - off);
      CHORUS_CHECK(p.send(to, in + static_cast<size_t>(to) * blockBytes + off * elem, cnt, false));
      if (ownToCopy) {
        // The plan's store policy: streaming stores above CHORUS_NT_THRESHOLD, where memcpy
        // (whose own threshold is far higher) would first read every destination line.
        kernels::copy(out + static_cast<size_t>(rank) * blockBytes,
                      in + static_cast<size_t>(rank) * blockBytes, blockBytes, plan.streaming);
        ownToCopy = false;
      }
      CHORUS_CHECK(p.recv(from, out + static_cast<size_t>(from) * blockBytes + off * elem, cnt));
    }
  }
  return chorusSuccess;
}

}  // namespace

chorusResult_t allToAllRun(chorusComm* comm, const CollArgs& a, const Plan& plan, Prims& p) {
  const int n = comm->nranks, rank = comm->rank;
  const size_t elem = p.elemSize(), blockBytes = a.count * elem;
  const char* in = static_cast<const char*>(a.sendbuf);
  char* out = static_cast<char*>(a.recvbuf);
  const size_t all = blockBytes * static_cast<size_t>(n);
  if (plan.proto == Proto::LL) {
    // Small, one host (choosePlan): every block in one LL message, straight to its rank.
    CHORUS_CHECK(startLL(comm, a, plan, blockBytes));
    if (in == out) {
      void* copy = comm->scratch.get(comm->scratch.a, all);
      std::memcpy(copy, in, all);
      in = static_cast<const char*>(copy);
    }
    for (int k = 1; k < n; ++k) {
      const int to = (rank + k) % n;
      CHORUS_CHECK(p.sendLL(to, in + static_cast<size_t>(to) * blockBytes, blockBytes));
    }
    std::memmove(out + static_cast<size_t>(rank) * blockBytes,
                 in + static_cast<size_t>(rank) * blockBytes, blockBytes);
    for (int k = 1; k < n; ++k) {
      const int from = (rank - k + n) % n;
      CHORUS_CHECK(p.recvLL(from, out + static_cast<size_t>(from) * blockBytes, blockBytes));
    }
    return chorusSuccess;
  }
  // Slot stores chosen per call from the timing of earlier ones (CHORUS_SLOT_STORES).
  noteRan(comm, Algo::Direct, Proto::Simple);
  if (pairRuns(comm)) return allToAllPair(comm, a, plan, p);  // two ranks: the pair cells
  return runWithSlotStores(comm, a, plan, p, SlotStoreUse::AllToAll, blockBytes, in == out,
                           allToAllFifo);
}

chorusResult_t barrierRun(chorusComm* comm, Prims& p) {
  // Everyone tells everyone on the LL path; nobody leaves before hearing from all.
  noteRan(comm, Algo::Direct, Proto::LL);
  const int n = comm->nranks, rank = comm->rank;
  char token = 1, got = 0;
  for (int k = 1; k < n; ++k) CHORUS_CHECK(p.sendLL((rank + k) % n, &token, 1));
  for (int k = 1; k < n; ++k) CHORUS_CHECK(p.recvLL((rank - k + n) % n, &got, 1));
  return chorusSuccess;
}

}  // namespace chorus
