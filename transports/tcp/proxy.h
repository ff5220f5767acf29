// tcp/proxy.h — the progress thread of one communicator's TCP transport.
//
// Sockets make progress only when someone calls send/recv on them; the algorithms wait on
// slot counters and must not have to know that. So one thread per communicator drives
// every socket: it accepts and authenticates incoming sockets, writes posted send slots,
// fills receive slots, and rings the application's doorbell when a counter moves. It
// sleeps in epoll_wait (edge-triggered: each handler runs until the socket would block or
// its slots are full) and is woken through an eventfd, but only when it is actually
// asleep: an application thread posting into a busy proxy costs one flag store.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "src/net/socket.h"
#include "src/core/wait.h"
#include "transports/tcp/channel.h"

namespace chorus {
namespace tcp {

class Proxy {
 public:
  /// `token` is what a hello must carry to be accepted.
  Proxy(int rank, uint64_t token) : rank_(rank), token_(token) {}
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  /// Starts the thread; it owns `listener` from now on. `recvByRank[r]` is where sockets
  /// whose hello names rank r go (null for ourselves).
  chorusResult_t start(Fd listener, std::vector<RecvChannel*> recvByRank);
  /// Hands a channel (buffers allocated, send sockets connected) to the thread.
  void activate(Channel* c);
  /// No more peers will connect: closes the listener and drops unauthenticated sockets.
  void closeListener();
  /// Gets the thread's attention for `c` (new slot posted, or a stalled receive slot
  /// freed). Cheap unless the thread sleeps.
  void kick(Channel* c) {
    c->kicked.store(true, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) wake();
  }
  /// Stops the thread. With `drain`, first keeps writing until every healthy send channel
  /// has handed all posted slots to the kernel (or `deadlineNs`), so a rank may post its
  /// last message and leave, as it can with shared memory.
  void stop(bool drain, int64_t deadlineNs);

  Doorbell* bell() { return &bell_; }

 private:
  struct Pending {  // an accepted socket whose hello is not complete yet
    Fd fd;
    SockAddr from;
    Hello hello{};
    size_t got = 0;
    EpollTag tag{EpollTag::kPending, nullptr};
  };

  void loop();
  void wake();
  void runCommands();
  bool runKicks();
  bool allDrained() const;
  void onAccept();
  void onHello(Pending* p);
  void drop(Pending* p);
  void addFd(int fd, uint32_t events, EpollTag* tag);

  const int rank_;
  const uint64_t token_;
  std::vector<RecvChannel*> recvByRank_;
  Doorbell bell_{};

  Fd epoll_, event_, listener_;
  EpollTag eventTag_{EpollTag::kEvent, nullptr};
  EpollTag listenerTag_{EpollTag::kListener, nullptr};
  std::thread thread_;
  std::atomic<bool> sleeping_{false};

  // Commands from other threads.
  std::mutex mu_;
  std::vector<Channel*> toActivate_;
  bool closeListener_ = false;
  int stopMode_ = 0;  // 0 run, 1 drain then stop, 2 stop
  int64_t stopDeadline_ = 0;
  std::atomic<bool> commandPending_{false};

  // Thread only.
  std::vector<Channel*> channels_;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::vector<std::unique_ptr<Pending>> dead_;  // freed after the current epoll batch
  int mode_ = 0;
  int64_t deadline_ = 0;
};

}  // namespace tcp
}  // namespace chorus
