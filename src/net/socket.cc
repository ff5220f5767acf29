#include "src/net/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"

namespace chorus {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

// ---------------------------------------------------------------------------------------
// SockAddr

int SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
  return 0;
}

void SockAddr::setPort(int port) {
  if (family() == AF_INET)
    reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(static_cast<uint16_t>(port));
  else if (family() == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(static_cast<uint16_t>(port));
}

std::string SockAddr::str() const {
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "?";
  char out[sizeof(host) + 16];
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, host, sizeof(host));
    snprintf(out, sizeof(out), "%s:%d", host, port());
  } else if (family() == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a6->sin6_addr, host, INET6_ADDRSTRLEN);
    char ifname[IF_NAMESIZE] = {0};
    if (a6->sin6_scope_id != 0 && if_indextoname(a6->sin6_scope_id, ifname)) {
      size_t l = strlen(host);
      snprintf(host + l, sizeof(host) - l, "%%%s", ifname);
    }
    snprintf(out, sizeof(out), "[%s]:%d", host, port());
  } else {
    snprintf(out, sizeof(out), "<family %d>", family());
  }
  return out;
}

bool SockAddr::validFamily() const {
  return (family() == AF_INET && len == sizeof(sockaddr_in)) ||
         (family() == AF_INET6 && len == sizeof(sockaddr_in6));
}

bool SockAddr::assign(const void* raw, size_t n) {
  if (n < sizeof(sa_family_t) || n > sizeof(ss)) return false;
  SockAddr a;
  memcpy(&a.ss, raw, n);
  a.len = static_cast<socklen_t>(n);
  if (!a.validFamily()) return false;
  *this = a;
  return true;
}

// ---------------------------------------------------------------------------------------
// Waiting

int pollTimeoutMs(int64_t deadlineNs) {
  int64_t left = deadlineNs - nowNs();
  if (left <= 0) return 0;
  int64_t ms = (left + 999999) / 1000000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

bool abortSignalled(int abortFd) {
  if (abortFd < 0) return false;
  pollfd p{abortFd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

namespace {

// Waits until fd is ready for `events`, the deadline passes or abortFd fires.
chorusResult_t waitFd(int fd, short events, int64_t deadlineNs, int abortFd, const char* what) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {abortFd, POLLIN, 0}};
    int n = ::poll(p, abortFd >= 0 ? 2 : 1, pollTimeoutMs(deadlineNs));
    if (n < 0) {
      if (errno == EINTR) continue;
      CHORUS_FAIL(chorusSystemError, "poll while waiting for %s: %s", what, strerror(errno));
    }
    if (abortFd >= 0 && (p[1].revents & POLLIN))
      CHORUS_FAIL(chorusAborted, "aborted while waiting for %s", what);
    if (p[0].revents) return chorusSuccess;  // ready, or an error the caller's I/O will see
    if (nowNs() >= deadlineNs) CHORUS_FAIL(chorusTimeout, "timed out waiting for %s", what);
  }
}

void setNoDelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    CHORUS_INFO(kLogBootstrap, "TCP_NODELAY: %s", strerror(errno));
}

bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
         err == ECONNRESET || err == ECONNABORTED || err == EAGAIN || err == EADDRNOTAVAIL;
}

// One attempt. Returns chorusSuccess with *err = 0 when connected; chorusSuccess with
// *err set when the attempt failed with errno *err (caller decides); anything else is final.
chorusResult_t tryConnect(const SockAddr& addr, int64_t deadlineNs, int abortFd, Fd* out,
                          const char* what, int* err, const BeforeConnect& before = nullptr) {
  *err = 0;
  Fd s(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) CHORUS_FAIL(chorusSystemError, "socket() for %s: %s", what, strerror(errno));
  setNoDelay(s.get());
  if (before) before(s.get());
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) {
      *err = errno;
      return chorusSuccess;
    }
    CHORUS_CHECK(waitFd(s.get(), POLLOUT, deadlineNs, abortFd, what));
    int soerr = 0;
    socklen_t l = sizeof(soerr);
    if (getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &soerr, &l) != 0) soerr = errno;
    if (soerr != 0) {
      *err = soerr;
      return chorusSuccess;
    }
  }
  // Retrying against a local port nobody listens on yet can, rarely, end in a TCP
  // self-connection (the kernel picked the destination port as our source port). It
  // would also steal the port from the listener we wait for: treat it as refused.
  SockAddr self, peer;
  self.len = peer.len = sizeof(self.ss);
  if (getsockname(s.get(), reinterpret_cast<sockaddr*>(&self.ss), &self.len) == 0 &&
      getpeername(s.get(), reinterpret_cast<sockaddr*>(&peer.ss), &peer.len) == 0 &&
      self.len == peer.len && memcmp(&self.ss, &peer.ss, self.len) == 0) {
    *err = ECONNREFUSED;
    return chorusSuccess;
  }
  *out = std::move(s);
  return chorusSuccess;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Listen / accept / connect

chorusResult_t listenOn(const SockAddr& bindAddr, bool reuseAddr, Fd* out, SockAddr* bound) {
  if (!bindAddr.validFamily())
    CHORUS_FAIL(chorusInvalidArgument, "listen address has family %d", bindAddr.family());
  Fd s(::socket(bindAddr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) CHORUS_FAIL(chorusSystemError, "socket(): %s", strerror(errno));
  if (reuseAddr) {
    int one = 1;
    if (setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
      CHORUS_FAIL(chorusSystemError, "SO_REUSEADDR: %s", strerror(errno));
  }
  if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&bindAddr.ss), bindAddr.len) != 0)
    CHORUS_FAIL(chorusSystemError, "bind %s: %s", bindAddr.str().c_str(), strerror(errno));
  if (::listen(s.get(), SOMAXCONN) != 0)
    CHORUS_FAIL(chorusSystemError, "listen %s: %s", bindAddr.str().c_str(), strerror(errno));
  SockAddr b;
  b.len = sizeof(b.ss);
  if (getsockname(s.get(), reinterpret_cast<sockaddr*>(&b.ss), &b.len) != 0)
    CHORUS_FAIL(chorusSystemError, "getsockname: %s", strerror(errno));
  if (bound) *bound = b;
  *out = std::move(s);
  return chorusSuccess;
}

chorusResult_t acceptOne(int listenFd, Fd* out, SockAddr* peer) {
  SockAddr a;
  a.len = sizeof(a.ss);
  int fd =
      ::accept4(listenFd, reinterpret_cast<sockaddr*>(&a.ss), &a.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      CHORUS_WARN(kLogBootstrap, "accept: %s (ignored)", strerror(errno));
    out->reset();
    return chorusSuccess;
  }
  out->reset(fd);
  setNoDelay(fd);
  if (peer) *peer = a;
  return chorusSuccess;
}

chorusResult_t connectOnce(const SockAddr& addr, int64_t deadlineNs, int abortFd, Fd* out,
                           const char* what) {
  int err = 0;
  CHORUS_CHECK(tryConnect(addr, deadlineNs, abortFd, out, what, &err));
  if (err != 0) CHORUS_FAIL(chorusRemoteError, "cannot connect to %s: %s", what, strerror(err));
  return chorusSuccess;
}

chorusResult_t connectRetry(const SockAddr& addr, int64_t deadlineNs, int abortFd, Fd* out,
                            const char* what, const BeforeConnect& before) {
  int64_t backoffNs = 1000000;  // 1 ms, doubling to 100 ms
  int attempts = 0;
  for (;;) {
    int err = 0;
    CHORUS_CHECK(tryConnect(addr, deadlineNs, abortFd, out, what, &err, before));
    if (err == 0) return chorusSuccess;
    ++attempts;
    if (!retryableConnectError(err))
      CHORUS_FAIL(chorusSystemError, "cannot connect to %s: %s", what, strerror(err));
    int64_t now = nowNs();
    if (now >= deadlineNs)
      CHORUS_FAIL(chorusTimeout, "timed out connecting to %s after %d attempts: %s", what, attempts,
                  strerror(err));
    if (attempts == 1)
      CHORUS_INFO(kLogBootstrap, "connect to %s: %s, retrying", what, strerror(err));
    // Sleep on the abort fd so abort stays prompt.
    int64_t wake = now + backoffNs < deadlineNs ? now + backoffNs : deadlineNs;
    pollfd p{abortFd, POLLIN, 0};
    int n = ::poll(&p, abortFd >= 0 ? 1 : 0, pollTimeoutMs(wake));
    if (n > 0 && (p.revents & POLLIN))
      CHORUS_FAIL(chorusAborted, "aborted while connecting to %s", what);
    backoffNs = backoffNs * 2 > 100000000 ? 100000000 : backoffNs * 2;
  }
}

// ---------------------------------------------------------------------------------------
// Data

IoStatus sendSome(int fd, const void* buf, size_t n, size_t* done) {
  size_t start = *done;
  while (*done < n) {
    ssize_t k = ::send(fd, static_cast<const char*>(buf) + *done, n - *done, MSG_NOSIGNAL);
    if (k > 0) {
      *done += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return *done > start ? IoStatus::Progress : IoStatus::WouldBlock;
    if (k < 0 && (errno == EPIPE || errno == ECONNRESET)) return IoStatus::Closed;
    return IoStatus::Error;
  }
  return IoStatus::Progress;
}

IoStatus recvSome(int fd, void* buf, size_t n, size_t* done) {
  size_t start = *done;
  while (*done < n) {
    ssize_t k = ::recv(fd, static_cast<char*>(buf) + *done, n - *done, 0);
    if (k > 0) {
      *done += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return IoStatus::Closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return *done > start ? IoStatus::Progress : IoStatus::WouldBlock;
    if (errno == ECONNRESET) return IoStatus::Closed;
    return IoStatus::Error;
  }
  return IoStatus::Progress;
}

chorusResult_t sendAll(int fd, const void* data, size_t n, int64_t deadlineNs, int abortFd,
                       const char* what) {
  size_t done = 0;
  for (;;) {
    if (abortSignalled(abortFd)) CHORUS_FAIL(chorusAborted, "aborted while sending %s", what);
    IoStatus st = sendSome(fd, data, n, &done);
    if (done == n) return chorusSuccess;
    if (st == IoStatus::Closed)
      CHORUS_FAIL(chorusRemoteError, "connection closed by peer while sending %s", what);
    if (st == IoStatus::Error) CHORUS_FAIL(chorusSystemError, "send %s: %s", what, strerror(errno));
    CHORUS_CHECK(waitFd(fd, POLLOUT, deadlineNs, abortFd, what));
  }
}

chorusResult_t recvAll(int fd, void* data, size_t n, int64_t deadlineNs, int abortFd,
                       const char* what) {
  size_t done = 0;
  for (;;) {
    if (abortSignalled(abortFd)) CHORUS_FAIL(chorusAborted, "aborted while waiting for %s", what);
    IoStatus st = recvSome(fd, data, n, &done);
    if (done == n) return chorusSuccess;
    if (st == IoStatus::Closed)
      CHORUS_FAIL(chorusRemoteError,
                  "connection closed by peer while waiting for %s (%zu of %zu bytes)", what, done,
                  n);
    if (st == IoStatus::Error) CHORUS_FAIL(chorusSystemError, "recv %s: %s", what, strerror(errno));
    CHORUS_CHECK(waitFd(fd, POLLIN, deadlineNs, abortFd, what));
  }
}

}  // namespace chorus
