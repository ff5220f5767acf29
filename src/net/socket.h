// socket.h — the small socket layer under the bootstrap and the network transports: an
// owning fd, an address, and blocking-with-deadline operations built on non-blocking
// sockets and poll().
//
// Every socket is non-blocking and close-on-exec; TCP sockets get TCP_NODELAY. Every wait
// takes an absolute CLOCK_MONOTONIC deadline (ns) and an optional abort fd (an eventfd
// that becomes readable forever once abort is requested; -1 for none) and returns
// chorusTimeout / chorusAborted / chorusRemoteError with `what` (the thing awaited, e.g.
// "allGather step 2 from rank 3"; for connects the target, address included) in the
// message. Errors are born here with CHORUS_FAIL.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "chorus.h"

namespace chorus {

/// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// An IPv4 or IPv6 socket address.
struct SockAddr {
  sockaddr_storage ss{};
  socklen_t len = 0;

  int family() const { return ss.ss_family; }
  int port() const;
  void setPort(int port);
  /// "1.2.3.4:5" or "[fe80::1%eth0]:5".
  std::string str() const;
  /// True when len matches the family (AF_INET / AF_INET6) — the check for bytes read
  /// from the network or a unique id.
  bool validFamily() const;
  /// Copies a raw sockaddr of `n` bytes; false if it is not a valid IPv4/IPv6 address.
  bool assign(const void* raw, size_t n);
};

/// Milliseconds to pass to poll() for an absolute deadline: rounded up, >= 0, capped.
int pollTimeoutMs(int64_t deadlineNs);

/// True if the abort fd (an eventfd; -1 = none) has been signalled.
bool abortSignalled(int abortFd);

/// A listening TCP socket on `bindAddr` (port 0: any free port). `reuseAddr` sets
/// SO_REUSEADDR. `bound` receives the actual address (with the chosen port).
chorusResult_t listenOn(const SockAddr& bindAddr, bool reuseAddr, Fd* out, SockAddr* bound);

/// Accepts one pending connection without blocking. Returns chorusSuccess with out
/// invalid when nothing is pending; transient errors (ECONNABORTED, EMFILE, ...) are
/// logged and also return "nothing".
chorusResult_t acceptOne(int listenFd, Fd* out, SockAddr* peer);

/// One connection attempt, waiting until the deadline for it to complete. A refused
/// connection is chorusRemoteError (the peer's listener is gone).
chorusResult_t connectOnce(const SockAddr& addr, int64_t deadlineNs, int abortFd, Fd* out,
                           const char* what);

/// Options a caller sets on each new socket before connect(): those that act on the
/// handshake or on what the kernel sets up when the connection completes.
using BeforeConnect = std::function<void(int fd)>;

/// Connects, retrying refused / unreachable attempts with a short backoff until the
/// deadline (the listener may not exist yet). `before`, if set, runs on every attempt's
/// socket before its connect().
chorusResult_t connectRetry(const SockAddr& addr, int64_t deadlineNs, int abortFd, Fd* out,
                            const char* what, const BeforeConnect& before = nullptr);

/// Sends / receives exactly n bytes. A peer that closes gives chorusRemoteError.
chorusResult_t sendAll(int fd, const void* data, size_t n, int64_t deadlineNs, int abortFd,
                       const char* what);
chorusResult_t recvAll(int fd, void* data, size_t n, int64_t deadlineNs, int abortFd,
                       const char* what);

/// Result of one non-blocking transfer attempt.
enum class IoStatus { Progress, WouldBlock, Closed, Error };
/// Sends / receives as much of [buf, buf+n) as possible without blocking; *done grows by
/// the bytes moved. On Error errno is kept.
IoStatus sendSome(int fd, const void* buf, size_t n, size_t* done);
IoStatus recvSome(int fd, void* buf, size_t n, size_t* done);

}  // namespace chorus
