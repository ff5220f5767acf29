// proxy.cc — the progress thread: epoll loop, accept + hello, commands, shutdown.
#include "transports/tcp/proxy.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"
#include "transports/tcp/socket_util.h"

namespace chorus {
namespace tcp {
namespace {
// Unauthenticated sockets kept at once: a flood of strangers evicts the oldest instead of
// exhausting file descriptors. Real peers send their hello as soon as they connect.
constexpr size_t kMaxPending = 128;
// How long sockets a waiter read itself may stay unwatched after it stopped polling: the
// caller left with its message and is busy elsewhere, and whatever arrives next must not
// wait in the kernel for its return (a peer whose sends fill the socket would stall on it).
constexpr int64_t kReclaimNs = 1000000;  // 1 ms
}  // namespace

chorusResult_t Proxy::start(Fd listener, std::vector<RecvChannel*> recvByRank) {
  recvByRank_ = std::move(recvByRank);
  CHORUS_CHECK(open(&eventTag_));
  listener_ = std::move(listener);
  addFd(listener_.get(), EPOLLIN, &listenerTag_);
  return launch();
}

void Proxy::addFd(int fd, uint32_t events, EpollTag* tag) {
  if (!watch(fd, events, tag))
    CHORUS_WARN(kLogNet, "epoll_ctl(ADD fd %d): %s", fd, strerror(errno));
}

void Proxy::closeListener() {
  post([this] { closeListener_ = true; });
}

void Proxy::runCommands() {
  bool closeL = false;
  const std::vector<proxied::ProxiedChannel*> act = takeCommands(false, [&] {
    closeL = closeListener_;
    closeListener_ = false;
  });
  for (proxied::ProxiedChannel* pc : act) {
    auto* c = static_cast<Channel*>(pc);
    if (c->tag.kind == EpollTag::kSend) {
      auto* s = static_cast<SendChannel*>(c);
      {
        // Under the lock: finishSetup may be adding the pair lane right now.
        std::lock_guard<std::mutex> g(s->driving);
        for (auto& k : s->socks)
          if (!k.watched) {
            addFd(k.fd.get(), kSendEvents, &c->tag);
            k.watched = true;
          }
        c->active.store(true, std::memory_order_release);
      }
      s->progressLocked();
    } else {
      auto* r = static_cast<RecvChannel*>(c);
      {
        // The sockets this rank opened itself (the receive channel's descriptors of them):
        // watched from now on; those a peer opened came through the listener, watched.
        std::lock_guard<std::mutex> g(r->driving);
        for (auto& k : r->socks)
          if (k.fd.valid() && !k.watched) {
            addFd(k.fd.get(), EPOLLRDHUP | EPOLLONESHOT, &c->tag);  // armed by serveRecv
            k.watched = true;
          }
      }
      c->active.store(true, std::memory_order_release);
      serveRecv(r);  // sockets attached before activation
    }
  }
  if (closeL && listener_.valid()) {
    listener_.reset();  // closing removes it from the epoll set
    for (auto& p : pending_) {
      if (p->fd.valid())
        CHORUS_WARN(kLogNet,
                    "dropped TCP connection from %s: no complete hello (%zu of %zu "
                    "bytes) when the listener closed",
                    p->from.str().c_str(), p->got, sizeof(p->hello));
      p->fd.reset();
      dead_.push_back(std::move(p));
    }
    pending_.clear();
  }
  if (mode() != kRun)
    for (proxied::ProxiedChannel* pc : channels()) {
      auto* c = static_cast<Channel*>(pc);
      if (c->tag.kind == EpollTag::kRecv) {
        auto* r = static_cast<RecvChannel*>(c);
        {
          std::lock_guard<std::mutex> g(c->driving);
          if (r->discard) continue;
          r->discard = true;
        }
        r->proxyOwned.store(true, std::memory_order_seq_cst);  // nobody else reads any more
        serveRecv(r);
      }
    }
}

void Proxy::onKick(proxied::ProxiedChannel* pc) {
  auto* c = static_cast<Channel*>(pc);
  if (c->tag.kind == EpollTag::kSend)
    static_cast<SendChannel*>(c)->progressLocked();
  else
    serveRecv(static_cast<RecvChannel*>(c));
}

void Proxy::serveRecv(RecvChannel* c) {
  c->progressLocked();
  armRecv(c);
}

void Proxy::armRecv(RecvChannel* c) {
  if (!c->proxyOwned.load(std::memory_order_seq_cst) || !c->active.load() || !c->healthy()) return;
  std::lock_guard<std::mutex> g(c->driving);
  for (auto& k : c->socks) {
    // A socket waiting for a free slot stays readable: the release that frees one kicks us.
    if (!k.fd.valid() || k.eof || k.waitingSlot) continue;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.ptr = &c->tag;
    if (::epoll_ctl(epollFd(), EPOLL_CTL_MOD, k.fd.get(), &ev) != 0)
      CHORUS_WARN(kLogNet, "epoll_ctl(MOD): %s", strerror(errno));
  }
}

bool Proxy::reclaim() {
  bool any = false;
  int64_t now = 0;
  for (RecvChannel* c : recvByRank_) {
    if (!c || c->proxyOwned.load(std::memory_order_relaxed) || !c->active.load() || !c->healthy())
      continue;
    if (now == 0) now = nowNs();
    if (now - c->appPolledNs.load(std::memory_order_relaxed) < kReclaimNs) {
      any = true;
      continue;
    }
    // A caller polling again right now just takes the sockets back (it stores false).
    c->proxyOwned.store(true, std::memory_order_seq_cst);
    serveRecv(c);
  }
  return any;
}

bool Proxy::drained(const proxied::ProxiedChannel* pc) const {
  const auto* c = static_cast<const Channel*>(pc);
  return c->tag.kind != EpollTag::kSend || static_cast<const SendChannel*>(c)->drained();
}

void Proxy::undrained(const proxied::ProxiedChannel* c) {
  CHORUS_WARN(kLogNet,
              "closing the connection to %s with unsent messages: it did not read "
              "them before the deadline",
              c->peerDesc.c_str());
}

void Proxy::loop() {
  epoll_event evs[64];
  for (;;) {
    runCommands();
    runKicks();
    if (finished()) break;
    int n = 0;
    const bool appOwned = reclaim();
    if (maySleep())
      n = ::epoll_wait(epollFd(), evs, 64,
                       mode() == kDrain ? 10
                       : appOwned       ? static_cast<int>(kReclaimNs / 1000000)
                                        : -1);
    awake();
    if (n < 0 && errno != EINTR) {
      CHORUS_WARN(kLogNet, "epoll_wait: %s", strerror(errno));
      usleep(1000);
    }
    for (int i = 0; i < n; ++i) {
      auto* tag = static_cast<EpollTag*>(evs[i].data.ptr);
      const uint32_t e = evs[i].events;
      switch (tag->kind) {
        case EpollTag::kEvent: drainWakeups(); break;
        case EpollTag::kListener: onAccept(); break;
        case EpollTag::kPending: onHello(static_cast<Pending*>(tag->obj)); break;
        case EpollTag::kSend: {
          auto* c = static_cast<SendChannel*>(tag->obj);
          // This watch asks for room to write only (the receive channel's descriptor of
          // the socket watches what the peer writes): any of these means the peer is gone.
          if ((e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && c->active.load() && c->healthy())
            c->peerGone();
          c->progressLocked();
          break;
        }
        case EpollTag::kRecv: serveRecv(static_cast<RecvChannel*>(tag->obj)); break;
      }
    }
    dead_.clear();
  }
  dead_.clear();
  pending_.clear();
}

// ---------------------------------------------------------------------------------------
// Incoming sockets

void Proxy::onAccept() {
  for (;;) {
    if (!listener_.valid()) return;
    Fd fd;
    SockAddr from;
    acceptOne(listener_.get(), &fd, &from);
    if (!fd.valid()) return;
    if (pending_.size() >= kMaxPending) {
      CHORUS_WARN(kLogNet, "too many unauthenticated TCP connections: dropping the one from %s",
                  pending_.front()->from.str().c_str());
      pending_.front()->fd.reset();
      dead_.push_back(std::move(pending_.front()));
      pending_.erase(pending_.begin());
    }
    auto p = std::make_unique<Pending>();
    p->fd = std::move(fd);
    p->from = from;
    p->tag.obj = p.get();
    Pending* raw = p.get();
    pending_.push_back(std::move(p));
    addFd(raw->fd.get(), EPOLLIN | EPOLLRDHUP | EPOLLET, &raw->tag);
  }
}

void Proxy::drop(Pending* p) {
  auto it = std::find_if(pending_.begin(), pending_.end(),
                         [p](const std::unique_ptr<Pending>& q) { return q.get() == p; });
  if (it == pending_.end()) return;
  dead_.push_back(std::move(*it));
  pending_.erase(it);
}

void Proxy::onHello(Pending* p) {
  if (!p->fd.valid()) return;  // dropped earlier in this batch
  // Read exactly the hello: whatever follows belongs to the stripes.
  while (p->got < sizeof(p->hello)) {
    ssize_t r = ::recv(p->fd.get(), reinterpret_cast<char*>(&p->hello) + p->got,
                       sizeof(p->hello) - p->got, 0);
    if (r > 0) {
      p->got += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    CHORUS_WARN(kLogNet, "TCP connection from %s closed before it identified itself (ignored)",
                p->from.str().c_str());
    p->fd.reset();
    drop(p);
    return;
  }
  const Hello& h = p->hello;
  const char* bad = checkHello(h, token_, rank_, static_cast<int>(recvByRank_.size()));
  if (!bad && !recvByRank_[static_cast<size_t>(h.rank)])
    bad = "unknown rank";
  else if (!bad &&
           recvByRank_[static_cast<size_t>(h.rank)]->socks[static_cast<size_t>(h.index)].fd.valid())
    bad = "duplicate socket";
  if (bad) {
    if (h.magic == kHelloMagic && h.token == token_)
      CHORUS_WARN(kLogNet, "rejected TCP connection from %s: %s (rank %d, socket %d)",
                  p->from.str().c_str(), bad, h.rank, h.index);
    else
      CHORUS_WARN(kLogNet, "rejected TCP connection from %s: %s", p->from.str().c_str(), bad);
    p->fd.reset();
    drop(p);
    return;
  }
  RecvChannel* c = recvByRank_[static_cast<size_t>(h.rank)];
  std::unique_lock<std::mutex> g(c->driving);  // an application thread may be reading socks
  RecvChannel::Sock& k = c->socks[static_cast<size_t>(h.index)];
  k.fd = std::move(p->fd);
  k.from = p->from;
  k.watched = true;
  epoll_event ev{};
  ev.events = EPOLLRDHUP | EPOLLONESHOT;  // armed below (or by the next kick)
  ev.data.ptr = &c->tag;
  if (::epoll_ctl(epollFd(), EPOLL_CTL_MOD, k.fd.get(), &ev) != 0)
    CHORUS_WARN(kLogNet, "epoll_ctl(MOD): %s", strerror(errno));
  drop(p);
  c->attached.fetch_add(1, std::memory_order_release);
  CHORUS_TRACE(kLogNet, "accepted socket %d from rank %d (%s)", h.index, h.rank,
               k.from.str().c_str());
  g.unlock();
  serveRecv(c);  // bytes behind the hello, if the thread owns the channel
}

}  // namespace tcp
}  // namespace chorus
