// proxy.cc — the progress thread: posting writes and credits, completions, sleeping.
#include "transports/rdma/proxy.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

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

// A verbs call for `c` returned errno value `err`: "<before><peer><after>: <strerror>".
void failCall(Channel* c, const char* before, const char* after, int err) {
  c->markFailed(chorusSystemError, before + c->peerDesc + after + ": " + strerror(err));
}
}  // namespace

Proxy::Proxy(int rank, int nranks, VerbsContext* ctx, size_t regCacheBytes, uint64_t maxWrite)
    : ProgressThread(rank, "RDMA"), ctx_(ctx), cache_(ctx, regCacheBytes), maxWrite_(maxWrite) {
  byPeer_.assign(static_cast<size_t>(nranks), nullptr);
}

chorusResult_t Proxy::start() {
  CHORUS_CHECK(open(nullptr));
  if (!watch(ctx_->eventFd(), EPOLLIN, nullptr))
    CHORUS_FAIL(chorusSystemError, "epoll_ctl(ADD fd %d): %s", ctx_->eventFd(), strerror(errno));
  return launch();
}

void Proxy::runCommands(bool force) {
  for (proxied::ProxiedChannel* pc : takeCommands(force)) {
    auto* c = static_cast<Channel*>(pc);
    byPeer_[static_cast<size_t>(c->peer)] = c;
    progressSend(c);
  }
}

void Proxy::onKick(proxied::ProxiedChannel* pc) {
  auto* c = static_cast<Channel*>(pc);
  progressSend(c);
  progressCredits(c);
}

bool Proxy::drained(const proxied::ProxiedChannel* pc) const {
  const auto* c = static_cast<const Channel*>(pc);
  return c->completed == c->sendHead.load(std::memory_order_acquire);
}

void Proxy::undrained(const proxied::ProxiedChannel* pc) {
  const auto* c = static_cast<const Channel*>(pc);
  CHORUS_WARN(kLogNet,
              "closing the RDMA connection to %s with %llu unfinished messages: they "
              "did not complete before the deadline",
              c->peerDesc.c_str(),
              static_cast<unsigned long long>(c->sendHead.load() - c->completed));
}

void Proxy::failAll(const std::string& msg) {
  for (proxied::ProxiedChannel* c : channels())
    c->markFailed(chorusSystemError, c->peerDesc + ": " + msg);
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
  ringDoorbell(bell());
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
        failCall(c, "cannot register the RDMA send buffer for ", "", err);
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
        failCall(c, "posting an RDMA write to ", " failed", err);
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
    failCall(c, "posting an RDMA credit to ", " failed", err);
    return;
  }
  ++c->sendWrs;
  c->credited = rel;
}

void Proxy::onCompletion(const Completion& wc) {
  const WrKind kind = wrKind(wc.wrId);
  const int peer = wrPeer(wc.wrId);
  if (peer >= static_cast<int>(byPeer_.size())) {
    CHORUS_WARN(kLogNet, "RDMA completion for unknown peer %d (status %d) ignored", peer,
                wc.status);
    return;
  }
  // A peer may write as soon as init's barrier has passed, which can be before this
  // thread has taken in the channel that connect() handed over just before the barrier.
  if (!byPeer_[static_cast<size_t>(peer)]) runCommands(true);
  Channel* c = byPeer_[static_cast<size_t>(peer)];
  if (!c) {
    CHORUS_WARN(kLogNet, "RDMA completion for unknown peer %d (status %d) ignored", peer,
                wc.status);
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
      // A lost data write breaks the collective for every rank of the communicator; a
      // credit or receive failure alone may be a peer that finished and left.
      c->markFailed(chorusRemoteError, msg, kind == WrKind::Piece || kind == WrKind::Last);
    }
    return;
  }
  switch (kind) {
    case WrKind::Recv: {
      const int err = ctx_->postRecv(c->qp, wrId(WrKind::Recv, c->peer, 0));
      if (err != 0) {
        failCall(c, "reposting an RDMA receive for ", " failed", err);
        return;
      }
      if (!wc.hasImm) break;
      if (wc.imm & kImmCredit) {
        c->credits += wc.imm & ~kImmCredit;
        publishFree(c);
        break;
      }
      const uint32_t bytes = wc.imm & kImmBytesMask;
      if (bytes > c->recvRing.slotBytes ||
          c->arrived - c->recvReleased.load() >= static_cast<uint64_t>(c->recvRing.depth)) {
        c->markFailed(chorusRemoteError,
                      c->peerDesc + " wrote past its credits or its slot (protocol violation)");
        return;
      }
      const size_t i = c->recvRing.index(c->arrived);
      c->recvRing.sizes[i] = bytes;
      c->recvRing.flags[i] = (wc.imm & kImmLL) ? kMsgLL : 0;
      ++c->arrived;
      c->recvHead.store(c->arrived, std::memory_order_release);
      ringDoorbell(bell());
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
    case WrKind::Credit: break;
  }
  // A completion may have made room in the send queue for what waited.
  progressSend(c);
  progressCredits(c);
}

void Proxy::loop() {
  int idle = 0;
  epoll_event evs[4];
  for (;;) {
    runCommands();
    bool work = runKicks();
    work = pollOnce() || work;
    if (finished()) break;
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
    if (maySleep() && !pollOnce()) {
      // The timeout is a safety net only; completions and kicks wake the thread.
      const int n = ::epoll_wait(epollFd(), evs, 4, mode() == kDrain ? 10 : 100);
      if (n < 0 && errno != EINTR) CHORUS_WARN(kLogNet, "epoll_wait: %s", strerror(errno));
    }
    awake();
    drainWakeups();
    ctx_->ackEvents();
    idle = 0;
  }
}

}  // namespace rdma
}  // namespace chorus
