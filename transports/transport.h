// transport.h — the one small interface every transport (shm, tcp, rdma) implements.
//
// A connection is one-way and made of fixed-size slots: the sender acquires a free slot,
// writes into it and posts it; the receiver waits for a posted slot, reads it in place
// and releases it. Algorithms reduce straight from a receive slot into a send slot, so a
// transport that can expose its buffers (shm) costs no extra copy. A second, optional
// low-latency path (sendLL/recvLL) carries small messages with the data and its arrival
// flag in the same cache line; transports without one fall back to slots.
//
// Transports never know which collective they serve; algorithms never know which
// transport carries their bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "chorus.h"
#include "src/core/timeout.h"
#include "src/core/wait.h"
#include "src/net/socket.h"

namespace chorus {

class PeerAccess;   // transports/peer_access.h
class SharedBoard;  // transports/board.h
class PairCells;    // transports/pair_cells.h

/// What every rank publishes about itself during init.
struct PeerInfo {
  uint64_t hostHash;  ///< hostname + boot id (or CHORUS_HOSTID)
  int32_t pid;
  int32_t rank;
  int32_t cudaDev;  ///< -1 on host-only builds
  int32_t ncpus;    ///< CPUs the ranks of this rank's host may use together (see cpuMask)
  /// The CPUs this rank's process may run on (bit i: CPU i; CPUs from 1024 up are left
  /// out). Init ORs the masks of a host's ranks: ranks bound one per core share none of
  /// them, and together they have as many CPUs as they have ranks.
  uint64_t cpuMask[16];
};

class SendConn {
 public:
  virtual ~SendConn() = default;
  /// Payload capacity of one slot.
  virtual size_t slotBytes() const = 0;
  /// Waits for a free slot and returns where to write.
  virtual chorusResult_t acquire(void** slot, const WaitCtx& w) = 0;
  /// Non-blocking acquire: nullptr when no slot is free.
  virtual void* tryAcquire() = 0;
  /// Publishes the acquired slot carrying `bytes` of payload.
  virtual void post(size_t bytes) = 0;
  /// Largest message sendLL carries (0: none).
  virtual size_t llMaxBytes() const = 0;
  /// Sends a small message on the low-latency path.
  virtual chorusResult_t sendLL(const void* data, size_t bytes, const WaitCtx& w) = 0;
  /// Largest LL message sendLL hands over whole without waiting for the receiver, when
  /// nothing else is in flight (two ranks may then both send before either receives);
  /// 0: not known.
  virtual size_t llBufferedBytes() const { return 0; }
  /// Whether postFrom() sends straight from the caller's memory instead of a slot (tcp:
  /// sendmsg reads it), saving the copy into the slot.
  virtual bool sendsFromUser() const { return false; }
  /// After acquire() returned `slot`: publishes `bytes` (at most slotBytes) read from `src`.
  /// Where sendsFromUser(), src is read later, by whichever thread writes the sockets: it
  /// must stay unchanged until flush() returns; elsewhere it is copied into the slot now.
  virtual void postFrom(const void* src, size_t bytes, void* slot) {
    std::memcpy(slot, src, bytes);
    post(bytes);
  }
  /// Waits until no posted message reads the caller's memory any more (postFrom).
  virtual chorusResult_t flush(const WaitCtx& w) {
    (void)w;
    return chorusSuccess;
  }
  /// A call that posted with postFrom failed (`why`) before flush(): if any message is
  /// still unsent, the connection fails with `why` (naming `what`), so nothing reads the
  /// caller's memory after the call returns.
  virtual void abandon(const char* what, chorusResult_t why) {
    (void)what;
    (void)why;
  }
  /// For callers that poll with tryAcquire (send/recv batches) and so never see a waiting
  /// call's error: chorusSuccess while the connection can still deliver, else the error
  /// (message set) a blocking call would return. May cost a system call: call it rarely.
  virtual chorusResult_t check(const char* what) {
    (void)what;
    return chorusSuccess;
  }
};

class RecvConn {
 public:
  virtual ~RecvConn() = default;
  virtual size_t slotBytes() const = 0;
  /// Waits for the next posted slot; *bytes is what the sender posted.
  virtual chorusResult_t wait(const void** slot, size_t* bytes, const WaitCtx& w) = 0;
  /// Non-blocking wait: false when nothing is posted yet.
  virtual bool test(const void** slot, size_t* bytes) = 0;
  /// Gives the slot returned by wait/test back to the sender.
  virtual void release() = 0;
  virtual size_t llMaxBytes() const = 0;
  /// Receives a small message of exactly `bytes` on the low-latency path.
  virtual chorusResult_t recvLL(void* dst, size_t bytes, const WaitCtx& w) = 0;
  /// Zero-copy form: waits for the next small message and exposes it in place until
  /// releaseLL. Transports without shared buffers copy into their own staging.
  virtual chorusResult_t waitLL(const void** data, size_t bytes, const WaitCtx& w) = 0;
  virtual void releaseLL() = 0;
  /// As SendConn::check, for callers polling with test(); call it after test() found
  /// nothing (what arrived before a failure is still delivered).
  virtual chorusResult_t check(const char* what) {
    (void)what;
    return chorusSuccess;
  }
};

/// Point-to-point records between two ranks while they connect (rdma swaps its per-pair
/// queue pair numbers here: they do not fit the allgathered info). The communicator
/// provides it (over its bootstrap). Messages are matched by (peer, tag); recv waits for the
/// matching send, and send never waits for the peer's recv, so both ranks may send first.
class PeerExchange {
 public:
  virtual ~PeerExchange() = default;
  virtual chorusResult_t send(int peer, int tag, const void* data, size_t bytes) = 0;
  virtual chorusResult_t recv(int peer, int tag, void* data, size_t bytes) = 0;
};

// Each built-in transport's settings. The communicator fills them from the parameter
// registry (src/comm/init.cc); transports never read a parameter themselves, so tests set
// them per instance. Defaults are the registry's defaults.

struct ShmOptions {
  bool disable = false;  ///< CHORUS_SHM_DISABLE: same-host pairs go to the next transport
  /// Puts a segment this rank reads (so: writes to it arrive here) on this rank's NUMA node
  /// before anything touches it; null leaves placement to the kernel. The communicator
  /// passes its topology's binding (a no-op on one-node hosts).
  bool (*bindLocal)(void* addr, size_t bytes) = nullptr;
  /// This rank's sleepers pay the heavy side of an asymmetric fence so that its peers may
  /// ring its doorbell without a fence, where the process takes part (src/core/asym_fence.h).
  bool asymmetricBell = true;
  /// CHORUS_PAIR_CELLS: a segment of a two-rank communicator, or of a power-of-two one on one
  /// host, carries pair cells (transports/pair_cells.h).
  bool pairCells = true;
};

struct TcpOptions {
  SockAddr bindAddr;                      ///< listen here; no family: the interface `ifname` picks
  std::string ifname;                     ///< CHORUS_SOCKET_IFNAME (syntax: src/net/netif.h)
  int nsocks = 2;                         ///< CHORUS_NSOCKS, 1..tcp::kMaxSocks
  size_t slotBytes = 0;                   ///< 0: max(chunkBytes, the communicator's slot)
  int64_t chunkBytes = 512 << 10;         ///< CHORUS_TCP_CHUNKSIZE, within [4 KiB, 1 GiB]
  int depth = 0;                          ///< 0: buffBytes / slot, clamped to [2, 16]
  int64_t buffBytes = 4 << 20;            ///< CHORUS_BUFFSIZE
  int64_t sockBuf = 4 << 20;              ///< CHORUS_SOCKET_BUFSIZE (<= 0: kernel autotuning)
  size_t minStripe = 64 << 10;            ///< shortest stripe worth its own socket
  int64_t timeoutNs = kDefaultTimeoutNs;  ///< connect/setup/drain: the communicator's timeout
  int64_t busyPollNs = 100000;            ///< CHORUS_TCP_BUSY_POLL_US, in ns
  int64_t pollMaxBytes = 1ll << 30;       ///< CHORUS_TCP_POLL_MAX_BYTES
  bool pairLane = true;                   ///< CHORUS_TCP_PAIR_LANE (tcp/transport.h)
  bool sendFromUser = true;               ///< CHORUS_TCP_SEND_FROM_USER (SendConn::postFrom)
  size_t pairLaneMaxBytes = 0;            ///< > 0: the lane's largest message (tests); 0: a segment
  std::string congestion =
      "reno";  ///< CHORUS_TCP_CONGESTION, "auto" resolved at init (empty: the system's)
};

struct RdmaOptions {
  bool disable = false;                   ///< CHORUS_IB_DISABLE
  std::string hca;                        ///< CHORUS_IB_HCA
  int gidIndex = -1;                      ///< CHORUS_IB_GID_INDEX (-1: choose)
  int ackTimeout = 18;                    ///< CHORUS_IB_TIMEOUT, 1..31
  int retryCnt = 7;                       ///< CHORUS_IB_RETRY_CNT, 0..7
  int sl = 0;                             ///< CHORUS_IB_SL, 0..15
  int trafficClass = 0;                   ///< CHORUS_IB_TC, 0..255
  size_t regCacheBytes = 1ull << 30;      ///< CHORUS_IB_REG_CACHE
  size_t slotBytes = 0;                   ///< 0: the communicator's slot size
  int depth = 0;                          ///< 0: the communicator's FIFO depth
  int64_t timeoutNs = kDefaultTimeoutNs;  ///< connect / drain: the communicator's timeout
};

/// What a transport may need to know while it is created and sets up one communicator's
/// connections.
struct TransportContext {
  int rank;
  int nranks;
  const std::vector<PeerInfo>* peers;
  uint64_t commHash;  ///< unique per communicator (names shared segments)
  size_t slotBytes;   ///< CHORUS_CHUNKSIZE
  int fifoDepth;
  size_t llBytes;  ///< CHORUS_LL_THRESHOLD
  /// Point-to-point records between two ranks during connect (see PeerExchange).
  PeerExchange* exchange = nullptr;
  /// The communicator's first broken connection: proxied channels record theirs here.
  LinkFailure* linkFailure = nullptr;
  ShmOptions shm;
  TcpOptions tcp;
  RdmaOptions rdma;
};

constexpr size_t kConnectInfoBytes = 128;

/// One instance per communicator: resources live as long as the communicator does.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  /// Whether this transport can join two ranks.
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer) const = 0;
  /// Creates this rank's receiving resources for every peer it can reach; fills `info`
  /// (kConnectInfoBytes) to be published to all ranks.
  virtual chorusResult_t setup(const TransportContext& ctx, void* info) = 0;
  /// Builds the send side towards `peer` and the receive side from `peer`, given the
  /// peer's published info.
  virtual chorusResult_t connect(const TransportContext& ctx, int peer, const void* peerInfo,
                                 std::unique_ptr<SendConn>* send,
                                 std::unique_ptr<RecvConn>* recv) = 0;
  /// Called once every rank has connected (after a barrier): drop names, keep mappings.
  virtual void finishSetup() = 0;
  /// Wakes this rank's sleeping waiters (used by abort).
  virtual void wakeAll() = 0;
  /// Capabilities, asked instead of names. Whether the pairs this transport joins share
  /// memory (same-host hops: the cost model prices them as shm, and single copy needs them).
  virtual bool sharesMemory() const { return false; }
  /// Direct access to same-host peers' memory (transports/peer_access.h), once set up; null
  /// where the transport has none.
  virtual PeerAccess* peerAccess() { return nullptr; }
  /// Boards every rank writes once and every same-host peer reads (transports/board.h),
  /// once every rank is connected; null where the transport has none.
  virtual SharedBoard* sharedBoard() { return nullptr; }
  /// Two cells this rank and `peer` swap at every exchange (transports/pair_cells.h), once
  /// both are connected; null where the transport has none for that pair. The shm transport
  /// has them for the two ranks of a two-rank communicator, and where its host holds all of
  /// a power-of-two number of ranks, for every pair rank ^ 2^k (halving's partners).
  virtual PairCells* pairCells(int peer) {
    (void)peer;
    return nullptr;
  }
};

}  // namespace chorus
