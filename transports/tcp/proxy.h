// tcp/proxy.h — the progress thread of one communicator's TCP transport.
//
// Sockets make progress only when someone calls send/recv on them; the algorithms wait on
// slot counters and must not have to know that. Application threads drive their channels
// while they post and wait (connection.h); this thread covers everything else: it accepts
// and authenticates incoming sockets, writes what a full socket refused, reads for a
// waiter that stopped polling (one-shot epoll watches, re-armed while it owns the
// channel) or behind a stream of large messages, and rings the application's doorbell
// when a counter moves. It
// sleeps in epoll_wait (edge-triggered: each handler runs until the socket would block or
// its slots are full) and is woken through an eventfd, but only when it is actually
// asleep: an application thread posting into a busy proxy costs one flag store. The
// thread, its mailbox, kicks and shutdown are proxied::ProgressThread's.
#pragma once

#include <sys/epoll.h>

#include <memory>
#include <vector>

#include "src/net/socket.h"
#include "transports/proxied/progress_thread.h"
#include "transports/tcp/channel.h"

namespace chorus {
namespace tcp {

/// activate() takes a channel with its buffers allocated (and, sending, its sockets
/// connected); drain (stop) lasts until every healthy send channel has handed all posted
/// slots to the kernel.
class Proxy final : public proxied::ProgressThread {
 public:
  /// `token` is what a hello must carry to be accepted.
  Proxy(int rank, uint64_t token) : ProgressThread(rank, "TCP"), rank_(rank), token_(token) {}
  ~Proxy() override { stop(false, 0); }

  /// Starts the thread; it owns `listener` from now on. `recvByRank[r]` is where sockets
  /// whose hello names rank r go (null for ourselves).
  chorusResult_t start(Fd listener, std::vector<RecvChannel*> recvByRank);
  /// No more peers will connect: closes the listener and drops unauthenticated sockets.
  void closeListener();
  /// Watches one more socket of an active send channel (its pair lane) for room to write
  /// and for the peer's hang-up; false (errno set) if epoll refuses it.
  bool watchSend(SendChannel* c, int fd) { return watch(fd, kSendEvents, &c->tag); }
  static constexpr uint32_t kSendEvents = EPOLLOUT | EPOLLRDHUP | EPOLLET;

 private:
  struct Pending {  // an accepted socket whose hello is not complete yet
    Fd fd;
    SockAddr from;
    Hello hello{};
    size_t got = 0;
    EpollTag tag{EpollTag::kPending, nullptr};
  };

  void loop() override;
  void onKick(proxied::ProxiedChannel* c) override;
  bool drained(const proxied::ProxiedChannel* c) const override;
  void undrained(const proxied::ProxiedChannel* c) override;
  void runCommands();
  void onAccept();
  void onHello(Pending* p);
  void drop(Pending* p);
  void addFd(int fd, uint32_t events, EpollTag* tag);
  /// Re-arms the one-shot epoll watch of a receive channel's sockets if the progress thread
  /// owns them (and nothing would make a level-triggered watch fire in a loop).
  void armRecv(RecvChannel* c);
  /// A receive channel's event or kick: read, then re-arm if the thread still owns it.
  void serveRecv(RecvChannel* c);
  /// Takes back the sockets of every receive channel whose application stopped polling
  /// more than kReclaimNs ago; returns whether any channel is still the application's
  /// (then the loop sleeps at most kReclaimNs).
  bool reclaim();

  const int rank_;
  const uint64_t token_;
  std::vector<RecvChannel*> recvByRank_;

  Fd listener_;
  EpollTag eventTag_{EpollTag::kEvent, nullptr};
  EpollTag listenerTag_{EpollTag::kListener, nullptr};

  bool closeListener_ = false;  // a command (under the mailbox lock)

  // Thread only.
  std::vector<std::unique_ptr<Pending>> pending_;
  std::vector<std::unique_ptr<Pending>> dead_;  // freed after the current epoll batch
};

}  // namespace tcp
}  // namespace chorus
