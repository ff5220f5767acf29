// proxy.cc — the progress thread: posting writes and credits, completions, sleeping.
#include "transports/rdma/proxy.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"
#include "transports/rdma/wire.h"

namespace chorus {
namespace rdma {
namespace {
// Empty polls before the thread arms the completion channel and sleeps: a few, because
// on a machine with more ranks than cores a spinning progress thread steals the core its
// own rank needs.
constexpr int kIdlePolls = 32;
constexpr int kPollBatch = 64;
}  // namespace

Proxy::Proxy(int rank, int nranks, VerbsContext* ctx, size_t regCacheBytes, uint64_t maxWrite)
    : rank_(rank), ctx_(ctx), cache_(ctx, regCacheBytes), maxWrite_(maxWrite) {
  byPeer_.assign(static_cast<size_t>(nranks), nullptr);
}

Proxy::~Proxy() {
  if (thread_.joinable()) stop(false, 0);
}

chorusResult_t Proxy::start() {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) CHORUS_FAIL(chorusSystemError, "epoll_create1: %s", strerror(errno));
  event_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!event_.valid()) CHORUS_FAIL(chorusSystemError, "eventfd: %s", strerror(errno));
  for (int fd : {event_.get(), ctx_->eventFd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
      CHORUS_FAIL(chorusSystemError, "epoll_ctl(ADD fd %d): %s", fd, strerror(errno));
  }
  try {
    thread_ = std::thread([this] {
      setLogRank(rank_);
      loop();
    });
  } catch (const std::exception& e) {
    CHORUS_FAIL(chorusSystemError, "cannot start the RDMA progress thread: %s", e.what());
  }
  return chorusSuccess;
}

void Proxy::wake() {
  uint64_t one = 1;
  ssize_t r = ::write(event_.get(), &one, sizeof(one));
  (void)r;  // EAGAIN: the counter is already non-zero, the thread wakes anyway
}

void Proxy::activate(Channel* c) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    toActivate_.push_back(c);
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

void Proxy::runCommands(bool force) {
  if (!commandPending_.exchange(false, std::memory_order_acq_rel) && !force) return;
  std::vector<Channel*> act;
  {
    std::lock_guard<std::mutex> lock(mu_);
    act.swap(toActivate_);
    if (stopMode_ > mode_) {
      mode_ = stopMode_;
      deadline_ = stopDeadline_;
    }
  }
  for (Channel* c : act) {
    channels_.push_back(c);
    byPeer_[static_cast<size_t>(c->peer)] = c;
    progressSend(c);
  }
}

bool Proxy::runKicks() {
  bool any = false;
  for (Channel* c : channels_) {
    if (!c->kicked.load(std::memory_order_relaxed)) continue;
    if (!c->kicked.exchange(false, std::memory_order_acq_rel)) continue;
    any = true;
    progressSend(c);
    progressCredits(c);
  }
  return any;
}

void Proxy::failAll(const std::string& msg) {
  for (Channel* c : channels_) c->markFailed(chorusSystemError, c->peerDesc + ": " + msg);
}

bool Proxy::pollOnce() {
  Completion wcs[kPollBatch];
  const int n = ctx_->poll(wcs, kPollBatch);
  if (n < 0) {
    failAll("polling the RDMA completion queue failed");
    return false;
  }
  for (int i = 0; i < n; ++i) onCompletion(wcs[i]);
  return n > 0;
}

void Proxy::publishFree(Channel* c) {
  c->sendFree.store(std::min(c->credits, c->completed), std::memory_order_release);
  ringDoorbell(&bell_);
}

void Proxy::progressSend(Channel* c) {
  if (!c->healthy()) return;
  const uint64_t head = c->sendHead.load(std::memory_order_acquire);
  while (c->issued < head) {
    const uint64_t m = c->issued;
    const size_t i = c->sendRing.index(m);
    const uint32_t bytes = c->sendRing.sizes[i];
    const uint64_t pieces = pieceCount(bytes, maxWrite_);
    // A whole message or nothing: completions free room in the send queue.
    if (c->sendWrs + static_cast<int64_t>(pieces) > c->maxSendWrs) return;
    if (!c->stagingHeld && bytes > 0) {
      int err = cache_.acquire(c->sendRing.mem.get(), c->sendRing.bytes(), &c->stagingLkey);
      if (err == EBUSY) {
        // The device holds all it can and every buffer has writes in flight: their
        // completions release one (see onCompletion).
        if (std::find(regWaiters_.begin(), regWaiters_.end(), c) == regWaiters_.end())
          regWaiters_.push_back(c);
        return;
      }
      if (err != 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "cannot register the RDMA send buffer for %s: %s",
                 c->peerDesc.c_str(), strerror(err));
        c->markFailed(chorusSystemError, msg);
        return;
      }
      c->stagingHeld = true;
    }
    char* slot = c->sendRing.slot(m);
    const uint64_t remote = c->remoteFifo + i * c->sendRing.slotBytes;
    for (uint64_t p = 0; p < pieces; ++p) {
      const uint64_t off = p * maxWrite_;
      const bool last = p + 1 == pieces;
      WriteRequest w;
      w.wrId = wrId(last ? WrKind::Last : WrKind::Piece, c->peer, m);
      w.local = slot + off;
      w.len = bytes == 0 ? 0 : std::min<uint64_t>(maxWrite_, bytes - off);
      w.lkey = c->stagingLkey;
      w.remoteAddr = remote + off;
      w.rkey = c->remoteRkey;
      w.withImm = last;
      w.imm = last ? immData(bytes, c->sendRing.flags[i] & kMsgLL) : 0;
      const int err = ctx_->postWrite(c->qp, w);
      if (err != 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "posting an RDMA write to %s failed: %s", c->peerDesc.c_str(),
                 strerror(err));
        c->markFailed(chorusSystemError, msg);
        return;
      }
      ++c->sendWrs;
    }
    ++c->issued;
  }
}

void Proxy::progressCredits(Channel* c) {
  if (!c->healthy()) return;
  const uint64_t rel = c->recvReleased.load(std::memory_order_acquire);
  if (rel == c->credited || c->sendWrs >= c->maxSendWrs) return;
  WriteRequest w;
  w.wrId = wrId(WrKind::Credit, c->peer, rel);
  w.remoteAddr = c->remoteFifo;
  w.rkey = c->remoteRkey;
  w.withImm = true;
  w.imm = immCredit(static_cast<uint32_t>(rel - c->credited));
  const int err = ctx_->postWrite(c->qp, w);
  if (err != 0) {
    char msg[256];
    snprintf(msg, sizeof(msg), "posting an RDMA credit to %s failed: %s", c->peerDesc.c_str(),
             strerror(err));
    c->markFailed(chorusSystemError, msg);
    return;
  }
  ++c->sendWrs;
  c->credited = rel;
}

void Proxy::onCompletion(const Completion& wc) {
  const WrKind kind = wrKind(wc.wrId);
  const int peer = wrPeer(wc.wrId);
  if (peer >= static_cast<int>(byPeer_.size())) {
    CHORUS_WARN(kLogNet, "RDMA completion for unknown peer %d (status %d) ignored", peer, wc.status);
    return;
  }
  // A peer may write as soon as init's barrier has passed, which can be before this
  // thread has taken in the channel that connect() handed over just before the barrier.
  if (!byPeer_[static_cast<size_t>(peer)]) runCommands(true);
  Channel* c = byPeer_[static_cast<size_t>(peer)];
  if (!c) {
    CHORUS_WARN(kLogNet, "RDMA completion for unknown peer %d (status %d) ignored", peer, wc.status);
    return;
  }
  if (kind != WrKind::Recv) --c->sendWrs;
  if (wc.status != kWcSuccess) {
    if (c->healthy()) {
      char msg[384];
      if (wc.status == kWcFlushErr)
        snprintf(msg, sizeof(msg), "the RDMA connection with %s broke (work request flushed)",
                 c->peerDesc.c_str());
      else
        snprintf(msg, sizeof(msg), "RDMA %s %s failed: %s (completion status %d)",
                 kind == WrKind::Recv ? "receive from" : "write to", c->peerDesc.c_str(),
                 ctx_->statusText(wc.status), wc.status);
      c->markFailed(chorusRemoteError, msg);
    }
    return;
  }
  switch (kind) {
    case WrKind::Recv: {
      const int err = ctx_->postRecv(c->qp, wrId(WrKind::Recv, c->peer, 0));
      if (err != 0) {
        c->markFailed(chorusSystemError,
                      "reposting an RDMA receive for " + c->peerDesc + " failed: " + strerror(err));
        return;
      }
      if (!wc.hasImm) break;
      if (wc.imm & kImmCredit) {
        c->credits += wc.imm & ~kImmCredit;
        publishFree(c);
        break;
      }
      const uint32_t bytes = wc.imm & kImmBytesMask;
      if (bytes > c->recvRing.slotBytes || c->arrived - c->recvReleased.load() >=
                                               static_cast<uint64_t>(c->recvRing.depth)) {
        c->markFailed(chorusRemoteError,
                      c->peerDesc + " wrote past its credits or its slot (protocol violation)");
        return;
      }
      const size_t i = c->recvRing.index(c->arrived);
      c->recvRing.sizes[i] = bytes;
      c->recvRing.flags[i] = (wc.imm & kImmLL) ? kMsgLL : 0;
      ++c->arrived;
      c->recvHead.store(c->arrived, std::memory_order_release);
      ringDoorbell(&bell_);
      break;
    }
    case WrKind::Last:
      ++c->completed;
      if (c->completed == c->issued && c->stagingHeld) {
        cache_.release(c->sendRing.mem.get());
        c->stagingHeld = false;
        std::vector<Channel*> waiters;
        waiters.swap(regWaiters_);
        for (Channel* w : waiters) progressSend(w);
      }
      publishFree(c);
      break;
    case WrKind::Piece:
    case WrKind::Credit:
      break;
  }
  // A completion may have made room in the send queue for what waited.
  progressSend(c);
  progressCredits(c);
}

bool Proxy::allDrained() const {
  for (Channel* c : channels_)
    if (c->healthy() && c->completed != c->sendHead.load(std::memory_order_acquire)) return false;
  return true;
}

void Proxy::loop() {
  int idle = 0;
  epoll_event evs[4];
  for (;;) {
    runCommands();
    bool work = runKicks();
    work = pollOnce() || work;
    if (mode_ == 2) break;
    if (mode_ == 1) {
      if (allDrained()) break;
      if (nowNs() >= deadline_) {
        for (Channel* c : channels_)
          if (c->healthy() && c->completed != c->sendHead.load())
            CHORUS_WARN(kLogNet, "closing the RDMA connection to %s with %llu unfinished "
                        "messages: they did not complete before the deadline",
                        c->peerDesc.c_str(),
                        static_cast<unsigned long long>(c->sendHead.load() - c->completed));
        break;
      }
    }
    if (work) {
      idle = 0;
      continue;
    }
    if (++idle < kIdlePolls) {
      cpuRelax();
      continue;
    }
    // Arm, announce the sleep, then look once more: a completion or kick that raced the
    // arming is seen here (kick() pairs with the seq_cst store).
    if (ctx_->armEvents() != chorusSuccess) {
      usleep(100);
      continue;
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    bool pending = commandPending_.load(std::memory_order_seq_cst);
    for (Channel* c : channels_) pending = pending || c->kicked.load(std::memory_order_seq_cst);
    if (!pending && !pollOnce()) {
      // The timeout is a safety net only; completions and kicks wake the thread.
      const int n = ::epoll_wait(epoll_.get(), evs, 4, mode_ == 1 ? 10 : 100);
      if (n < 0 && errno != EINTR) CHORUS_WARN(kLogNet, "epoll_wait: %s", strerror(errno));
    }
    sleeping_.store(false, std::memory_order_relaxed);
    uint64_t v;
    while (::read(event_.get(), &v, sizeof(v)) > 0) {
    }
    ctx_->ackEvents();
    idle = 0;
  }
}

}  // namespace rdma
}  // namespace chorus
