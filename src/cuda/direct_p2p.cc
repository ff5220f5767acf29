// direct_p2p.cc — a send or receive on the device path (see direct.cc for collectives).
//
// Only between ranks whose (wrapped stream, communicator) already agreed on the device path
// at a collective (send/receive alone cannot run the communicator-wide agreement). The
// pair swaps a header first: both take the device path only when both hold device memory,
// agree on count and type, and each knows the other's scratch as the one it reported at
// that agreement (both streams were the ones that agreed); otherwise both stage.
// Per piece: the sender copies its piece into its scratch and says so; the receiver's
// kernel copies it out of the sender's scratch and answers; only then may the sender
// overwrite its scratch.
#include <cstdint>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/core/checks.h"
#include "src/cuda/device_guard.h"
#include "src/cuda/direct_parts.h"
#include "src/cuda/pieces.h"

namespace chorus {
namespace cuda {
namespace {

struct P2pHeader {
  int32_t eligible;      // this side's buffer is device memory
  int32_t type;          // chorusDataType_t
  uint64_t count;        // elements
  uint64_t myScratch;    // the scratch this side reported when its stream agreed
  uint64_t yourScratch;  // the scratch this side recorded for the peer then
};

// Sends `mine` to the peer and receives the peer's, together (no order to deadlock on).
chorusResult_t swap(chorusComm* comm, int peer, const void* mine, void* theirs, size_t bytes,
                    const DeviceExecutor::RunHostOps& runHost) {
  std::vector<Op> ops{hostOp(comm, Coll::Send, mine, nullptr, bytes, peer),
                      hostOp(comm, Coll::Recv, nullptr, theirs, bytes, peer)};
  return runHost(ops);
}

// Tells the peer how this side's part of a piece went (send), or learns how the peer's
// went (receive): a side that failed still says so, so the other stops at once with
// chorusRemoteError instead of waiting until the timeout.
chorusResult_t signal(chorusComm* comm, int peer, bool send, chorusResult_t local,
                      const DeviceExecutor::RunHostOps& runHost) {
  int64_t token = local;
  std::vector<Op> ops{send ? hostOp(comm, Coll::Send, &token, nullptr, sizeof token, peer)
                           : hostOp(comm, Coll::Recv, nullptr, &token, sizeof token, peer)};
  const chorusResult_t r = runHost(ops);
  if (local != chorusSuccess) return local;
  if (r != chorusSuccess) return r;
  if (!send && token != chorusSuccess)
    CHORUS_FAIL(chorusRemoteError, "device path: rank %d failed its side of this %s (%s)", peer,
                "send/receive", chorusGetErrorString(static_cast<chorusResult_t>(token)));
  return chorusSuccess;
}

}  // namespace

chorusResult_t runDirectP2p(StreamBinding* b, const Op& op, CommLink* L,
                            const DeviceExecutor::RunHostOps& runHost) {
  const Runtime& rt = *b->rt;
  chorusComm* comm = op.comm;
  const int peer = op.args.root;
  const bool sender = op.args.coll == Coll::Send;
  const void* buf = sender ? op.args.sendbuf : op.args.recvbuf;
  P2pHeader h{}, ph{};
  h.eligible = op.args.count == 0 || isDevice(rt, buf);
  h.type = op.args.type;
  h.count = op.args.count;
  h.myScratch = L->peerAddr[comm->rank];
  h.yourScratch = L->peerAddr[peer];
  CHORUS_CHECK(swap(comm, peer, &h, &ph, sizeof h, runHost));
  if (ph.type != h.type || ph.count != h.count)
    CHORUS_FAIL(chorusInvalidUsage,
                "device path: rank %d %s %llu elements of type %d, rank %d %s %llu of type %d",
                comm->rank, sender ? "sends" : "receives", static_cast<unsigned long long>(h.count),
                h.type, peer, sender ? "receives" : "sends",
                static_cast<unsigned long long>(ph.count), ph.type);
  // Symmetric: both sides evaluate the same four facts.
  const bool device =
      h.eligible && ph.eligible && h.yourScratch == ph.myScratch && ph.yourScratch == h.myScratch;
  if (!device) return stageOnWorker(b, op, runHost);

  const size_t elem = kernels::typeBytes(op.args.type);
  std::string err;
  for (const Piece& pc : splitPieces(op.args.count, elem, L->pieceBytes)) {
    const size_t bytes = pc.count * elem;
    chorusResult_t local = chorusSuccess;
    if (sender) {
      const auto* user = static_cast<const unsigned char*>(op.args.sendbuf) + pc.first * elem;
      if (bytes &&
          (!rt.memcpy2DAsync(L->scratch, bytes, user, bytes, bytes, 1, b->workStream, &err) ||
           !rt.streamSynchronize(b->workStream, &err)))
        local = fail(chorusSystemError, __FILE__, __LINE__,
                     "device path: send: copying into scratch: %s", err.c_str());
      CHORUS_CHECK(signal(comm, peer, true, local, runHost));  // the piece is in my scratch
      CHORUS_CHECK(signal(comm, peer, false, chorusSuccess, runHost));  // the receiver has it
    } else {
      CHORUS_CHECK(signal(comm, peer, false, chorusSuccess, runHost));
      if (bytes) {
        kernels::CopyArgs a;
        a.n = 1;
        a.bytes = bytes;
        a.dst[0] = static_cast<unsigned char*>(op.args.recvbuf) + pc.first * elem;
        a.src[0] = L->peerScratch[peer];
        if (!rt.launchCopy(a, b->workStream, &err) || !rt.streamSynchronize(b->workStream, &err))
          local =
              fail(chorusSystemError, __FILE__, __LINE__, "device path: receive: %s", err.c_str());
      }
      CHORUS_CHECK(signal(comm, peer, true, local, runHost));
    }
  }
  return chorusSuccess;
}

}  // namespace cuda
}  // namespace chorus
