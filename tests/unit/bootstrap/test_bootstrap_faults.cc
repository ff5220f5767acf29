// Bootstrap: strangers, deadlines, abort, peers that go away.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/socket_bootstrap.h"
#include "src/bootstrap/uniqueid.h"
#include "src/bootstrap/wire.h"
#include "src/core/checks.h"
#include "tests/unit/bootstrap/test_bootstrap_util.h"

namespace chorus {
namespace test {
namespace {

double secondsSince(int64_t t0) { return static_cast<double>(monotonicNs() - t0) / kSec; }

std::vector<uint8_t> randomBytes(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(g());
  return v;
}

// Everything a stranger might throw at a listener that expects `secret`.
struct Strangers {
  std::vector<int> fds;
  void attack(const SockAddr& at, const uint8_t* secret, int nranks) {
    // Wrong secret followed by a perfectly good hello.
    int fd = rawConnect(at);
    ASSERT_GE(fd, 0);
    auto wrong = randomBytes(kSecretBytes, 1);
    Hello h = makeHello(ConnKind::RootCheckIn, 0, nranks);
    rawWrite(fd, wrong.data(), wrong.size());
    rawWrite(fd, &h, sizeof(h));
    fds.push_back(fd);
    // Garbage.
    fd = rawConnect(at);
    ASSERT_GE(fd, 0);
    auto junk = randomBytes(5000, 2);
    rawWrite(fd, junk.data(), junk.size());
    fds.push_back(fd);
    // Connects and says nothing.
    fd = rawConnect(at);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    // Half the secret, then silence.
    fd = rawConnect(at);
    ASSERT_GE(fd, 0);
    rawWrite(fd, secret, kSecretBytes / 2);
    fds.push_back(fd);
    // Port scanner: connect and close at once.
    fd = rawConnect(at);
    ASSERT_GE(fd, 0);
    ::close(fd);
    // Right secret, garbled hello (bad magic, absurd nranks).
    fd = rawConnect(at);
    ASSERT_GE(fd, 0);
    Hello bad = makeHello(ConnKind::RootCheckIn, 0, nranks);
    bad.magic = 0xdeadbeef;
    rawWrite(fd, secret, kSecretBytes);
    rawWrite(fd, &bad, sizeof(bad));
    fds.push_back(fd);
    fd = rawConnect(at);
    ASSERT_GE(fd, 0);
    Hello huge = makeHello(ConnKind::RootCheckIn, 5, 0x7fffffff);
    rawWrite(fd, secret, kSecretBytes);
    rawWrite(fd, &huge, sizeof(huge));
    fds.push_back(fd);
  }
  // Every stranger gets disconnected (dropped, or the listener's owner went away).
  void expectAllDropped(double seconds) {
    for (int fd : fds)
      EXPECT_TRUE(waitClosed(fd, seconds)) << "stranger fd " << fd << " still open";
  }
  ~Strangers() {
    for (int fd : fds) ::close(fd);
  }
};

TEST(BootstrapFaults, StrangersAtTheRoot) {
  const int n = 3;
  chorusUniqueId id = startRoot(15);
  uint8_t secret[kSecretBytes];
  secretOf(id, secret);
  Strangers s;
  s.attack(rootOf(id), secret, n);
  // Let the root see them all before the ranks arrive.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int64_t t0 = monotonicNs();
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, n, monotonicNs() + 10 * kSec, &comms, &res);
  // The silent strangers must not have delayed the ranks by their 2 s vetting window.
  EXPECT_LT(secondsSince(t0), 1.8);
  for (int r = 0; r < n; ++r) ASSERT_EQ(res[static_cast<size_t>(r)], chorusSuccess) << "rank " << r;
  std::vector<chorusResult_t> ag(n);
  runRanks(n, [&](int r) {
    int v[3] = {0, 0, 0};
    v[r] = r + 1;
    ag[static_cast<size_t>(r)] = comms[static_cast<size_t>(r)]->allGather(v, sizeof(int));
    if (v[0] + v[1] + v[2] != 6) ag[static_cast<size_t>(r)] = chorusInternalError;
  });
  for (auto r : ag) EXPECT_EQ(r, chorusSuccess);
  // The root served everyone, exited and closed every stranger.
  s.expectAllDropped(3);
  EXPECT_TRUE(waitRefused(rootOf(id), 3));
}

TEST(BootstrapFaults, StrangersAtARank) {
  chorusUniqueId id = startRoot();
  uint8_t secret[kSecretBytes];
  secretOf(id, secret);
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, 2, monotonicNs() + 10 * kSec, &comms, &res);
  for (auto r : res) ASSERT_EQ(r, chorusSuccess);
  auto* rank0 = dynamic_cast<SocketBootstrap*>(comms[0].get());
  ASSERT_NE(rank0, nullptr);
  Strangers s;
  s.attack(rank0->listenAddr(), secret, 2);
  // Right secret, p2p hello claiming to be rank 0 itself / an out-of-range rank.
  for (int claimed : {0, 7}) {
    int fd = rawConnect(rank0->listenAddr());
    ASSERT_GE(fd, 0);
    Hello h = makeHello(ConnKind::P2p, claimed, 2);
    rawWrite(fd, secret, kSecretBytes);
    rawWrite(fd, &h, sizeof(h));
    s.fds.push_back(fd);
  }
  // Real traffic still flows; rank 0 vets the strangers while it waits.
  int64_t t0 = monotonicNs();
  std::vector<chorusResult_t> out(2);
  int got = 0;
  runRanks(2, [&](int r) {
    comms[static_cast<size_t>(r)]->setDeadline(monotonicNs() + 10 * kSec);
    int v = 4242;
    out[static_cast<size_t>(r)] =
        r == 1 ? comms[1]->send(0, 1, &v, sizeof(v)) : comms[0]->recv(1, 1, &got, sizeof(got));
  });
  EXPECT_EQ(out[0], chorusSuccess);
  EXPECT_EQ(out[1], chorusSuccess);
  EXPECT_EQ(got, 4242);
  EXPECT_LT(secondsSince(t0), 1.8);
  // The silent ones are dropped after the vetting window, by a rank that is waiting.
  comms[0]->setDeadline(monotonicNs() + 2500 * kMs);
  EXPECT_EQ(comms[0]->recv(1, 99, &got, sizeof(got)), chorusTimeout);
  s.expectAllDropped(0.5);
  // The ring still works.
  std::vector<chorusResult_t> b(2);
  runRanks(2, [&](int r) {
    comms[static_cast<size_t>(r)]->setDeadline(0);
    b[static_cast<size_t>(r)] = comms[static_cast<size_t>(r)]->barrier();
  });
  EXPECT_EQ(b[0], chorusSuccess);
  EXPECT_EQ(b[1], chorusSuccess);
}

TEST(BootstrapFaults, GarbledMessageFromAPeerWithTheSecret) {
  // Someone with the secret poses as rank 1 and sends a header with an absurd size: rank 0
  // reports a remote error for rank 1 instead of allocating or hanging.
  chorusUniqueId id = startRoot();
  uint8_t secret[kSecretBytes];
  secretOf(id, secret);
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, 2, monotonicNs() + 10 * kSec, &comms, &res);
  for (auto r : res) ASSERT_EQ(r, chorusSuccess);
  auto* rank0 = dynamic_cast<SocketBootstrap*>(comms[0].get());
  int fd = rawConnect(rank0->listenAddr());
  ASSERT_GE(fd, 0);
  Hello h = makeHello(ConnKind::P2p, 1, 2);
  MsgHeader m{kMsgMagic, 6, 1ull << 62};
  rawWrite(fd, secret, kSecretBytes);
  rawWrite(fd, &h, sizeof(h));
  rawWrite(fd, &m, sizeof(m));
  comms[0]->setDeadline(monotonicNs() + 5 * kSec);
  int64_t t0 = monotonicNs();
  int x;
  EXPECT_EQ(comms[0]->recv(1, 6, &x, sizeof(x)), chorusRemoteError);
  EXPECT_NE(std::string(threadLastError()).find("garbled"), std::string::npos) << threadLastError();
  EXPECT_LT(secondsSince(t0), 1.0);
  EXPECT_TRUE(waitClosed(fd, 1));
  ::close(fd);
}

TEST(BootstrapFaults, RankThatNeverShowsUpTimesOut) {
  const int baseline = openFdCount();
  chorusUniqueId id = startRoot(1.5);
  std::vector<std::unique_ptr<Bootstrap>> comms(3);
  std::vector<chorusResult_t> res(2);
  std::vector<std::string> why(2);
  int64_t t0 = monotonicNs();
  runRanks(2, [&](int r) {  // ranks 0 and 1 of 3; rank 2 never comes
    res[static_cast<size_t>(r)] =
        Bootstrap::init(id, r, 3, monotonicNs() + 800 * kMs, &comms[static_cast<size_t>(r)]);
    why[static_cast<size_t>(r)] = threadLastError();
  });
  double took = secondsSince(t0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(res[static_cast<size_t>(r)], chorusTimeout);
    EXPECT_NE(why[static_cast<size_t>(r)].find("address table"), std::string::npos)
        << why[static_cast<size_t>(r)];
    EXPECT_EQ(comms[static_cast<size_t>(r)], nullptr);
  }
  EXPECT_GE(took, 0.75);
  EXPECT_LT(took, 3.0);
  // The root gives up at its own deadline and releases everything.
  EXPECT_TRUE(waitRefused(rootOf(id), 3));
  int64_t until = monotonicNs() + 2 * kSec;
  while (openFdCount() != baseline && monotonicNs() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(openFdCount(), baseline);
}

TEST(BootstrapFaults, SomethingElseAtTheRootAddress) {
  // A listener at the id's address that is not the root (it does not know the secret):
  // it swallows the check-in and answers with a reply of the right shape. The rank must
  // notice, not trust the table.
  uint8_t secret[kSecretBytes];
  ASSERT_EQ(randomSecret(secret), chorusSuccess);
  SockAddr lo;
  ASSERT_EQ(resolveHost("127.0.0.1", 0, true, &lo), chorusSuccess);
  Fd fake;
  SockAddr at;
  ASSERT_EQ(listenOn(lo, false, &fake, &at), chorusSuccess);
  chorusUniqueId id;
  ASSERT_EQ(bootstrapIdFor("127.0.0.1", at.port(), secret, &id), chorusSuccess);
  std::thread impostor([&] {
    Fd c;
    int64_t until = monotonicNs() + 5 * kSec;
    while (!c.valid() && monotonicNs() < until) {
      acceptOne(fake.get(), &c, nullptr);
      if (!c.valid()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!c.valid()) return;
    std::vector<uint8_t> in(kSecretBytes + sizeof(Hello));
    recvAll(c.get(), in.data(), in.size(), until, -1, "check-in");
    RootReply r{kReplyMagic, kRootOk, 1, static_cast<uint32_t>(sizeof(WireAddr)), {}};
    WireAddr w = toWire(lo);
    sendAll(c.get(), &r, sizeof(r), until, -1, "reply");
    sendAll(c.get(), &w, sizeof(w), until, -1, "table");
    waitClosed(c.get(), 2);
  });
  std::unique_ptr<Bootstrap> b;
  EXPECT_EQ(Bootstrap::init(id, 0, 1, monotonicNs() + 3 * kSec, &b), chorusRemoteError);
  EXPECT_NE(std::string(threadLastError()).find("not the root"), std::string::npos)
      << threadLastError();
  EXPECT_EQ(b, nullptr);
  impostor.join();
}

TEST(BootstrapFaults, RootRejectsDuplicateAndMismatchedRanks) {
  chorusUniqueId id = startRoot(5);
  std::unique_ptr<Bootstrap> a, b, c, d;
  chorusResult_t ra = chorusInternalError, rb = chorusInternalError;
  // A rank that gave up may check in again: its old connection is gone, not a duplicate.
  EXPECT_EQ(Bootstrap::init(id, 0, 2, monotonicNs() + 300 * kMs, &a), chorusTimeout);
  // rank 0 of 2 checks in (and waits); a second "rank 0" and a rank with nranks 3 are
  // rejected at once; then rank 1 completes the communicator.
  std::thread t0([&] { ra = Bootstrap::init(id, 0, 2, monotonicNs() + 5 * kSec, &a); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int64_t start = monotonicNs();
  EXPECT_EQ(Bootstrap::init(id, 0, 2, monotonicNs() + 5 * kSec, &c), chorusInvalidUsage);
  EXPECT_NE(std::string(threadLastError()).find("already checked in"), std::string::npos)
      << threadLastError();
  EXPECT_EQ(Bootstrap::init(id, 1, 3, monotonicNs() + 5 * kSec, &d), chorusInvalidUsage);
  EXPECT_LT(secondsSince(start), 1.0);
  rb = Bootstrap::init(id, 1, 2, monotonicNs() + 5 * kSec, &b);
  t0.join();
  EXPECT_EQ(ra, chorusSuccess);
  EXPECT_EQ(rb, chorusSuccess);
}

TEST(BootstrapFaults, DeadlineNamesWhatWasAwaited) {
  chorusUniqueId id = startRoot();
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, 2, monotonicNs() + 1500 * kMs, &comms, &res);
  for (auto r : res) ASSERT_EQ(r, chorusSuccess);
  int x;
  // No deadline set: a call gets as long as init was given (about 1.5 s).
  int64_t t0 = monotonicNs();
  EXPECT_EQ(comms[1]->recv(0, 8, &x, sizeof(x)), chorusTimeout);
  EXPECT_GE(secondsSince(t0), 1.0);
  EXPECT_LT(secondsSince(t0), 3.0);
  comms[0]->setDeadline(monotonicNs() + 300 * kMs);
  t0 = monotonicNs();
  EXPECT_EQ(comms[0]->recv(1, 5, &x, sizeof(x)), chorusTimeout);
  std::string why = threadLastError();
  EXPECT_NE(why.find("tag 5 from rank 1"), std::string::npos) << why;
  double took = secondsSince(t0);
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 2.0);
  // A collective only one rank joins times out naming the step and the peer.
  comms[0]->setDeadline(monotonicNs() + 300 * kMs);
  EXPECT_EQ(comms[0]->allGather(&x, 2), chorusTimeout);
  why = threadLastError();
  EXPECT_NE(why.find("allGather #0 step 1"), std::string::npos) << why;
  EXPECT_NE(why.find("from rank 1"), std::string::npos) << why;
}

TEST(BootstrapFaults, AbortUnblocksAWaitingRecv) {
  chorusUniqueId id = startRoot();
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, 2, monotonicNs() + 10 * kSec, &comms, &res);
  for (auto r : res) ASSERT_EQ(r, chorusSuccess);
  comms[0]->setDeadline(monotonicNs() + 20 * kSec);
  chorusResult_t rc = chorusSuccess;
  std::atomic<int64_t> returnedAt{0};
  std::thread waiter([&] {
    int x;
    rc = comms[0]->recv(1, 42, &x, sizeof(x));
    returnedAt = monotonicNs();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(returnedAt.load(), 0) << "recv returned before the abort";
  int64_t abortAt = monotonicNs();
  comms[0]->abort();
  waiter.join();
  EXPECT_EQ(rc, chorusAborted);
  EXPECT_LT(static_cast<double>(returnedAt.load() - abortAt) / kSec, 1.0);
  // Every later call fails the same way, at once.
  int x = 0;
  EXPECT_EQ(comms[0]->send(1, 1, &x, sizeof(x)), chorusAborted);
  EXPECT_EQ(comms[0]->barrier(), chorusAborted);
  EXPECT_EQ(comms[0]->recv(1, 1, &x, sizeof(x)), chorusAborted);
}

TEST(BootstrapFaults, AbortDuringAllGatherReachesTheNeighbours) {
  chorusUniqueId id = startRoot();
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, 3, monotonicNs() + 10 * kSec, &comms, &res);
  for (auto r : res) ASSERT_EQ(r, chorusSuccess);
  // Ranks 0 and 1 enter an allGather that rank 2 never joins; rank 0 is aborted.
  std::vector<chorusResult_t> ag(2, chorusSuccess);
  std::thread abortThread([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    comms[0]->abort();
  });
  int64_t t0 = monotonicNs();
  runRanks(2, [&](int r) {
    comms[static_cast<size_t>(r)]->setDeadline(monotonicNs() + 10 * kSec);
    int v[3] = {r, r, r};
    ag[static_cast<size_t>(r)] = comms[static_cast<size_t>(r)]->allGather(v, sizeof(int));
  });
  abortThread.join();
  EXPECT_EQ(ag[0], chorusAborted);
  EXPECT_EQ(ag[1], chorusRemoteError);  // its ring neighbour dropped out
  EXPECT_LT(secondsSince(t0), 2.0);
}

TEST(BootstrapFaults, AbortDuringInit) {
  // The two-step form lets another thread abort an init that waits for missing ranks.
  chorusUniqueId id = startRoot(3);
  std::unique_ptr<Bootstrap> b;
  ASSERT_EQ(Bootstrap::create(0, 2, &b), chorusSuccess);
  int x = 0;
  EXPECT_EQ(b->allGather(&x, 1), chorusInvalidUsage);  // not connected yet
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    b->abort();
  });
  int64_t t0 = monotonicNs();
  EXPECT_EQ(b->connect(id, monotonicNs() + 20 * kSec), chorusAborted);
  aborter.join();
  EXPECT_LT(secondsSince(t0), 1.5);
  EXPECT_EQ(b->connect(id, monotonicNs() + kSec), chorusInvalidUsage);  // once only
}

TEST(BootstrapFaults, PeerClosingIsARemoteError) {
  chorusUniqueId id = startRoot();
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, 3, monotonicNs() + 10 * kSec, &comms, &res);
  for (auto r : res) ASSERT_EQ(r, chorusSuccess);
  // rank 2 talks to rank 0, then goes away.
  int v = 9, got = 0;
  ASSERT_EQ(comms[2]->send(0, 1, &v, sizeof(v)), chorusSuccess);
  ASSERT_EQ(comms[2]->send(0, 2, &v, sizeof(v)), chorusSuccess);
  comms[2].reset();
  comms[0]->setDeadline(monotonicNs() + 10 * kSec);
  int64_t t0 = monotonicNs();
  // What it sent before closing is still delivered.
  EXPECT_EQ(comms[0]->recv(2, 2, &got, sizeof(got)), chorusSuccess);
  EXPECT_EQ(got, 9);
  EXPECT_EQ(comms[0]->recv(2, 1, &got, sizeof(got)), chorusSuccess);
  EXPECT_EQ(comms[0]->recv(2, 3, &got, sizeof(got)), chorusRemoteError);
  EXPECT_NE(std::string(threadLastError()).find("rank 2 closed"), std::string::npos)
      << threadLastError();
  // Sending to it fails too.
  EXPECT_EQ(comms[1]->send(2, 1, &v, sizeof(v)), chorusRemoteError);
  // A collective with the closed rank fails on both survivors, naming it.
  std::vector<chorusResult_t> ag(2);
  std::vector<std::string> why(2);
  runRanks(2, [&](int r) {
    comms[static_cast<size_t>(r)]->setDeadline(monotonicNs() + 10 * kSec);
    int buf[3] = {0, 0, 0};
    ag[static_cast<size_t>(r)] = comms[static_cast<size_t>(r)]->allGather(buf, sizeof(int));
    why[static_cast<size_t>(r)] = threadLastError();
  });
  EXPECT_EQ(ag[0], chorusRemoteError) << why[0];
  EXPECT_EQ(ag[1], chorusRemoteError) << why[1];
  EXPECT_NE(why[0].find("rank 2"), std::string::npos) << why[0];
  EXPECT_LT(secondsSince(t0), 2.0);
}

}  // namespace
}  // namespace test
}  // namespace chorus
