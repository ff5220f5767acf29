#include "transports/tcp/transport.h"

#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"
#include "src/net/netif.h"
#include "transports/tcp/connection.h"
#include "transports/tcp/socket_util.h"

namespace chorus {
namespace tcp {

std::unique_ptr<Transport> createTcpTransport(const TransportContext& ctx) {
  return std::make_unique<TcpTransport>(ctx.tcp);
}

TcpTransport::~TcpTransport() {
  if (proxy_) proxy_->stop(!aborted_.load(), nowNs() + opt_.timeoutNs);
  proxy_.reset();
}

bool TcpTransport::infoAddress(const void* info, SockAddr* out) {
  ConnectInfo ci;
  std::memcpy(&ci, info, sizeof(ci));
  if (ci.magic != kInfoMagic || ci.addrLen > sizeof(ci.addr)) return false;
  return out->assign(ci.addr, ci.addrLen);
}

chorusResult_t TcpTransport::setup(const TransportContext& ctx, void* info) {
  rank_ = ctx.rank;
  if (opt_.nsocks < 1 || opt_.nsocks > kMaxSocks)
    CHORUS_FAIL(chorusInvalidArgument, "CHORUS_NSOCKS=%d outside [1, %d]", opt_.nsocks, kMaxSocks);
  slotBytes_ = opt_.slotBytes;
  if (slotBytes_ == 0) {
    const int64_t chunk = opt_.chunkBytes;
    if (chunk < 4096 || chunk > (1ll << 30))
      CHORUS_FAIL(chorusInvalidArgument, "CHORUS_TCP_CHUNKSIZE=%lld outside [4 KiB, 1 GiB]",
                  static_cast<long long>(chunk));
    // Algorithms cut pieces to the communicator's slot size: ours must hold one.
    slotBytes_ = std::max(static_cast<size_t>(chunk), ctx.slotBytes);
  }
  depth_ = opt_.depth;
  if (depth_ <= 0)
    depth_ = static_cast<int>(
        std::clamp<int64_t>(opt_.buffBytes / static_cast<int64_t>(slotBytes_), 2, 16));
  llMax_ = std::max<size_t>(ctx.llBytes, 64);  // what shm offers: same algorithm choices

  SockAddr bindAddr = opt_.bindAddr;
  std::string ifname = "(given)";
  if (bindAddr.family() == 0) CHORUS_CHECK(findInterfaceAddr(opt_.ifname, &bindAddr, &ifname));
  bindAddr.setPort(0);
  Fd listener;
  SockAddr bound;
  CHORUS_CHECK(listenOn(bindAddr, false, &listener, &bound));
  // Accepted sockets inherit the buffer sizes, and the window scale is chosen from them
  // when the handshake completes, before we could set anything on the accepted socket.
  // The congestion control is tried once here: a name the kernel refuses (not built, or
  // not allowed for this user) is dropped for every socket, with one line in the log.
  if (!opt_.congestion.empty() && !setCongestion(listener.get(), opt_.congestion)) {
    CHORUS_INFO(kLogNet, "CHORUS_TCP_CONGESTION=%s refused (%s): sockets keep the system's",
                opt_.congestion.c_str(), strerror(errno));
    opt_.congestion.clear();
  }
  tuneSocket(listener.get(), opt_.sockBuf, opt_.congestion);
  uint64_t token = 0;
  CHORUS_CHECK(randomToken(&token));

  send_.clear();
  recv_.clear();
  send_.resize(static_cast<size_t>(ctx.nranks));
  recv_.resize(static_cast<size_t>(ctx.nranks));
  proxy_ = std::make_unique<Proxy>(ctx.rank, token);
  std::vector<RecvChannel*> byRank(static_cast<size_t>(ctx.nranks), nullptr);
  for (int r = 0; r < ctx.nranks; ++r) {
    if (r == ctx.rank) continue;
    recv_[static_cast<size_t>(r)] = std::make_unique<RecvChannel>(proxy_.get(), proxy_->bell(), r);
    recv_[static_cast<size_t>(r)]->commLinks = ctx.linkFailure;
    byRank[static_cast<size_t>(r)] = recv_[static_cast<size_t>(r)].get();
  }
  CHORUS_CHECK(proxy_->start(std::move(listener), std::move(byRank)));

  ConnectInfo ci{};
  ci.magic = kInfoMagic;
  ci.token = token;
  ci.rank = ctx.rank;
  ci.nsocks = opt_.nsocks;
  ci.slotBytes = slotBytes_;
  ci.depth = depth_;
  ci.addrLen = bound.len;
  ci.readsPairLane = opt_.pairLane ? 1 : 0;
  std::memcpy(ci.addr, &bound.ss, std::min<size_t>(bound.len, sizeof(ci.addr)));
  std::memcpy(info, &ci, sizeof(ci));
  CHORUS_INFO(kLogNet, "TCP listening on %s (%s): %d sockets per peer, %d slots x %zu B",
              bound.str().c_str(), ifname.c_str(), opt_.nsocks, depth_, slotBytes_);
  return chorusSuccess;
}

chorusResult_t TcpTransport::connect(const TransportContext& ctx, int peer, const void* peerInfo,
                                     std::unique_ptr<SendConn>* send,
                                     std::unique_ptr<RecvConn>* recv) {
  if (!proxy_) CHORUS_FAIL(chorusInternalError, "tcp connect before setup");
  ConnectInfo ci;
  std::memcpy(&ci, peerInfo, sizeof(ci));
  SockAddr addr;
  if (ci.magic != kInfoMagic || ci.rank != peer || ci.addrLen > sizeof(ci.addr) ||
      !addr.assign(ci.addr, ci.addrLen) || ci.nsocks < 1 || ci.nsocks > kMaxSocks)
    CHORUS_FAIL(chorusInternalError, "rank %d published malformed TCP connect info", peer);
  if (ci.slotBytes != slotBytes_ || ci.depth != depth_)
    CHORUS_FAIL(chorusInvalidUsage,
                "rank %d uses %d TCP slots of %llu bytes, this rank %d of %zu: ranks disagree "
                "on CHORUS_CHUNKSIZE / CHORUS_TCP_CHUNKSIZE / CHORUS_BUFFSIZE",
                peer, ci.depth, static_cast<unsigned long long>(ci.slotBytes), depth_, slotBytes_);
  char desc[128];
  snprintf(desc, sizeof(desc), "rank %d (%s)", peer, addr.str().c_str());
  const int64_t deadline = nowNs() + opt_.timeoutNs;

  // Send direction: our sockets to the peer's listener.
  auto sc = std::make_unique<SendChannel>(proxy_.get(), proxy_->bell(), peer);
  sc->peerDesc = desc;
  sc->commLinks = ctx.linkFailure;
  if (!sc->ring.allocate(slotBytes_, depth_))
    CHORUS_FAIL(chorusSystemError, "cannot allocate TCP send slots (%d x %zu B) for rank %d",
                depth_, slotBytes_, peer);
  populateRing(&sc->ring);
  sc->stripesLeft.assign(static_cast<size_t>(depth_), 0);
  sc->minStripe = opt_.minStripe;
  sc->sendFromUser = opt_.sendFromUser;
  sc->socks.resize(static_cast<size_t>(opt_.nsocks));
  char what[192];
  snprintf(what, sizeof(what), "the TCP listener of %s", desc);
  for (int i = 0; i < opt_.nsocks; ++i) {
    Hello h{kHelloMagic, ci.token, ctx.rank, i};
    CHORUS_CHECK(openAuthenticated(addr, h, opt_.sockBuf, opt_.congestion, deadline, what,
                                   &sc->socks[static_cast<size_t>(i)].fd));
  }
  SendChannel* s = sc.get();
  s->socks.reserve(static_cast<size_t>(opt_.nsocks) + 1);  // the pair lane may follow
  s->peerReadsLane = ci.readsPairLane == 1;
  send_[static_cast<size_t>(peer)] = std::move(sc);
  proxy_->activate(s);

  // Receive direction: the peer's sockets arrive (or have arrived) through our listener.
  RecvChannel* r = recv_[static_cast<size_t>(peer)].get();
  r->peerDesc = desc;
  if (!r->ring.allocate(slotBytes_, depth_))
    CHORUS_FAIL(chorusSystemError, "cannot allocate TCP receive slots (%d x %zu B) for rank %d",
                depth_, slotBytes_, peer);
  populateRing(&r->ring);
  r->slotState.assign(static_cast<size_t>(depth_), RecvChannel::SlotState{});
  r->expected = ci.nsocks;
  r->busyPollNs = opt_.busyPollNs;
  r->pollMaxBytes = static_cast<size_t>(std::max<int64_t>(opt_.pollMaxBytes, 0));
  if (opt_.pairLane && ctx.rank < peer) {
    // The lower rank of the pair: the higher one writes its small messages on our socket
    // 0 (finishSetup there), so we read that socket too, through a descriptor of its own.
    std::lock_guard<std::mutex> g(r->driving);  // the progress thread may be attaching
    RecvChannel::Sock& lane = r->socks[kPairLane];
    if (!dupSocket(s->socks[0].fd, &lane.fd))
      CHORUS_FAIL(chorusSystemError, "cannot share the TCP socket to %s: %s", desc,
                  strerror(errno));
    lane.from = addr;
  }
  proxy_->activate(r);

  *send = std::make_unique<TcpSendConn>(s, llMax_);
  *recv = std::make_unique<TcpRecvConn>(r, llMax_);
  return chorusSuccess;
}

void TcpTransport::finishSetup() {
  if (!proxy_) return;
  // Every peer has finished connect() (init runs a barrier first), so its sockets are at
  // most in flight: this normally returns at once.
  const int64_t deadline = nowNs() + opt_.timeoutNs;
  for (auto& c : recv_) {
    if (!c || c->expected == 0) continue;
    while (c->attached.load(std::memory_order_acquire) < c->expected && nowNs() < deadline &&
           !aborted_.load())
      usleep(200);
    const int got = c->attached.load(std::memory_order_acquire);
    if (got < c->expected) {
      char msg[256];
      snprintf(msg, sizeof(msg), "%s opened only %d of its %d TCP connections to this rank",
               c->peerDesc.c_str(), got, c->expected);
      CHORUS_WARN(kLogNet, "%s: transfers from it will fail", msg);
      c->markFailed(chorusRemoteError, msg);
    }
  }
  if (opt_.pairLane) openPairLanes();
  proxy_->closeListener();
}

// The higher rank of each pair sends its messages that fit one segment on the lower rank's
// socket 0, which carries the lower rank's messages the other way: each small message then
// carries the ACK of the last one that came the other way, where on a socket of its own
// every message draws a pure ACK from the receiver (measured, 4 namespaced hosts x 1 rank
// on 2 CPUs, 8 B all-reduce by recursive doubling: 3.7 TCP segments per call per host, 2.2
// for a library with one socket per pair; docs/PERF.md#perf-both-directions-one-socket).
// Larger messages keep the sender's own sockets: two ranks exchanging messages of two or
// more segments on one socket took 13-14 us a round against 11 on two (2 KiB, raw
// sockets, the same hosts).
void TcpTransport::openPairLanes() {
  for (size_t p = 0; p < static_cast<size_t>(rank_) && p < send_.size(); ++p) {
    SendChannel* s = send_[p].get();
    RecvChannel* r = recv_[p].get();
    // Both ends must want it: the lower rank reads the lane only if its own setting says so.
    if (!s || !r || !r->healthy() || !s->peerReadsLane) continue;
    std::lock_guard<std::mutex> gr(r->driving);  // socks[0] stays put while we copy it
    if (!r->socks[0].fd.valid()) continue;
    int mss = 0;
    socklen_t len = sizeof(mss);
    if (getsockopt(r->socks[0].fd.get(), IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0 ||
        mss <= static_cast<int>(sizeof(StripeHeader)))
      continue;
    Fd fd;
    if (!dupSocket(r->socks[0].fd, &fd)) {
      CHORUS_INFO(kLogNet, "no pair lane to %s: %s", s->peerDesc.c_str(), strerror(errno));
      continue;
    }
    std::lock_guard<std::mutex> gs(s->driving);
    // Only before the first message: every message's route must stay what it was posted
    // with (init connects before anything is sent; this is a guard, not a path).
    if (s->head.load(std::memory_order_acquire) != 0) continue;
    SendChannel::Sock lane;
    lane.fd = std::move(fd);
    // An active channel's sockets are watched already: this one now. Otherwise activation
    // watches it with the others (runCommands looks under the same lock).
    if (s->active.load(std::memory_order_acquire)) {
      if (!proxy_->watchSend(s, lane.fd.get())) continue;
      lane.watched = true;
    }
    s->socks.push_back(std::move(lane));  // capacity reserved in connect: no reallocation
    s->laneMaxBytes = static_cast<size_t>(mss) - sizeof(StripeHeader);
    if (opt_.pairLaneMaxBytes > 0)
      s->laneMaxBytes = std::min(s->laneMaxBytes, opt_.pairLaneMaxBytes);
    ++pairLanes_;
    s->lane = static_cast<int>(s->socks.size()) - 1;
    CHORUS_TRACE(kLogNet, "pair lane to %s: messages up to %zu B", s->peerDesc.c_str(),
                 s->laneMaxBytes);
  }
}

void TcpTransport::wakeAll() {
  aborted_.store(true);
  if (proxy_) wakeAllWaiters(proxy_->bell());
}

}  // namespace tcp
}  // namespace chorus
