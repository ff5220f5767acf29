// tcp/channel.h — one direction of one peer pair: the slot ring the application sees and
// the sockets the progress thread drives (each direction on its own descriptors of the
// pair's sockets, which carry both: transport.h).
//
// The application thread and the progress thread share a channel the way two ranks share
// an shm FIFO: the producer advances one counter, the consumer another, each on its own
// cache line, and slot contents are published by the counter's release store. On the send
// side the application produces (post) and the progress thread consumes (writes to the
// sockets, then frees the slot); on the receive side the progress thread produces (a slot
// is published once all its stripes have arrived) and the application consumes.
//
// Sockets are driven by whichever thread gets there first: an application thread that posts
// or waits drives the channel itself (drive(): a try-lock, one non-blocking pass over the
// sockets), so a blocking call sends and receives without handing off to the progress
// thread; the progress thread drives it when the application is not there (epoll edges,
// kicks). Fields are grouped by who writes them; everything under "driver only" is touched
// only while holding `driving`.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/net/socket.h"
#include "src/core/wait.h"
#include "transports/proxied/progress_thread.h"
#include "transports/proxied/slot_ring.h"
#include "transports/tcp/wire.h"

namespace chorus {
namespace tcp {

class Proxy;

/// What the progress thread needs to know about one registered fd.
struct EpollTag {
  enum Kind { kEvent, kListener, kPending, kSend, kRecv } kind;
  void* obj;
};

using proxied::SlotRing;

/// State common to both directions (failure, the peer's name and the kick flag:
/// proxied::ProxiedChannel).
struct Channel : proxied::ProxiedChannel {
  Channel(Proxy* p, Doorbell* b, int peerRank) : ProxiedChannel(b, peerRank), proxy(p) {}
  Proxy* const proxy;
  SlotRing ring;
  /// Held by whichever thread runs progress(): the progress thread waits for it, an
  /// application thread only tries (someone else is already moving the bytes).
  std::mutex driving;
  std::atomic<bool> active{false};  // set once by the progress thread on activation

  // Driver only.
  EpollTag tag{EpollTag::kSend, this};  // what epoll reports for any of its sockets
};

struct SendChannel : Channel {
  using Channel::Channel;
  alignas(64) std::atomic<uint64_t> head{0};  // messages posted (application)
  alignas(64) std::atomic<uint64_t> tail{0};  // messages fully handed to the kernel (driver)

  // Driver only.
  struct Sock {
    Fd fd;
    uint64_t next = 0;  // next message that may carry a stripe for this socket
    bool busy = false;  // a stripe is in flight
    StripeHeader hdr{};
    size_t hdrDone = 0, dataDone = 0;
    bool watched = false;  // in the progress thread's epoll set (set under `driving`)
  };
  /// This rank's own sockets to the peer, then (higher rank of a pair only) the pair lane:
  /// its descriptor of the lower rank's socket 0, for messages that fit one segment.
  std::vector<Sock> socks;
  std::vector<uint8_t> stripesLeft;  // per slot
  uint64_t seen = 0;                 // messages whose stripesLeft is set
  uint64_t tailLocal = 0;
  size_t minStripe = 0;
  int lane = -1;               // index of the pair lane in socks; -1: none
  size_t laneMaxBytes = 0;     // messages up to this size take the lane
  bool peerReadsLane = false;  // the peer's connect info: it would read our lane
  /// SendConn::postFrom leaves the bytes where the caller has them; sendmsg reads them
  /// there (CHORUS_TCP_SEND_FROM_USER). Set before activation.
  bool sendFromUser = true;

  /// Sockets that stripe a message (the lane is not one of them).
  int ownSocks() const { return lane >= 0 ? lane : static_cast<int>(socks.size()); }
  bool onLane(size_t bytes) const { return lane >= 0 && bytes <= laneMaxBytes; }
  /// Whether socket s carries a stripe of a message of `bytes`.
  bool carries(size_t bytes, int s) const {
    if (onLane(bytes)) return s == lane;
    return s != lane && s < stripeCount(bytes, ownSocks(), minStripe);
  }

  /// Writes whatever the sockets accept; frees fully written slots. Hold `driving`.
  void progress();
  /// Progress thread: progress() under the lock.
  void progressLocked() {
    std::lock_guard<std::mutex> g(driving);
    progress();
  }
  /// Application thread: one pass if no other thread is driving; false if one is.
  bool drive() {
    if (!driving.try_lock()) return false;
    progress();
    driving.unlock();
    return true;
  }
  /// epoll saw a hang-up or error on one of our sockets: the peer is gone.
  void peerGone();
  bool drained() const {
    return tail.load(std::memory_order_relaxed) == head.load(std::memory_order_acquire);
  }
};

struct RecvChannel : Channel {
  RecvChannel(Proxy* p, Doorbell* b, int peerRank) : Channel(p, b, peerRank) {
    tag.kind = EpollTag::kRecv;
    socks.resize(kMaxSocks + 1);  // by hello index, then the pair lane (kPairLane)
  }
  alignas(64) std::atomic<uint64_t> head{0};      // messages complete (driver)
  alignas(64) std::atomic<uint64_t> released{0};  // messages given back (application)
  std::atomic<bool> stalled{false};               // the thread waits for a release to read on
  std::atomic<int> attached{0};                   // sockets whose hello arrived
  int expected = 0;                               // sockets the peer opens (from its connect info)
  /// Whether the progress thread watches the sockets (epoll, one-shot, re-armed after each
  /// event): true until the application polls, and again once it has polled for
  /// `busyPollNs` without a message (it kicks the thread then). While the application
  /// polls, arrivals do not wake the progress thread at all.
  std::atomic<bool> proxyOwned{true};
  int64_t busyPollNs = 0;  // CHORUS_TCP_BUSY_POLL_US
  int64_t pollStart = 0;   // application only: when the current run of empty polls began
  int64_t lastDrive = 0;   // application only: when it last read the sockets
  /// When the application last polled (a copy of lastDrive the progress thread may read):
  /// sockets it left unread for kReclaimNs go back to the progress thread (Proxy::reclaim),
  /// so bytes never wait in the kernel for a caller busy elsewhere (computing, or blocked
  /// on another transport) for longer than that.
  std::atomic<int64_t> appPolledNs{0};
  size_t pollMaxBytes = 0;  // CHORUS_TCP_POLL_MAX_BYTES: no polling after a larger message
  size_t lastBytes = 0;     // application only: size of the last message it received

  // Driver only (sockets are attached by the progress thread under the lock).
  struct Sock {
    Fd fd;
    SockAddr from;
    bool haveHdr = false;
    StripeHeader hdr{};
    size_t hdrDone = 0, dataDone = 0;
    uint64_t minSeq = 0;       // stripes arrive in message order on one socket
    bool eof = false;          // the peer closed it cleanly, between two stripes
    bool waitingSlot = false;  // stopped for want of a free slot (not re-armed in epoll)
    bool watched = false;      // in the progress thread's epoll set under this channel's tag
    /// Bytes read ahead of the header being parsed: a header is read together with what
    /// follows it (small messages whole, and the headers behind them) in one recv, and a
    /// payload's rest together with what follows it in one readv (the rest straight into
    /// its slot), instead of a recv for each header, each payload and one that finds the
    /// socket empty. [stageBeg, stageEnd) is not consumed yet; allocated on the first read.
    std::unique_ptr<char[]> stage;
    size_t stageBeg = 0, stageEnd = 0;
    uint32_t lastLen = 0;  // payload bytes of the last stripe read on this socket
  };
  /// Read-ahead per socket: how much a read may take beyond the message it is for. A
  /// stream of messages up to kStageBytes (a root's broadcasts, scatters) comes out of the
  /// socket as many messages per read; after a larger stripe only kSmallAheadBytes (the next
  /// header, and a small message whole): the next one is likely as large again, and would
  /// otherwise be copied through the stage instead of read into its slot.
  static constexpr size_t kStageBytes = 65536;
  static constexpr size_t kSmallAheadBytes = 4096;
  static size_t aheadAfter(size_t stripeLen) {
    return stripeLen < kStageBytes ? kStageBytes : kSmallAheadBytes;
  }
  std::vector<Sock> socks;  // kMaxSocks entries filled by hello index, then kPairLane
  struct SlotState {
    uint64_t seq = ~0ull;
    uint16_t nstripes = 0, got = 0;
    uint32_t mask = 0;  // which stripes (= sockets) have arrived
  };
  std::vector<SlotState> slotState;
  uint64_t headLocal = 0;
  bool discard = false;  // shutting down: nobody consumes any more, drop what arrives
  /// Where a channel has a pair lane, a waiting caller reads only where the last message
  /// came (the lane, or the sockets that stripe), and every socket every kFullPollEvery-th
  /// time: the same collective sends messages of one size, and reading both would double
  /// the empty recv calls of a wait (2 x 1 hosts: 2-32 KiB all-reduce 3-8% slower).
  bool lastOnLane = false;
  unsigned callerPolls = 0;
  static constexpr unsigned kFullPollEvery = 4;
  enum Read { kAll, kLaneOnly, kOwnOnly };

  /// Reads whatever has arrived into free slots; publishes completed messages. Hold
  /// `driving`. `which`: the sockets to read.
  void progress(Read which = kAll);
  void progressLocked() {
    std::lock_guard<std::mutex> g(driving);
    progress();
  }
  bool drive() {
    if (!driving.try_lock()) return false;
    progress();
    driving.unlock();
    return true;
  }
  /// A waiting caller's look at the sockets (drive(), but mostly only where the last
  /// message came: see lastOnLane).
  bool pollForCaller() {
    if (!driving.try_lock()) return false;
    Read which = kAll;
    if (socks[kPairLane].fd.valid() && ++callerPolls % kFullPollEvery != 0)
      which = lastOnLane ? kLaneOnly : kOwnOnly;
    progress(which);
    driving.unlock();
    return true;
  }

 private:
  bool readSock(int s, Sock& k);
  bool acceptHeader(int s, Sock& k);
  void publishComplete();
  void checkClosed();
};

}  // namespace tcp
}  // namespace chorus
