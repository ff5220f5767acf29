// proxy.cc — the progress thread: epoll loop, accept + hello, commands, shutdown.
#include "transports/tcp/proxy.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
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
}  // namespace

Proxy::~Proxy() {
  if (thread_.joinable()) stop(false, 0);
}

chorusResult_t Proxy::start(Fd listener, std::vector<RecvChannel*> recvByRank) {
  recvByRank_ = std::move(recvByRank);
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) CHORUS_FAIL(chorusSystemError, "epoll_create1: %s", strerror(errno));
  event_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!event_.valid()) CHORUS_FAIL(chorusSystemError, "eventfd: %s", strerror(errno));
  listener_ = std::move(listener);
  addFd(event_.get(), EPOLLIN, &eventTag_);
  addFd(listener_.get(), EPOLLIN, &listenerTag_);
  try {
    thread_ = std::thread([this] {
      setLogRank(rank_);
      loop();
    });
  } catch (const std::exception& e) {
    CHORUS_FAIL(chorusSystemError, "cannot start the TCP progress thread: %s", e.what());
  }
  return chorusSuccess;
}

void Proxy::addFd(int fd, uint32_t events, EpollTag* tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = tag;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
    CHORUS_WARN(kLogNet, "epoll_ctl(ADD fd %d): %s", fd, strerror(errno));
}

void Proxy::wake() {
  uint64_t one = 1;
  ssize_t r = ::write(event_.get(), &one, sizeof(one));
  (void)r;  // EAGAIN means the counter is already non-zero: the thread wakes anyway
}

void Proxy::activate(Channel* c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    toActivate_.push_back(c);
  }
  commandPending_.store(true, std::memory_order_seq_cst);
  wake();
}

void Proxy::closeListener() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closeListener_ = true;
  }
  commandPending_.store(true, std::memory_order_seq_cst);
  wake();
}

void Proxy::stop(bool drain, int64_t deadlineNs) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopMode_ = drain ? 1 : 2;
    stopDeadline_ = deadlineNs;
  }
  commandPending_.store(true, std::memory_order_seq_cst);
  wake();
  thread_.join();
}

void Proxy::runCommands() {
  if (!commandPending_.exchange(false, std::memory_order_acq_rel)) return;
  std::vector<Channel*> act;
  bool closeL;
  {
    std::lock_guard<std::mutex> lock(mu_);
    act.swap(toActivate_);
    closeL = closeListener_;
    closeListener_ = false;
    if (stopMode_ > mode_) {
      mode_ = stopMode_;
      deadline_ = stopDeadline_;
    }
  }
  for (Channel* c : act) {
    c->active = true;
    channels_.push_back(c);
    if (c->tag.kind == EpollTag::kSend) {
      auto* s = static_cast<SendChannel*>(c);
      for (auto& k : s->socks) addFd(k.fd.get(), EPOLLOUT | EPOLLRDHUP | EPOLLET, &c->tag);
      s->progress();
    } else {
      static_cast<RecvChannel*>(c)->progress();  // sockets attached before activation
    }
  }
  if (closeL && listener_.valid()) {
    listener_.reset();  // closing removes it from the epoll set
    for (auto& p : pending_) {
      if (p->fd.valid())
        CHORUS_WARN(kLogNet, "dropped TCP connection from %s: no complete hello (%zu of %zu "
                    "bytes) when the listener closed", p->from.str().c_str(), p->got,
                    sizeof(p->hello));
      p->fd.reset();
      dead_.push_back(std::move(p));
    }
    pending_.clear();
  }
  if (mode_ != 0)
    for (Channel* c : channels_)
      if (c->tag.kind == EpollTag::kRecv) static_cast<RecvChannel*>(c)->discard = true;
}

bool Proxy::runKicks() {
  bool any = false;
  for (Channel* c : channels_) {
    // The exchange reads the latest kick, so what that kicker published before it (a slot,
    // a release) is visible to the progress call below.
    if (!c->kicked.load(std::memory_order_relaxed)) continue;
    if (!c->kicked.exchange(false, std::memory_order_acq_rel)) continue;
    any = true;
    if (c->tag.kind == EpollTag::kSend)
      static_cast<SendChannel*>(c)->progress();
    else
      static_cast<RecvChannel*>(c)->progress();
  }
  return any;
}

bool Proxy::allDrained() const {
  for (Channel* c : channels_)
    if (c->tag.kind == EpollTag::kSend && c->healthy() &&
        !static_cast<SendChannel*>(c)->drained())
      return false;
  return true;
}

void Proxy::loop() {
  epoll_event evs[64];
  for (;;) {
    runCommands();
    runKicks();
    if (mode_ == 2) break;
    if (mode_ == 1) {
      if (allDrained()) break;
      if (nowNs() >= deadline_) {
        for (Channel* c : channels_)
          if (c->tag.kind == EpollTag::kSend && c->healthy() &&
              !static_cast<SendChannel*>(c)->drained())
            CHORUS_WARN(kLogNet, "closing the connection to %s with unsent messages: it did "
                        "not read them before the deadline", c->peerDesc.c_str());
        break;
      }
    }
    // Announce that we may sleep, then look once more: a kick that saw sleeping_ false
    // must be visible here (both sides use seq_cst; see kick()).
    sleeping_.store(true, std::memory_order_seq_cst);
    bool work = commandPending_.load(std::memory_order_seq_cst);
    for (Channel* c : channels_) work = work || c->kicked.load(std::memory_order_seq_cst);
    int n = 0;
    if (!work) n = ::epoll_wait(epoll_.get(), evs, 64, mode_ == 1 ? 10 : -1);
    sleeping_.store(false, std::memory_order_relaxed);
    if (n < 0 && errno != EINTR) {
      CHORUS_WARN(kLogNet, "epoll_wait: %s", strerror(errno));
      usleep(1000);
    }
    for (int i = 0; i < n; ++i) {
      auto* tag = static_cast<EpollTag*>(evs[i].data.ptr);
      const uint32_t e = evs[i].events;
      switch (tag->kind) {
        case EpollTag::kEvent: {
          uint64_t v;
          while (::read(event_.get(), &v, sizeof(v)) > 0) {
          }
          break;
        }
        case EpollTag::kListener:
          onAccept();
          break;
        case EpollTag::kPending:
          onHello(static_cast<Pending*>(tag->obj));
          break;
        case EpollTag::kSend: {
          auto* c = static_cast<SendChannel*>(tag->obj);
          // The peer never writes on our send sockets: any of these means it is gone.
          if ((e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) && c->active && c->healthy())
            c->peerGone();
          c->progress();
          break;
        }
        case EpollTag::kRecv:
          static_cast<RecvChannel*>(tag->obj)->progress();
          break;
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
  RecvChannel::Sock& k = c->socks[static_cast<size_t>(h.index)];
  k.fd = std::move(p->fd);
  k.from = p->from;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = &c->tag;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, k.fd.get(), &ev) != 0)
    CHORUS_WARN(kLogNet, "epoll_ctl(MOD): %s", strerror(errno));
  drop(p);
  c->attached.fetch_add(1, std::memory_order_release);
  CHORUS_TRACE(kLogNet, "accepted socket %d from rank %d (%s)", h.index, h.rank,
               k.from.str().c_str());
  c->progress();  // bytes behind the hello raised no new edge
}

}  // namespace tcp
}  // namespace chorus
