// root.cc — the root thread.
//
// One thread, one poll loop, no blocking reads: the listener and every connection still
// in its handshake are polled together, so a stranger that connects and says nothing (or
// dribbles) costs one slot for at most kHandshakeTimeoutNs and never delays real ranks.
// Everything the root owns lives in its Root object, which the thread owns and destroys
// on exit (served, or deadline passed).
#include "src/bootstrap/root.h"

#include <errno.h>
#include <poll.h>

#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/uniqueid.h"
#include "src/bootstrap/wire.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/params.h"
#include "src/core/timeout.h"
#include "src/core/wait.h"
#include "src/net/netif.h"
#include "src/net/socket.h"

namespace chorus {
namespace {

// Connections in their handshake at once; more wait in the listen backlog.
constexpr size_t kMaxPending = 1024;

struct Pending {
  Fd fd;
  SockAddr peer;
  HandshakeReader reader;
  Pending(Fd f, const SockAddr& p, const uint8_t* secret, int64_t deadline)
      : fd(std::move(f)), peer(p), reader(secret, deadline) {}
};

class Root {
 public:
  Root(Fd listen, const SockAddr& addr, const uint8_t* secret, int64_t deadlineNs)
      : listen_(std::move(listen)), addr_(addr), deadline_(deadlineNs) {
    memcpy(secret_, secret, kSecretBytes);
  }
  void run();

 private:
  void acceptAll();
  void admit(Pending& p);
  void reject(Pending& p, uint32_t status, const char* detail);
  void sendTable();
  void dropUnvetted();
  RootReply makeReply(uint32_t status) const {
    RootReply r{kReplyMagic, status, nranks_, static_cast<uint32_t>(sizeof(WireAddr)), {}};
    memcpy(r.secret, secret_, kSecretBytes);
    return r;
  }
  std::string missingRanks() const;

  Fd listen_;
  SockAddr addr_;
  uint8_t secret_[kSecretBytes];
  int64_t deadline_;
  int nranks_ = -1;
  int checkedIn_ = 0;
  std::vector<Fd> rankFds_;
  std::vector<WireAddr> table_;
  std::vector<std::unique_ptr<Pending>> pending_;
};

void Root::run() {
  CHORUS_INFO(kLogBootstrap, "bootstrap root listening on %s", addr_.str().c_str());
  std::vector<pollfd> pfds;
  while (nranks_ < 0 || checkedIn_ < nranks_) {
    int64_t now = monotonicNs();
    if (now >= deadline_) {
      if (nranks_ < 0)
        CHORUS_WARN(kLogBootstrap, "bootstrap root %s: deadline passed, no rank checked in",
                    addr_.str().c_str());
      else
        CHORUS_WARN(kLogBootstrap,
                    "bootstrap root %s: deadline passed with %d of %d ranks checked in; "
                    "missing ranks %s",
                    addr_.str().c_str(), checkedIn_, nranks_, missingRanks().c_str());
      dropUnvetted();
      return;
    }
    // Drop connections that did not finish their handshake in time.
    int64_t wake = deadline_;
    for (size_t i = 0; i < pending_.size();) {
      Pending& p = *pending_[i];
      if (p.reader.deadline() <= now) {
        CHORUS_WARN(kLogBootstrap,
                    "bootstrap root: dropped connection from %s: no secret and hello within "
                    "%lld ms",
                    p.peer.str().c_str(), static_cast<long long>(kHandshakeTimeoutNs / 1000000));
        pending_.erase(pending_.begin() + static_cast<long>(i));
        continue;
      }
      if (p.reader.deadline() < wake) wake = p.reader.deadline();
      ++i;
    }

    pfds.clear();
    pfds.push_back({pending_.size() < kMaxPending ? listen_.get() : -1, POLLIN, 0});
    for (auto& p : pending_) pfds.push_back({p->fd.get(), POLLIN, 0});
    int n = ::poll(pfds.data(), pfds.size(), pollTimeoutMs(wake));
    if (n < 0) {
      if (errno == EINTR) continue;
      CHORUS_WARN(kLogBootstrap, "bootstrap root: poll: %s; exiting", strerror(errno));
      return;
    }
    if (n == 0) continue;

    // Handshakes first (indices match pfds[1..]), then new connections.
    std::vector<std::unique_ptr<Pending>> keep;
    keep.reserve(pending_.size());
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = *pending_[i];
      if (pfds[i + 1].revents == 0) {
        keep.push_back(std::move(pending_[i]));
        continue;
      }
      HandshakeReader::State st = p.reader.progress(p.fd.get());
      if (st == HandshakeReader::State::Reading) {
        keep.push_back(std::move(pending_[i]));
      } else if (st == HandshakeReader::State::Failed) {
        CHORUS_WARN(kLogBootstrap, "bootstrap root: dropped connection from %s: %s",
                    p.peer.str().c_str(), p.reader.failure());
      } else {
        admit(p);
      }
    }
    pending_.swap(keep);
    if (pfds[0].revents) acceptAll();
  }
  dropUnvetted();
  sendTable();
}

void Root::dropUnvetted() {
  // Every stranger is named: these connected but had not finished their handshake when
  // the root stopped serving.
  for (auto& p : pending_)
    CHORUS_WARN(kLogBootstrap,
                "bootstrap root %s: dropped connection from %s: handshake unfinished when the "
                "root stopped serving",
                addr_.str().c_str(), p->peer.str().c_str());
  pending_.clear();
}

void Root::acceptAll() {
  while (pending_.size() < kMaxPending) {
    Fd fd;
    SockAddr peer;
    if (acceptOne(listen_.get(), &fd, &peer) != chorusSuccess || !fd.valid()) return;
    CHORUS_TRACE(kLogBootstrap, "bootstrap root: connection from %s", peer.str().c_str());
    int64_t hd = monotonicNs() + kHandshakeTimeoutNs;
    pending_.push_back(
        std::make_unique<Pending>(std::move(fd), peer, secret_, hd < deadline_ ? hd : deadline_));
  }
}

void Root::reject(Pending& p, uint32_t status, const char* detail) {
  CHORUS_WARN(kLogBootstrap, "bootstrap root: rejected check-in from %s (rank %d, nranks %d): %s%s",
              p.peer.str().c_str(), p.reader.hello().rank, p.reader.hello().nranks,
              rootStatusString(status), detail);
  RootReply r = makeReply(status);
  size_t done = 0;
  sendSome(p.fd.get(), &r, sizeof(r), &done);  // best effort; the fd closes right after
}

void Root::admit(Pending& p) {
  const Hello& h = p.reader.hello();
  SockAddr listenAddr;
  const char* detail = "";
  const uint32_t status = vetRootHello(h, nranks_, &listenAddr, &detail);
  if (status != kRootOk) return reject(p, status, detail);
  if (nranks_ < 0) {
    nranks_ = h.nranks;
    rankFds_.resize(static_cast<size_t>(nranks_));
    table_.resize(static_cast<size_t>(nranks_));
    memset(table_.data(), 0, table_.size() * sizeof(WireAddr));
  }
  Fd& slot = rankFds_[static_cast<size_t>(h.rank)];
  if (slot.valid()) {
    // A rank whose earlier check-in connection has closed (its init gave up) may retry.
    pollfd q{slot.get(), POLLRDHUP, 0};
    if (::poll(&q, 1, 0) > 0 && (q.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      CHORUS_INFO(kLogBootstrap, "bootstrap root: rank %d checks in again from %s", h.rank,
                  p.peer.str().c_str());
      slot.reset();
      --checkedIn_;
    } else {
      return reject(p, kRootDuplicateRank, "");
    }
  }
  rankFds_[static_cast<size_t>(h.rank)] = std::move(p.fd);
  table_[static_cast<size_t>(h.rank)] = h.addr;
  ++checkedIn_;
  CHORUS_TRACE(kLogBootstrap, "bootstrap root: rank %d/%d checked in from %s, listens on %s",
               h.rank, h.nranks, p.peer.str().c_str(), listenAddr.str().c_str());
}

void Root::sendTable() {
  std::vector<uint8_t> buf(sizeof(RootReply) + table_.size() * sizeof(WireAddr));
  RootReply r = makeReply(kRootOk);
  memcpy(buf.data(), &r, sizeof(r));
  memcpy(buf.data() + sizeof(r), table_.data(), table_.size() * sizeof(WireAddr));
  int sent = 0;
  for (int i = 0; i < nranks_; ++i) {
    char what[64];
    snprintf(what, sizeof(what), "the address table to rank %d", i);
    if (sendAll(rankFds_[static_cast<size_t>(i)].get(), buf.data(), buf.size(), deadline_, -1,
                what) == chorusSuccess)
      ++sent;
    rankFds_[static_cast<size_t>(i)].reset();
  }
  CHORUS_INFO(kLogBootstrap, "bootstrap root %s: served %d of %d ranks, exiting",
              addr_.str().c_str(), sent, nranks_);
}

std::string Root::missingRanks() const {
  std::string s;
  int shown = 0;
  for (int i = 0; i < nranks_; ++i) {
    if (rankFds_[static_cast<size_t>(i)].valid()) continue;
    if (shown == 16) {
      s += ",...";
      break;
    }
    if (shown++) s += ",";
    s += std::to_string(i);
  }
  return s;
}

}  // namespace

int64_t monotonicNs() { return nowNs(); }

chorusResult_t bootstrapInterfaceAddr(SockAddr* out, std::string* ifname) {
  std::string name;
  CHORUS_CHECK(findInterfaceAddr(paramString(Param::SocketIfname), out, &name));
  CHORUS_TRACE(kLogBootstrap, "bootstrap interface %s %s", name.c_str(), out->str().c_str());
  if (ifname) *ifname = name;
  return chorusSuccess;
}

int64_t bootstrapDefaultDeadlineNs() {
  int64_t s = effectiveTimeoutS();
  if (s > 365ll * 24 * 3600) s = 365ll * 24 * 3600;
  return monotonicNs() + s * 1000000000ll;
}

chorusResult_t bootstrapStartRoot(const char* host, int port, const uint8_t* secret,
                                  int64_t deadlineNs, chorusUniqueId* id) {
  if (id == nullptr) CHORUS_FAIL(chorusInvalidArgument, "unique id pointer is NULL");
  if (port < 0 || port > 65535) CHORUS_FAIL(chorusInvalidArgument, "port %d out of range", port);
  uint8_t key[kSecretBytes];
  if (secret) {
    memcpy(key, secret, kSecretBytes);
  } else {
    CHORUS_CHECK(randomSecret(key));
  }

  SockAddr bindAddr, idAddr;
  if (host == nullptr || host[0] == '\0') {
    CHORUS_CHECK(bootstrapInterfaceAddr(&idAddr, nullptr));
    bindAddr = idAddr;
    if (host != nullptr) {  // "": the wildcard of the interface's family
      SockAddr any;
      CHORUS_CHECK(resolveHost(idAddr.family() == AF_INET6 ? "::" : "0.0.0.0", 0, true, &any));
      bindAddr = any;
    }
  } else {
    CHORUS_CHECK(resolveHost(host, 0, true, &bindAddr));
    idAddr = bindAddr;
  }
  bindAddr.setPort(port);

  Fd listen;
  SockAddr bound;
  CHORUS_CHECK(listenOn(bindAddr, port != 0, &listen, &bound));
  idAddr.setPort(bound.port());
  CHORUS_CHECK(encodeUniqueId(idAddr, key, id));

  auto root = std::make_unique<Root>(std::move(listen), bound, key, deadlineNs);
  try {
    std::thread([r = std::move(root)]() { r->run(); }).detach();
  } catch (const std::system_error& e) {
    CHORUS_FAIL(chorusSystemError, "cannot start the bootstrap root thread: %s", e.what());
  }
  return chorusSuccess;
}

chorusResult_t bootstrapCreateRoot(chorusUniqueId* id) {
  CHORUS_CHECK(bootstrapStartRoot(nullptr, 0, nullptr, bootstrapDefaultDeadlineNs(), id));
  return chorusSuccess;
}

chorusResult_t bootstrapCreateRootAt(const char* host, int port, const uint8_t secret[16],
                                     chorusUniqueId* id) {
  if (host == nullptr || secret == nullptr)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrapCreateRootAt: NULL %s", host ? "secret" : "host");
  CHORUS_CHECK(bootstrapStartRoot(host, port, secret, bootstrapDefaultDeadlineNs(), id));
  return chorusSuccess;
}

}  // namespace chorus
