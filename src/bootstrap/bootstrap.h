// bootstrap.h — out-of-band setup traffic between the ranks of one communicator.
//
// Before any transport exists, ranks need to swap small records (host identity, shared
// memory names, listen addresses). The root named in the unique id collects every rank's
// listen address and hands the table back; afterwards ranks talk over a socket ring
// (allgather, barrier) and direct sockets (send/recv by tag). Every connection starts with
// the unique id's 128-bit secret; anything else is logged and dropped before another byte
// is read. Every wait has a deadline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "chorus.h"

namespace chorus {

struct SockAddr;

/// The layout behind chorusUniqueId::internal (fits in CHORUS_UNIQUE_ID_BYTES).
struct UniqueIdData {
  uint32_t magic;      ///< kUniqueIdMagic
  uint32_t addrLen;    ///< bytes used in addr
  uint8_t secret[16];  ///< 128-bit random secret
  uint8_t addr[96];    ///< sockaddr_in / sockaddr_in6 of the root listener
};
static_assert(sizeof(UniqueIdData) <= CHORUS_UNIQUE_ID_BYTES, "unique id too large");
constexpr uint32_t kUniqueIdMagic = 0x43485253;  // "CHRS"

/// Makes a unique id and starts a root that listens on its address (a detached thread in
/// this process that ends once it has served `nranks` ranks, or at its deadline).
/// `nranks` is learned from the first rank that checks in.
chorusResult_t bootstrapCreateRoot(chorusUniqueId* id);

/// Starts a root listening on a given address/port with a given secret
/// (chorusCommInitFromEnv's tcp:// rendezvous: rank 0 serves it). host may be a name or
/// address; "" means any interface.
chorusResult_t bootstrapCreateRootAt(const char* host, int port, const uint8_t secret[16],
                                     chorusUniqueId* id);

/// Fills an id that points at host:port with a secret, without starting anything.
chorusResult_t bootstrapIdFor(const char* host, int port, const uint8_t secret[16],
                              chorusUniqueId* id);

/// One rank's end. Not thread-safe: one thread at a time calls init's result
/// (allGather, barrier, send, recv); setDeadline and abort may come from any thread.
class Bootstrap {
 public:
  /// Checks in with the root named by `id` and builds the ring. Collective over nranks.
  /// `deadlineNs` is an absolute CLOCK_MONOTONIC time in nanoseconds.
  static chorusResult_t init(const chorusUniqueId& id, int rank, int nranks, int64_t deadlineNs,
                             std::unique_ptr<Bootstrap>* out);
  /// The same in two steps, for a caller that must be able to abort() while init waits
  /// (a non-blocking chorusCommInitRank, chorusCommAbort from another thread): create()
  /// makes the object without any network I/O; connect() then does what init does and
  /// may be called once. Until connect succeeds only abort/setDeadline are usable.
  static chorusResult_t create(int rank, int nranks, std::unique_ptr<Bootstrap>* out);
  virtual chorusResult_t connect(const chorusUniqueId& id, int64_t deadlineNs) = 0;
  virtual ~Bootstrap() = default;

  /// In place: `data` holds nranks records of `bytes` each; this rank's record is filled
  /// on entry, all are filled on return.
  virtual chorusResult_t allGather(void* data, size_t bytes) = 0;
  virtual chorusResult_t barrier() = 0;
  /// Tagged point-to-point messages (any size); recv blocks until the matching send.
  virtual chorusResult_t send(int peer, int tag, const void* data, size_t bytes) = 0;
  virtual chorusResult_t recv(int peer, int tag, void* data, size_t bytes) = 0;
  /// Sets the deadline used by every later wait (absolute, CLOCK_MONOTONIC ns).
  /// 0 (the state after init) means each call gets as long as init was given (init's
  /// deadline minus the time init started; at least 1 s), counted from the call's start.
  /// Callable from any thread.
  virtual void setDeadline(int64_t deadlineNs) = 0;
  /// Makes every blocked and later call return chorusAborted (callable from any thread).
  virtual void abort() = 0;
  /// Is `peer`'s listener still there? Connects, says hello as a probe (the peer drops it
  /// silently) and closes: chorusSuccess when the connection was accepted, chorusRemoteError
  /// when it was refused (the process is gone), chorusTimeout at the deadline (unreachable).
  /// Uses no state a concurrent call changes: callable from several threads at once.
  virtual chorusResult_t probe(int peer, int64_t deadlineNs) const = 0;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 protected:
  int rank_ = 0;
  int nranks_ = 0;
};

/// CLOCK_MONOTONIC in nanoseconds (nowNs() of src/core/wait.h).
int64_t monotonicNs();

/// The address the bootstrap listens on: src/net's findInterfaceAddr with
/// CHORUS_SOCKET_IFNAME (the choice is logged at TRACE).
chorusResult_t bootstrapInterfaceAddr(SockAddr* out, std::string* ifname);

/// monotonicNs() + CHORUS_TIMEOUT_S (at least 1 s): the deadline a wait gets by default.
int64_t bootstrapDefaultDeadlineNs();

}  // namespace chorus
