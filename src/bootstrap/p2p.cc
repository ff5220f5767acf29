// p2p.cc — the shared wait loop (pollOnce), vetting incoming connections, and tagged
// point-to-point messages (send connects lazily; recv drains into a stash).
#include <errno.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "src/bootstrap/socket_bootstrap.h"
#include "src/core/checks.h"
#include "src/core/debug.h"

namespace chorus {
namespace {
// Connections still in their handshake at once; more wait in the listen backlog.
constexpr size_t kMaxHandshakes = 64;
}  // namespace

// ---------------------------------------------------------------------------------------
// The wait loop

chorusResult_t SocketBootstrap::pollOnce(pollfd* extra, int nExtra, int64_t deadlineNs,
                                         int wantPeer, const char* what) {
  if (aborted_.load())
    CHORUS_FAIL(chorusAborted, "bootstrap rank %d: aborted while waiting for %s", rank_, what);
  int64_t now = monotonicNs();
  if (now >= deadlineNs)
    CHORUS_FAIL(chorusTimeout, "bootstrap rank %d: timed out waiting for %s", rank_, what);

  // Vetting deadlines, and what to poll.
  int64_t wake = deadlineNs;
  size_t handshakes = 0;
  for (auto& c : conns_) {
    if (c->peer >= 0) continue;
    if (c->hs.deadline() <= now) {
      CHORUS_WARN(kLogBootstrap,
                  "bootstrap rank %d: dropped connection from %s: no secret and hello within "
                  "%lld ms",
                  rank_, c->from.str().c_str(),
                  static_cast<long long>(kHandshakeTimeoutNs / 1000000));
      c->dead = true;
      continue;
    }
    ++handshakes;
    if (c->hs.deadline() < wake) wake = c->hs.deadline();
  }
  std::vector<pollfd> pfds;
  std::vector<InConn*> polled;
  pfds.reserve(2 + conns_.size() + static_cast<size_t>(nExtra));
  pfds.push_back({abortFd_.get(), POLLIN, 0});
  pfds.push_back({handshakes < kMaxHandshakes ? listen_.get() : -1, POLLIN, 0});
  for (auto& c : conns_) {
    if (c->dead) continue;
    // Backpressure: with a full stash only vet new connections and read the wanted peer.
    if (c->peer >= 0 && c->peer != wantPeer && stashBytes_ >= kMaxStashBytes) continue;
    pfds.push_back({c->fd.get(), POLLIN, 0});
    polled.push_back(c.get());
  }
  const size_t extraAt = pfds.size();
  for (int i = 0; i < nExtra; ++i) pfds.push_back({extra[i].fd, extra[i].events, 0});

  int n = ::poll(pfds.data(), pfds.size(), pollTimeoutMs(wake));
  if (n < 0 && errno != EINTR)
    CHORUS_FAIL(chorusSystemError, "bootstrap rank %d: poll while waiting for %s: %s", rank_, what,
                strerror(errno));
  if (n > 0) {
    if (pfds[0].revents)
      CHORUS_FAIL(chorusAborted, "bootstrap rank %d: aborted while waiting for %s", rank_, what);
    for (int i = 0; i < nExtra; ++i)
      extra[i].revents = pfds[extraAt + static_cast<size_t>(i)].revents;
    for (size_t i = 0; i < polled.size(); ++i)
      if (pfds[2 + i].revents) progressConn(*polled[i]);
    if (pfds[1].revents) acceptPending();
  }
  for (size_t i = 0; i < conns_.size();) {
    if (conns_[i]->dead) {
      conns_[i] = std::move(conns_.back());
      conns_.pop_back();
    } else {
      ++i;
    }
  }
  return chorusSuccess;
}

void SocketBootstrap::acceptPending() {
  size_t handshakes = 0;
  for (auto& c : conns_)
    if (c->peer < 0 && !c->dead) ++handshakes;
  while (handshakes < kMaxHandshakes) {
    Fd fd;
    SockAddr from;
    if (acceptOne(listen_.get(), &fd, &from) != chorusSuccess || !fd.valid()) return;
    CHORUS_TRACE(kLogBootstrap, "bootstrap rank %d: connection from %s", rank_, from.str().c_str());
    conns_.push_back(std::make_unique<InConn>(std::move(fd), from, secret_,
                                              monotonicNs() + kHandshakeTimeoutNs));
    ++handshakes;
    // Usually the secret and hello are already there: vet at once.
    progressConn(*conns_.back());
  }
}

void SocketBootstrap::markPeer(int peer, PeerIn state, const std::string& why) {
  peerIn_[static_cast<size_t>(peer)] = state;
  peerWhy_[static_cast<size_t>(peer)] = why;
}

void SocketBootstrap::vetHello(InConn& c) {
  const Hello& h = c.hs.hello();
  const char* reason = nullptr;
  if (h.nranks != nranks_) {
    reason = "nranks differs";
  } else if (h.rank < 0 || h.rank >= nranks_) {
    reason = "rank out of range";
  } else if (h.kind == static_cast<uint16_t>(ConnKind::Ring)) {
    if (h.rank != (rank_ + nranks_ - 1) % nranks_) {
      reason = "ring connection from a rank that is not the previous one";
    } else if (ringRecv_.valid() || !ringError_.empty()) {
      reason = "second ring connection";
    } else {
      ringRecv_ = std::move(c.fd);
      c.dead = true;  // the ring reads it from now on
      return;
    }
  } else if (h.kind == static_cast<uint16_t>(ConnKind::P2p)) {
    if (h.rank == rank_) {
      reason = "p2p connection claiming this rank";
    } else if (peerIn_[static_cast<size_t>(h.rank)] == PeerIn::Open) {
      reason = "second p2p connection from the same rank";
    } else {
      c.peer = h.rank;
      markPeer(h.rank, PeerIn::Open, "");
      CHORUS_TRACE(kLogBootstrap, "bootstrap rank %d: p2p connection from rank %d", rank_, h.rank);
      return;
    }
  } else if (h.kind == static_cast<uint16_t>(ConnKind::Probe)) {
    // A liveness probe (Bootstrap::probe, chorusCommFailedRanks): accepted, then dropped.
    CHORUS_TRACE(kLogBootstrap, "bootstrap rank %d: liveness probe from rank %d", rank_, h.rank);
    c.dead = true;
    return;
  } else {
    reason = "unexpected connection kind";
  }
  CHORUS_WARN(kLogBootstrap,
              "bootstrap rank %d: dropped connection from %s (rank %d, nranks %d, kind %u): %s",
              rank_, c.from.str().c_str(), h.rank, h.nranks, static_cast<unsigned>(h.kind), reason);
  c.dead = true;
}

void SocketBootstrap::progressConn(InConn& c) {
  if (c.dead) return;
  if (c.peer < 0) {
    HandshakeReader::State st = c.hs.progress(c.fd.get());
    if (st == HandshakeReader::State::Reading) return;
    if (st == HandshakeReader::State::Failed) {
      CHORUS_WARN(kLogBootstrap, "bootstrap rank %d: dropped connection from %s: %s", rank_,
                  c.from.str().c_str(), c.hs.failure());
      c.dead = true;
      return;
    }
    vetHello(c);
    if (c.dead || c.peer < 0) return;
  }
  // A vetted p2p connection: read header, payload, repeat, until nothing is ready.
  for (;;) {
    IoStatus st;
    if (c.hdrGot < sizeof(c.hdr)) {
      st = recvSome(c.fd.get(), &c.hdr, sizeof(c.hdr), &c.hdrGot);
      if (c.hdrGot == sizeof(c.hdr)) {
        if (!checkMsgHeader(c.hdr)) {
          char why[160];
          snprintf(why, sizeof(why),
                   "rank %d sent a garbled message header (magic 0x%08x, size %llu)", c.peer,
                   c.hdr.magic, static_cast<unsigned long long>(c.hdr.size));
          CHORUS_WARN(kLogBootstrap, "bootstrap rank %d: %s; connection dropped", rank_, why);
          markPeer(c.peer, PeerIn::Broken, why);
          c.dead = true;
          return;
        }
        try {
          c.payload.resize(c.hdr.size);
        } catch (const std::bad_alloc&) {
          char why[128];
          snprintf(why, sizeof(why), "no memory for a %llu-byte message from rank %d",
                   static_cast<unsigned long long>(c.hdr.size), c.peer);
          CHORUS_WARN(kLogBootstrap, "bootstrap rank %d: %s", rank_, why);
          markPeer(c.peer, PeerIn::Broken, why);
          c.dead = true;
          return;
        }
        c.payGot = 0;
      }
    } else {
      st = IoStatus::Progress;
    }
    if (c.hdrGot == sizeof(c.hdr) && st != IoStatus::Closed && st != IoStatus::Error) {
      st = recvSome(c.fd.get(), c.payload.data(), c.payload.size(), &c.payGot);
      if (c.payGot == c.payload.size()) {
        stashBytes_ += c.payload.size();
        stash_[{c.peer, c.hdr.tag}].push_back(std::move(c.payload));
        c.payload = std::vector<uint8_t>();
        c.hdrGot = 0;
        c.payGot = 0;
        if (st != IoStatus::Closed && st != IoStatus::Error) continue;
      }
    }
    if (st == IoStatus::Closed || st == IoStatus::Error) {
      char why[128];
      bool mid = c.hdrGot > 0;
      snprintf(why, sizeof(why), "rank %d closed its connection%s", c.peer,
               mid ? " in the middle of a message" : "");
      CHORUS_INFO(kLogBootstrap, "bootstrap rank %d: %s", rank_, why);
      markPeer(c.peer, mid ? PeerIn::Broken : PeerIn::Closed, why);
      c.dead = true;
      return;
    }
    if (st == IoStatus::WouldBlock) return;
    // Progress without completing: go around; the next read says WouldBlock or completes.
  }
}

// ---------------------------------------------------------------------------------------
// Point to point

chorusResult_t SocketBootstrap::connectPeer(int peer, int64_t deadlineNs) {
  Fd& fd = sendFds_[static_cast<size_t>(peer)];
  if (fd.valid()) return chorusSuccess;
  char what[160];
  snprintf(what, sizeof(what), "rank %d at %s (p2p connection from bootstrap rank %d)", peer,
           peers_[static_cast<size_t>(peer)].str().c_str(), rank_);
  Fd s;
  CHORUS_CHECK(
      connectOnce(peers_[static_cast<size_t>(peer)], deadlineNs, abortFd_.get(), &s, what));
  Hello h = makeHello(ConnKind::P2p, rank_, nranks_);
  CHORUS_CHECK(sendHandshake(s.get(), secret_, h, deadlineNs, abortFd_.get(), what));
  fd = std::move(s);
  return chorusSuccess;
}

chorusResult_t SocketBootstrap::probe(int peer, int64_t deadlineNs) const {
  CHORUS_CHECK(checkUsable("probe"));
  if (peer < 0 || peer >= nranks_)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap probe: peer %d not in [0, %d)", peer, nranks_);
  if (peer == rank_) return chorusSuccess;
  char what[160];
  snprintf(what, sizeof(what), "liveness probe of rank %d at %s from bootstrap rank %d", peer,
           peers_[static_cast<size_t>(peer)].str().c_str(), rank_);
  Fd s;
  CHORUS_CHECK(
      connectOnce(peers_[static_cast<size_t>(peer)], deadlineNs, abortFd_.get(), &s, what));
  Hello h = makeHello(ConnKind::Probe, rank_, nranks_);
  return sendHandshake(s.get(), secret_, h, deadlineNs, abortFd_.get(), what);
}

chorusResult_t SocketBootstrap::send(int peer, int tag, const void* data, size_t bytes) {
  CHORUS_CHECK(checkUsable("send"));
  if (peer < 0 || peer >= nranks_)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap send: peer %d not in [0, %d)", peer, nranks_);
  if (data == nullptr && bytes > 0)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap send: data is NULL");
  if (bytes > kMaxMessageBytes)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap send: %zu bytes (max %llu)", bytes,
                static_cast<unsigned long long>(kMaxMessageBytes));
  if (peer == rank_) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    stash_[{peer, tag}].emplace_back(p, p + bytes);
    stashBytes_ += bytes;
    return chorusSuccess;
  }
  const int64_t deadline = callDeadline();
  CHORUS_CHECK(connectPeer(peer, deadline));
  Fd& fd = sendFds_[static_cast<size_t>(peer)];
  char what[128];
  snprintf(what, sizeof(what), "send of %zu bytes with tag %d to rank %d", bytes, tag, peer);
  MsgHeader h{kMsgMagic, tag, bytes};
  size_t hGot = 0, pGot = 0;
  chorusResult_t res = chorusSuccess;
  for (;;) {
    IoStatus st = hGot < sizeof(h) ? sendSome(fd.get(), &h, sizeof(h), &hGot) : IoStatus::Progress;
    if (hGot == sizeof(h) && st != IoStatus::Closed && st != IoStatus::Error)
      st = sendSome(fd.get(), data, bytes, &pGot);
    if (hGot == sizeof(h) && pGot == bytes) return chorusSuccess;
    if (st == IoStatus::Closed) {
      fd.reset();
      CHORUS_FAIL(chorusRemoteError,
                  "bootstrap rank %d: rank %d closed the connection during the %s", rank_, peer,
                  what);
    }
    if (st == IoStatus::Error) {
      int err = errno;
      fd.reset();
      CHORUS_FAIL(chorusSystemError, "bootstrap rank %d: %s: %s", rank_, what, strerror(err));
    }
    pollfd out{fd.get(), POLLOUT, 0};
    res = pollOnce(&out, 1, deadline, -1, what);
    if (res != chorusSuccess) {
      // A half-sent message would garble the stream: drop the connection (the peer
      // sees it close mid-message).
      if (hGot > 0) fd.reset();
      traceFailure(res, __FILE__, __LINE__, "pollOnce");
      return res;
    }
  }
}

chorusResult_t SocketBootstrap::recv(int peer, int tag, void* data, size_t bytes) {
  CHORUS_CHECK(checkUsable("recv"));
  if (peer < 0 || peer >= nranks_)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap recv: peer %d not in [0, %d)", peer, nranks_);
  if (data == nullptr && bytes > 0)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap recv: data is NULL");
  const int64_t deadline = callDeadline();
  char what[128];
  snprintf(what, sizeof(what), "a %zu-byte message with tag %d from rank %d", bytes, tag, peer);
  for (;;) {
    auto it = stash_.find({peer, tag});
    if (it != stash_.end()) {
      std::vector<uint8_t> msg = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) stash_.erase(it);
      stashBytes_ -= msg.size();
      if (msg.size() != bytes)
        CHORUS_FAIL(chorusInvalidUsage,
                    "bootstrap rank %d: rank %d sent %zu bytes with tag %d, recv expected %zu",
                    rank_, peer, msg.size(), tag, bytes);
      if (bytes) memcpy(data, msg.data(), bytes);
      return chorusSuccess;
    }
    if (peer == rank_)
      CHORUS_FAIL(chorusInvalidUsage,
                  "bootstrap rank %d: recv from itself with tag %d before any send", rank_, tag);
    PeerIn st = peerIn_[static_cast<size_t>(peer)];
    if (st == PeerIn::Closed || st == PeerIn::Broken)
      CHORUS_FAIL(chorusRemoteError, "bootstrap rank %d: waiting for %s: %s", rank_, what,
                  peerWhy_[static_cast<size_t>(peer)].c_str());
    CHORUS_CHECK(pollOnce(nullptr, 0, deadline, peer, what));
  }
}

}  // namespace chorus
