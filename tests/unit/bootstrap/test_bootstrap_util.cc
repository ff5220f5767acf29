#include "tests/unit/bootstrap/test_bootstrap_util.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "src/bootstrap/root.h"
#include "src/bootstrap/uniqueid.h"
#include "src/bootstrap/wire.h"

namespace chorus {
namespace test {

void runRanks(int nranks, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

chorusUniqueId startRoot(double rootSeconds, const char* host, int port, const uint8_t* secret) {
  chorusUniqueId id;
  memset(&id, 0, sizeof(id));
  chorusResult_t res = bootstrapStartRoot(
      host, port, secret, monotonicNs() + static_cast<int64_t>(rootSeconds * kSec), &id);
  EXPECT_EQ(res, chorusSuccess);
  return id;
}

void initRanks(const chorusUniqueId& id, int nranks, int64_t deadlineNs,
               std::vector<std::unique_ptr<Bootstrap>>* comms,
               std::vector<chorusResult_t>* results) {
  comms->clear();
  comms->resize(static_cast<size_t>(nranks));
  results->assign(static_cast<size_t>(nranks), chorusInternalError);
  runRanks(nranks, [&](int r) {
    (*results)[static_cast<size_t>(r)] =
        Bootstrap::init(id, r, nranks, deadlineNs, &(*comms)[static_cast<size_t>(r)]);
  });
}

SockAddr rootOf(const chorusUniqueId& id) {
  SockAddr a;
  uint8_t s[kSecretBytes];
  EXPECT_EQ(decodeUniqueId(id, &a, s), chorusSuccess);
  return a;
}

void secretOf(const chorusUniqueId& id, uint8_t* secret) {
  SockAddr a;
  EXPECT_EQ(decodeUniqueId(id, &a, secret), chorusSuccess);
}

int rawConnect(const SockAddr& addr) {
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr.ss), addr.len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void rawWrite(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return;
    p += k;
    n -= static_cast<size_t>(k);
  }
}

bool waitClosed(int fd, double seconds) {
  int64_t deadline = monotonicNs() + static_cast<int64_t>(seconds * kSec);
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, pollTimeoutMs(deadline));
    if (n == 0) return false;
    if (n < 0) return false;
    ssize_t k = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

bool waitRefused(const SockAddr& addr, double seconds) {
  int64_t deadline = monotonicNs() + static_cast<int64_t>(seconds * kSec);
  while (monotonicNs() < deadline) {
    int fd = rawConnect(addr);
    if (fd < 0) return true;
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

int openFdCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the DIR's own fd
}

}  // namespace test
}  // namespace chorus
