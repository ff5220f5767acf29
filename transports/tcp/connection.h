// tcp/connection.h — the application's ends of a TCP connection: the FIFO ends every
// proxied transport shares (proxied/fifo_ends.h) over a tcp channel's counters.
#pragma once

#include <sys/socket.h>

#include "transports/proxied/fifo_ends.h"
#include "transports/tcp/channel.h"
#include "transports/tcp/proxy.h"

namespace chorus {
namespace tcp {

static_assert(kMsgLL == proxied::kMsgLL, "stripe headers carry the FIFO's LL flag as is");

// The application's thread drives the sockets itself: posting writes the message to the
// socket at once (header and payload in one sendmsg), and a receiver waiting for a small
// message reads the sockets itself for a bounded time (RecvSide::arrived). The progress
// thread does the rest: a full socket's remainder (EPOLLOUT), a waiter past its polling
// budget, streams of large messages, and whatever arrives while another thread holds the
// channel (a kick).

struct SendSide {
  using Channel = SendChannel;
  static SlotRing& ring(SendChannel* c) { return c->ring; }
  /// Slots whose bytes the kernel has taken: free again. (Not a place to write: a sender
  /// waits here only when the sockets are full, and the EPOLLOUT that ends that wakes the
  /// progress thread, which writes; a sendmsg per poll would only burn the core.)
  static uint64_t freed(SendChannel* c) { return c->tail.load(std::memory_order_acquire); }
  static void posted(SendChannel* c, uint64_t head) {
    c->head.store(head, std::memory_order_release);
    // Another thread holds the sockets (it may have read head before our store): have the
    // progress thread look again. Otherwise we wrote what the kernel takes; a full socket
    // raises EPOLLOUT later and the progress thread writes the rest.
    if (!c->drive()) c->proxy->kick(c);
  }
  static bool sendsFromUser(SendChannel* c) { return c->sendFromUser; }
  /// Under the driving lock, so no pass over the sockets is reading the caller's memory
  /// while the channel fails, and none starts after it (progress() checks health first).
  /// Our direction of each socket is shut, so the peer, which may be waiting for the
  /// rest of a message, learns at once that none will come (a close mid-message fails
  /// its receive) instead of at its deadline.
  static void abandon(SendChannel* c, const char* what, chorusResult_t why) {
    std::lock_guard<std::mutex> g(c->driving);
    if (c->drained()) return;
    c->markFailed(why, std::string("messages to ") + c->peerDesc + " were left unsent when " +
                           (what ? what : "a call") + " failed");
    for (auto& k : c->socks)
      if (k.fd.valid()) ::shutdown(k.fd.get(), SHUT_WR);
  }
};

struct RecvSide {
  static constexpr int64_t kPollGapNs = 2000;
  using Channel = RecvChannel;
  static SlotRing& ring(RecvChannel* c) { return c->ring; }
  /// Messages complete. While nothing new is complete, polling it reads the sockets, for
  /// up to the channel's busy-poll time; then the progress thread takes the sockets over
  /// (epoll) and rings the doorbell, so a long wait sleeps instead of spinning on recv.
  static uint64_t arrived(RecvChannel* c) {
    uint64_t h = c->head.load(std::memory_order_acquire);
    const uint64_t rel = c->released.load(std::memory_order_relaxed);
    if (h > rel) {
      c->pollStart = 0;
      c->lastBytes = c->ring.sizes[c->ring.index(rel)];
      return h;
    }
    const int64_t now = nowNs();
    if (c->pollStart == 0) c->pollStart = now;
    // A stream of large messages is bandwidth, not latency: the progress thread reads the
    // next ones into free slots while this thread reduces the last (it would read them
    // only once it waits again).
    const int64_t budget = c->lastBytes > c->pollMaxBytes ? 0 : c->busyPollNs;
    // A waiter about to sleep on the doorbell counts itself a sleeper before its last look
    // (waitSlow), and its spin budget may end long before ours: only the progress thread
    // can ring that doorbell, so it must own the sockets before anyone sleeps. (Left with
    // the application, the bytes sat in the socket until the futex slice ran out: 10 ms.)
    const bool sleeper = c->bell->sleepers.load(std::memory_order_seq_cst) != 0;
    if (now - c->pollStart < budget && !sleeper) {
      if (c->proxyOwned.load(std::memory_order_relaxed)) {
        c->appPolledNs.store(now, std::memory_order_relaxed);  // before the progress thread looks
        c->proxyOwned.store(false, std::memory_order_seq_cst);
      }
      // Waiters poll in a tight loop before they first yield (tuned for a load from
      // memory): a recv per poll would keep the core for hundreds of microseconds, from
      // the very peer we wait for when ranks share cores. So read at most every kPollGapNs.
      if (now - c->lastDrive >= kPollGapNs) {
        c->lastDrive = now;
        c->appPolledNs.store(now, std::memory_order_relaxed);
        if (c->pollForCaller()) h = c->head.load(std::memory_order_acquire);
        if (h > c->released.load(std::memory_order_relaxed)) c->pollStart = 0;
      }
    } else if (!c->proxyOwned.load(std::memory_order_relaxed)) {
      c->proxyOwned.store(true, std::memory_order_seq_cst);
      c->proxy->kick(c);
      h = c->head.load(std::memory_order_acquire);
    }
    return h;
  }
  static void released(RecvChannel* c, uint64_t tail) {
    c->released.store(tail, std::memory_order_seq_cst);
    // The driver stopped reading for want of a free slot: this is the one. The progress
    // thread, if it owns the sockets, also has to re-arm its watch.
    if (c->stalled.load(std::memory_order_seq_cst)) {
      c->stalled.store(false, std::memory_order_relaxed);
      if (c->proxyOwned.load(std::memory_order_seq_cst) || !c->drive()) c->proxy->kick(c);
    }
  }
};

using TcpSendConn = proxied::SendEnd<SendSide>;
using TcpRecvConn = proxied::RecvEnd<RecvSide>;

}  // namespace tcp
}  // namespace chorus
