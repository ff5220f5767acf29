// bootstrap.cc — Bootstrap::init (check in with the root, build the ring) and the ring
// collectives (allGather, barrier). Point-to-point and the shared wait loop are in p2p.cc.
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "src/bootstrap/socket_bootstrap.h"
#include "src/bootstrap/uniqueid.h"
#include "src/core/checks.h"
#include "src/core/debug.h"

namespace chorus {
namespace {

constexpr int64_t kMaxCallTimeoutNs = 365ll * 24 * 3600 * 1000000000ll;

// A formatted description of what a wait is for, used in error messages.
struct What {
  char s[224];
  What(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s, sizeof(s), fmt, ap);
    va_end(ap);
  }
};

}  // namespace

chorusResult_t Bootstrap::create(int rank, int nranks, std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) CHORUS_FAIL(chorusInvalidArgument, "bootstrap init: out is NULL");
  if (nranks < 1 || nranks > kMaxRanks)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap init: nranks %d not in [1, %d]", nranks,
                kMaxRanks);
  if (rank < 0 || rank >= nranks)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap init: rank %d not in [0, %d)", rank, nranks);
  auto b = std::make_unique<SocketBootstrap>(rank, nranks);
  CHORUS_CHECK(b->open());
  *out = std::move(b);
  return chorusSuccess;
}

chorusResult_t Bootstrap::init(const chorusUniqueId& id, int rank, int nranks, int64_t deadlineNs,
                               std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) CHORUS_FAIL(chorusInvalidArgument, "bootstrap init: out is NULL");
  std::unique_ptr<Bootstrap> b;
  CHORUS_CHECK(create(rank, nranks, &b));
  CHORUS_CHECK(b->connect(id, deadlineNs));
  *out = std::move(b);
  return chorusSuccess;
}

SocketBootstrap::SocketBootstrap(int rank, int nranks) {
  rank_ = rank;
  nranks_ = nranks;
  memset(secret_, 0, sizeof(secret_));
  sendFds_.resize(static_cast<size_t>(nranks));
  peerIn_.assign(static_cast<size_t>(nranks), PeerIn::None);
  peerWhy_.resize(static_cast<size_t>(nranks));
}

SocketBootstrap::~SocketBootstrap() {
  // Name every stranger before closing: connections accepted while a bootstrap call
  // waited whose handshake never completed, and connections still in the listen backlog
  // (after init nobody serves the listener until the next bootstrap call; an unvetted
  // connection costs a backlog slot and is never read).
  for (auto& c : conns_)
    if (!c->dead && c->peer < 0)
      CHORUS_WARN(kLogBootstrap,
                  "bootstrap rank %d: dropped connection from %s: handshake "
                  "unfinished at shutdown",
                  rank_, c->from.str().c_str());
  if (!listen_.valid()) return;
  for (int i = 0; i < 1024; ++i) {
    Fd fd;
    SockAddr from;
    if (acceptOne(listen_.get(), &fd, &from) != chorusSuccess || !fd.valid()) break;
    CHORUS_WARN(kLogBootstrap,
                "bootstrap rank %d: dropped connection from %s: never vetted "
                "(arrived while no bootstrap call was waiting)",
                rank_, from.str().c_str());
  }
}

chorusResult_t SocketBootstrap::open() {
  abortFd_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!abortFd_.valid()) CHORUS_FAIL(chorusSystemError, "eventfd: %s", strerror(errno));
  return chorusSuccess;
}

chorusResult_t SocketBootstrap::connect(const chorusUniqueId& id, int64_t deadlineNs) {
  if (connectState_ != 0)
    CHORUS_FAIL(chorusInvalidUsage, "bootstrap rank %d: connect called twice", rank_);
  connectState_ = 1;
  if (aborted_.load()) CHORUS_FAIL(chorusAborted, "bootstrap rank %d: init after abort", rank_);
  SockAddr root;
  CHORUS_CHECK(decodeUniqueId(id, &root, secret_));
  CHORUS_CHECK(setup(root, deadlineNs));
  connectState_ = 2;
  return chorusSuccess;
}

chorusResult_t SocketBootstrap::setup(const SockAddr& root, int64_t deadlineNs) {
  callTimeoutNs_ = deadlineNs - monotonicNs();
  if (callTimeoutNs_ < 1000000000ll) callTimeoutNs_ = 1000000000ll;
  if (callTimeoutNs_ > kMaxCallTimeoutNs) callTimeoutNs_ = kMaxCallTimeoutNs;  // "forever"

  SockAddr local;
  CHORUS_CHECK(bootstrapInterfaceAddr(&local, nullptr));
  CHORUS_CHECK(listenOn(local, false, &listen_, &listenAddr_));

  // Check in with the root (which may not be listening yet) and get the table.
  {
    What what("the bootstrap root %s (rank %d of %d checking in)", root.str().c_str(), rank_,
              nranks_);
    Fd rootFd;
    CHORUS_CHECK(connectRetry(root, deadlineNs, abortFd_.get(), &rootFd, what.s));
    Hello h = makeHello(ConnKind::RootCheckIn, rank_, nranks_);
    h.addr = toWire(listenAddr_);
    CHORUS_CHECK(sendHandshake(rootFd.get(), secret_, h, deadlineNs, abortFd_.get(), what.s));

    What waitTable(
        "the address table from the bootstrap root %s (rank %d of %d; the root "
        "answers once every rank has checked in)",
        root.str().c_str(), rank_, nranks_);
    RootReply r;
    CHORUS_CHECK(recvAll(rootFd.get(), &r, sizeof(r), deadlineNs, abortFd_.get(), waitTable.s));
    if (r.magic != kReplyMagic || !secretEqual(r.secret, secret_))
      CHORUS_FAIL(chorusRemoteError,
                  "bootstrap rank %d: garbled reply from the root %s (not the root of this id?)",
                  rank_, root.str().c_str());
    if (r.status != kRootOk)
      CHORUS_FAIL(chorusInvalidUsage,
                  "bootstrap rank %d (nranks %d): the root %s rejected the check-in: %s "
                  "(root's nranks %d)",
                  rank_, nranks_, root.str().c_str(), rootStatusString(r.status), r.nranks);
    if (r.nranks != nranks_ || r.entryBytes != sizeof(WireAddr))
      CHORUS_FAIL(chorusRemoteError,
                  "bootstrap rank %d: root reply for nranks %d / entry %u, expected %d / %zu",
                  rank_, r.nranks, r.entryBytes, nranks_, sizeof(WireAddr));
    std::vector<WireAddr> table(static_cast<size_t>(nranks_));
    CHORUS_CHECK(recvAll(rootFd.get(), table.data(), table.size() * sizeof(WireAddr), deadlineNs,
                         abortFd_.get(), waitTable.s));
    peers_.resize(table.size());
    for (size_t i = 0; i < table.size(); ++i) {
      if (!fromWire(table[i], &peers_[i]))
        CHORUS_FAIL(chorusRemoteError, "bootstrap rank %d: root sent a bad address for rank %zu",
                    rank_, i);
    }
  }
  CHORUS_INFO(kLogBootstrap, "bootstrap rank %d/%d: listening on %s, got the table", rank_, nranks_,
              listenAddr_.str().c_str());
  if (nranks_ == 1) return chorusSuccess;

  // The ring: connect to the next rank (its listener exists: it checked in before the
  // root answered anyone), then wait for the previous rank to connect to us.
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  {
    What what("rank %d at %s (ring connection from bootstrap rank %d)", next,
              peers_[static_cast<size_t>(next)].str().c_str(), rank_);
    CHORUS_CHECK(connectOnce(peers_[static_cast<size_t>(next)], deadlineNs, abortFd_.get(),
                             &ringSend_, what.s));
    Hello h = makeHello(ConnKind::Ring, rank_, nranks_);
    CHORUS_CHECK(sendHandshake(ringSend_.get(), secret_, h, deadlineNs, abortFd_.get(), what.s));
  }
  What what("the ring connection from rank %d (bootstrap rank %d, init)", prev, rank_);
  while (!ringRecv_.valid()) CHORUS_CHECK(pollOnce(nullptr, 0, deadlineNs, -1, what.s));
  CHORUS_INFO(kLogBootstrap, "bootstrap rank %d/%d: ring ready (prev %d, next %d)", rank_, nranks_,
              prev, next);
  return chorusSuccess;
}

void SocketBootstrap::abort() {
  aborted_.store(true);
  uint64_t one = 1;
  if (abortFd_.valid()) {
    ssize_t n = ::write(abortFd_.get(), &one, sizeof(one));
    (void)n;  // EAGAIN means the counter is already non-zero: still signalled
  }
}

int64_t SocketBootstrap::callDeadline() const {
  int64_t d = deadline_.load();
  return d > 0 ? d : monotonicNs() + callTimeoutNs_;
}

chorusResult_t SocketBootstrap::checkUsable(const char* op) const {
  if (aborted_.load()) CHORUS_FAIL(chorusAborted, "bootstrap rank %d: %s after abort", rank_, op);
  if (connectState_ != 2)
    CHORUS_FAIL(chorusInvalidUsage, "bootstrap rank %d: %s before a successful init", rank_, op);
  return chorusSuccess;
}

// ---------------------------------------------------------------------------------------
// Ring

chorusResult_t SocketBootstrap::ringExchange(const void* sendBuf, void* recvBuf, size_t bytes,
                                             uint32_t tag, int64_t deadlineNs, const char* what) {
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  MsgHeader sh{kMsgMagic, static_cast<int32_t>(tag), bytes};
  MsgHeader rh{};
  size_t sHdr = 0, sPay = 0, rHdr = 0, rPay = 0;
  auto sendDone = [&] { return sHdr == sizeof(sh) && sPay == bytes; };
  auto recvDone = [&] { return rHdr == sizeof(rh) && rPay == bytes; };
  for (;;) {
    if (!sendDone()) {
      IoStatus st = sHdr < sizeof(sh) ? sendSome(ringSend_.get(), &sh, sizeof(sh), &sHdr)
                                      : IoStatus::Progress;
      if (sHdr == sizeof(sh) && st != IoStatus::Closed && st != IoStatus::Error)
        st = sendSome(ringSend_.get(), sendBuf, bytes, &sPay);
      if (st == IoStatus::Closed)
        CHORUS_FAIL(chorusRemoteError,
                    "bootstrap rank %d: rank %d closed the ring connection during %s", rank_, next,
                    what);
      if (st == IoStatus::Error)
        CHORUS_FAIL(chorusSystemError, "bootstrap rank %d: send to rank %d during %s: %s", rank_,
                    next, what, strerror(errno));
    }
    if (!recvDone()) {
      IoStatus st = IoStatus::Progress;
      if (rHdr < sizeof(rh)) {
        st = recvSome(ringRecv_.get(), &rh, sizeof(rh), &rHdr);
        if (rHdr == sizeof(rh)) {
          if (rh.magic != kMsgMagic)
            CHORUS_FAIL(chorusRemoteError,
                        "bootstrap rank %d: garbled ring header from rank %d during %s", rank_,
                        prev, what);
          if (static_cast<uint32_t>(rh.tag) != tag)
            CHORUS_FAIL(chorusInvalidUsage,
                        "bootstrap rank %d: rank %d is in collective #%u (%s), this rank in #%u "
                        "(%s): the ranks called allGather/barrier in different orders",
                        rank_, prev, static_cast<uint32_t>(rh.tag) >> 1,
                        (rh.tag & 1) ? "barrier" : "allGather", tag >> 1,
                        (tag & 1) ? "barrier" : "allGather");
          if (rh.size != bytes)
            CHORUS_FAIL(chorusInvalidUsage,
                        "bootstrap rank %d: rank %d sent %llu-byte records, this rank expects "
                        "%zu (%s)",
                        rank_, prev, static_cast<unsigned long long>(rh.size), bytes, what);
        }
      }
      if (rHdr == sizeof(rh) && st != IoStatus::Closed && st != IoStatus::Error)
        st = recvSome(ringRecv_.get(), recvBuf, bytes, &rPay);
      if (st == IoStatus::Closed && !recvDone())
        CHORUS_FAIL(chorusRemoteError,
                    "bootstrap rank %d: rank %d closed the ring connection during %s", rank_, prev,
                    what);
      if (st == IoStatus::Error)
        CHORUS_FAIL(chorusSystemError, "bootstrap rank %d: recv from rank %d during %s: %s", rank_,
                    prev, what, strerror(errno));
    }
    if (sendDone() && recvDone()) return chorusSuccess;
    pollfd extra[2] = {{sendDone() ? -1 : ringSend_.get(), POLLOUT, 0},
                       {recvDone() ? -1 : ringRecv_.get(), POLLIN, 0}};
    CHORUS_CHECK(pollOnce(extra, 2, deadlineNs, -1, what));
  }
}

chorusResult_t SocketBootstrap::ringCollective(void* data, size_t bytes, bool isBarrier) {
  const char* op = isBarrier ? "barrier" : "allGather";
  CHORUS_CHECK(checkUsable(op));
  if (!ringError_.empty())
    CHORUS_FAIL(chorusRemoteError, "bootstrap rank %d: %s on a broken ring (%s)", rank_, op,
                ringError_.c_str());
  if (nranks_ == 1) return chorusSuccess;
  const uint32_t seq = collSeq_++;
  const uint32_t tag = (seq << 1) | (isBarrier ? 1u : 0u);
  const int64_t deadline = callDeadline();
  char* base = static_cast<char*>(data);
  for (int s = 0; s < nranks_ - 1; ++s) {
    const int sendIdx = (rank_ - s + nranks_) % nranks_;
    const int recvIdx = (rank_ - s - 1 + nranks_) % nranks_;
    What what("%s #%u step %d of %d (recv rank %d's record from rank %d, send to rank %d)", op, seq,
              s + 1, nranks_ - 1, recvIdx, (rank_ + nranks_ - 1) % nranks_, (rank_ + 1) % nranks_);
    chorusResult_t res =
        ringExchange(base + static_cast<size_t>(sendIdx) * bytes,
                     base + static_cast<size_t>(recvIdx) * bytes, bytes, tag, deadline, what.s);
    if (res != chorusSuccess) {
      // The ring's byte streams are now out of step. Close them so the neighbours fail
      // promptly too instead of waiting for their deadline.
      ringError_ = threadLastError();
      ringSend_.reset();
      ringRecv_.reset();
      traceFailure(res, __FILE__, __LINE__, "ringExchange");
      return res;
    }
  }
  return chorusSuccess;
}

chorusResult_t SocketBootstrap::allGather(void* data, size_t bytes) {
  if (data == nullptr && bytes > 0)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap allGather: data is NULL");
  if (bytes > kMaxMessageBytes)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrap allGather: %zu-byte records (max %llu)", bytes,
                static_cast<unsigned long long>(kMaxMessageBytes));
  CHORUS_CHECK(ringCollective(data, bytes, false));
  return chorusSuccess;
}

chorusResult_t SocketBootstrap::barrier() {
  std::vector<uint8_t> bytes(static_cast<size_t>(nranks_), 0);
  CHORUS_CHECK(ringCollective(bytes.data(), 1, true));
  return chorusSuccess;
}

}  // namespace chorus
