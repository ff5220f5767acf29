#include "transports/tcp/socket_util.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <sys/socket.h>

#include <cstring>

#include "src/core/checks.h"
#include "src/net/random.h"
#include "src/core/debug.h"

namespace chorus {
namespace tcp {

bool setCongestion(int fd, const std::string& name) {
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                    static_cast<socklen_t>(name.size())) == 0;
}

void tuneSocket(int fd, int64_t bufBytes, const std::string& congestion) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    CHORUS_INFO(kLogNet, "TCP_NODELAY: %s", strerror(errno));
  if (!congestion.empty() && !setCongestion(fd, congestion))
    CHORUS_INFO(kLogNet, "TCP_CONGESTION %s: %s", congestion.c_str(), strerror(errno));
  if (bufBytes <= 0) return;
  int b = bufBytes > (1 << 30) ? (1 << 30) : static_cast<int>(bufBytes);
  // The kernel caps these at net.core.{w,r}mem_max; not fatal, only slower.
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b)) != 0)
    CHORUS_INFO(kLogNet, "SO_SNDBUF %d: %s", b, strerror(errno));
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b)) != 0)
    CHORUS_INFO(kLogNet, "SO_RCVBUF %d: %s", b, strerror(errno));
}

chorusResult_t openAuthenticated(const SockAddr& to, const Hello& hello, int64_t bufBytes,
                                 const std::string& congestion, int64_t deadlineNs,
                                 const char* what, Fd* out) {
  Fd fd;
  // Tuned before connect(): the congestion control the handshake completes with is
  // initialised then, and a pacing one (BBR, the system default on many hosts) turns the
  // socket's pacing on for good; switching to `congestion` afterwards kept it on, so every
  // packet after a full 64 KiB one waited len / pacing rate on a timer (docs/PERF.md#perf-r36tail).
  CHORUS_CHECK(connectRetry(to, deadlineNs, -1, &fd, what,
                            [&](int s) { tuneSocket(s, bufBytes, congestion); }));
  CHORUS_CHECK(sendAll(fd.get(), &hello, sizeof(hello), deadlineNs, -1, what));
  *out = std::move(fd);
  return chorusSuccess;
}

bool dupSocket(const Fd& from, Fd* out) {
  const int fd = ::fcntl(from.get(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return false;
  out->reset(fd);
  return true;
}

chorusResult_t randomToken(uint64_t* out) { return randomBytes(out, sizeof(*out)); }

}  // namespace tcp
}  // namespace chorus
