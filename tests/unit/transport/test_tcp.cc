// The TCP transport on its own: ranks as transport instances in one process, connected by
// hand over loopback (no bootstrap). Checks byte-exact delivery for many sizes and socket
// counts (striping), both address families, the LL path sharing the slot FIFO, a peer that
// leaves mid-stream, strangers at the listener, deadlines and abort, and teardown orders.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/core/checks.h"
#include "src/core/wait.h"
#include "transports/tcp/socket_util.h"
#include "transports/tcp/transport.h"
#include "transports/tcp/wire.h"

namespace chorus {
namespace {

SockAddr loopback(int family) {
  SockAddr a;
  if (family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.ss);
    s->sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &s->sin_addr);
    a.len = sizeof(sockaddr_in);
  } else {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.ss);
    s->sin6_family = AF_INET6;
    s->sin6_addr = in6addr_loopback;
    a.len = sizeof(sockaddr_in6);
  }
  return a;
}

bool haveIpv6Loopback() {
  Fd s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return false;
  SockAddr a = loopback(AF_INET6);
  return ::bind(s.get(), reinterpret_cast<sockaddr*>(&a.ss), a.len) == 0;
}

tcp::Options opts(int nsocks, int family = AF_INET) {
  tcp::Options o;
  o.bindAddr = loopback(family);
  o.nsocks = nsocks;
  o.slotBytes = 4096;
  o.depth = 4;
  o.minStripe = 512;  // 4 KiB slots still stripe over every socket
  o.timeoutNs = 20'000'000'000ll;
  return o;
}

WaitCtx waitFor(int64_t ns, const std::atomic<int>* abortFlag = nullptr) {
  return WaitCtx{nowNs() + ns, abortFlag, 100, "test"};
}
constexpr int64_t kLong = 20'000'000'000ll;

/// n transports connected all-to-all; send[i][j] carries i -> j, recv[i][j] j -> i.
struct Net {
  int n;
  std::vector<std::unique_ptr<tcp::TcpTransport>> t;
  std::vector<std::vector<std::unique_ptr<SendConn>>> send;
  std::vector<std::vector<std::unique_ptr<RecvConn>>> recv;
  std::vector<PeerInfo> peers;
  std::vector<std::array<char, kConnectInfoBytes>> info;
  std::vector<TransportContext> ctx;

  /// `each`, when given, holds rank i's options (ranks whose settings differ).
  Net(int nranks, const tcp::Options& o, size_t ll = 1024, std::vector<tcp::Options> each = {})
      : n(nranks),
        send(static_cast<size_t>(n)),
        recv(static_cast<size_t>(n)),
        peers(static_cast<size_t>(n)),
        info(static_cast<size_t>(n)) {
    for (int i = 0; i < n; ++i) {
      peers[static_cast<size_t>(i)] = PeerInfo{42, 1, i, -1, 0};
      ctx.push_back(TransportContext{i, n, &peers, 0x1234, 4096, 4, ll});
      t.push_back(
          std::make_unique<tcp::TcpTransport>(each.empty() ? o : each[static_cast<size_t>(i)]));
      send[static_cast<size_t>(i)].resize(static_cast<size_t>(n));
      recv[static_cast<size_t>(i)].resize(static_cast<size_t>(n));
    }
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(t[static_cast<size_t>(i)]->setup(ctx[static_cast<size_t>(i)],
                                                 info[static_cast<size_t>(i)].data()),
                chorusSuccess);
  }
  void connectAll() {
    // One thread, rank after rank, peers in rank order: exactly what init does on every
    // rank, only serialized. Must not wait for the peer's connect.
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        ASSERT_EQ(t[static_cast<size_t>(i)]->connect(
                      ctx[static_cast<size_t>(i)], j, info[static_cast<size_t>(j)].data(),
                      &send[static_cast<size_t>(i)][static_cast<size_t>(j)],
                      &recv[static_cast<size_t>(i)][static_cast<size_t>(j)]),
                  chorusSuccess);
      }
    }
    for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)]->finishSetup();
  }
  SendConn* s(int from, int to) {
    return send[static_cast<size_t>(from)][static_cast<size_t>(to)].get();
  }
  RecvConn* r(int at, int from) {
    return recv[static_cast<size_t>(at)][static_cast<size_t>(from)].get();
  }
  /// Tears rank i down (its handles first, as commFree does); `abort` skips the flush.
  void kill(int i, bool abort) {
    for (auto& c : send[static_cast<size_t>(i)]) c.reset();
    for (auto& c : recv[static_cast<size_t>(i)]) c.reset();
    if (abort) t[static_cast<size_t>(i)]->wakeAll();
    t[static_cast<size_t>(i)].reset();
  }
  ~Net() {
    for (int i = 0; i < n; ++i)
      if (t[static_cast<size_t>(i)]) kill(i, false);
  }
};

unsigned char pattern(int msg, size_t i) {
  return static_cast<unsigned char>(msg * 131 + i * 7 + (i >> 8));
}

// Sizes that hit every edge: empty, one byte, odd, around stripe and slot boundaries.
size_t sizeOf(int m) {
  static const size_t kSizes[] = {0,    1,    2,    3,    7,    63,   64,   65,   511,  512,  513,
                                  1000, 1023, 1024, 1025, 1536, 2047, 2049, 3000, 4093, 4095, 4096};
  const size_t k = sizeof(kSizes) / sizeof(kSizes[0]);
  return m < static_cast<int>(k) ? kSizes[m] : static_cast<size_t>((m * 2654435761u) % 4097);
}

void sendMessages(SendConn* c, int count, size_t (*size)(int) = sizeOf) {
  for (int m = 0; m < count; ++m) {
    void* slot;
    ASSERT_EQ(c->acquire(&slot, waitFor(kLong)), chorusSuccess) << threadLastError();
    const size_t bytes = size(m);
    for (size_t i = 0; i < bytes; ++i) static_cast<unsigned char*>(slot)[i] = pattern(m, i);
    c->post(bytes);
  }
}

void recvMessages(RecvConn* c, int count, size_t (*size)(int) = sizeOf) {
  for (int m = 0; m < count; ++m) {
    const void* slot;
    size_t bytes = 12345;
    ASSERT_EQ(c->wait(&slot, &bytes, waitFor(kLong)), chorusSuccess) << threadLastError();
    ASSERT_EQ(bytes, size(m)) << "message " << m;
    const auto* b = static_cast<const unsigned char*>(slot);
    for (size_t i = 0; i < bytes; ++i)
      ASSERT_EQ(b[i], pattern(m, i)) << "message " << m << " byte " << i;
    c->release();
  }
}

struct Case {
  int nsocks;
  int family;
  int64_t laneMax;  // the higher rank's pair lane: -1 none, 0 one segment, > 0 this size
};

class TcpDelivery : public ::testing::TestWithParam<Case> {};

TEST_P(TcpDelivery, EverySizeArrivesByteExactBothWaysAtOnce) {
  const Case c = GetParam();
  if (c.family == AF_INET6 && !haveIpv6Loopback())
    GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  tcp::Options o = opts(c.nsocks, c.family);
  o.pairLane = c.laneMax >= 0;
  o.pairLaneMaxBytes = static_cast<size_t>(std::max<int64_t>(c.laneMax, 0));
  Net net(2, o);
  net.connectAll();
  EXPECT_EQ(net.t[1]->pairLanes(), c.laneMax >= 0 ? 1 : 0);
  const int kMessages = 600;  // 150 trips around a 4-slot FIFO each way
  std::thread a([&] { sendMessages(net.s(0, 1), kMessages); });
  std::thread b([&] { sendMessages(net.s(1, 0), kMessages); });
  std::thread ra([&] { recvMessages(net.r(0, 1), kMessages); });
  recvMessages(net.r(1, 0), kMessages);
  a.join();
  b.join();
  ra.join();
}

INSTANTIATE_TEST_SUITE_P(Sockets, TcpDelivery,
                         // Loopback's segment holds a whole 4 KiB slot: lane 0 carries every
                         // message of rank 1; 1000 splits them between the lane and stripes.
                         ::testing::Values(Case{1, AF_INET, 0}, Case{3, AF_INET, 0},
                                           Case{16, AF_INET, 0}, Case{1, AF_INET, -1},
                                           Case{3, AF_INET, -1}, Case{1, AF_INET, 1000},
                                           Case{3, AF_INET, 1000}, Case{16, AF_INET, 1000},
                                           Case{1, AF_INET6, 0}, Case{3, AF_INET6, 1000}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           const int64_t l = i.param.laneMax;
                           return std::string(i.param.family == AF_INET ? "ipv4" : "ipv6") +
                                  "_nsocks" + std::to_string(i.param.nsocks) +
                                  (l < 0    ? "_nolane"
                                   : l == 0 ? "_lane"
                                            : "_lane" + std::to_string(l));
                         });

// The receiver reads through a 4 KiB stage and reads a payload's remainder of 4 KiB or more
// straight into the slot: with 64 KiB slots, sizes around both edges, tiny socket buffers
// (reads cut anywhere) and both ways at once, every byte must land where it belongs.
size_t largeSizeOf(int m) {
  static const size_t kSizes[] = {0,    1,    4071, 4072, 4073,  4095,  4096, 4097,
                                  8167, 8168, 8169, 8192, 65535, 65536, 24,   25};
  const size_t k = sizeof(kSizes) / sizeof(kSizes[0]);
  return m < static_cast<int>(k) ? kSizes[m] : static_cast<size_t>((m * 2654435761u) % 65537);
}

TEST(TcpTransport, StagedAndDirectReadsDeliverEveryByte) {
  for (int64_t sockBuf : {int64_t{4096}, int64_t{0}}) {
    SCOPED_TRACE("socket buffers " + std::to_string(sockBuf));
    tcp::Options o = opts(2);
    o.slotBytes = 65536;
    o.minStripe = 16384;  // the largest messages stripe over both sockets
    o.sockBuf = sockBuf;
    o.pairLaneMaxBytes = 1000;
    Net net(2, o);
    net.connectAll();
    const int kMessages = 200;
    std::thread a([&] { sendMessages(net.s(0, 1), kMessages, largeSizeOf); });
    std::thread b([&] { sendMessages(net.s(1, 0), kMessages, largeSizeOf); });
    std::thread ra([&] { recvMessages(net.r(0, 1), kMessages, largeSizeOf); });
    recvMessages(net.r(1, 0), kMessages, largeSizeOf);
    a.join();
    b.join();
    ra.join();
  }
}

// Of each pair the higher rank sends on the lower rank's socket: rank r has r lanes.
TEST(TcpTransport, PairLanesGoFromEachHigherRankToEachLowerOne) {
  for (bool lane : {true, false}) {
    tcp::Options o = opts(2);
    o.pairLane = lane;
    Net net(3, o);
    net.connectAll();
    for (int r = 0; r < 3; ++r) EXPECT_EQ(net.t[static_cast<size_t>(r)]->pairLanes(), lane ? r : 0);
  }
}

// Ranks that disagree on CHORUS_TCP_PAIR_LANE: a lane is used only where its lower rank
// reads it (said in its connect info), so nothing is sent where nobody looks.
TEST(TcpTransport, APairLaneNeedsTheLowerRanksConsent) {
  for (int offRank : {0, 1}) {
    SCOPED_TRACE("lane off on rank " + std::to_string(offRank));
    std::vector<tcp::Options> each{opts(2), opts(2)};
    each[static_cast<size_t>(offRank)].pairLane = false;
    Net net(2, each[0], 1024, each);
    net.connectAll();
    EXPECT_EQ(net.t[1]->pairLanes(), 0);
    std::thread a([&] { sendMessages(net.s(1, 0), 100); });
    std::thread b([&] { sendMessages(net.s(0, 1), 100); });
    std::thread rb([&] { recvMessages(net.r(1, 0), 100); });
    recvMessages(net.r(0, 1), 100);
    a.join();
    b.join();
    rb.join();
  }
}

TEST(TcpTransport, FourRanksAllPairsConcurrently) {
  Net net(4, opts(2));
  net.connectAll();
  std::vector<std::thread> th;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      if (i != j) {
        th.emplace_back([&net, i, j] { sendMessages(net.s(i, j), 200); });
        th.emplace_back([&net, i, j] { recvMessages(net.r(j, i), 200); });
      }
  for (auto& x : th) x.join();
}

TEST(TcpTransport, TinySocketBuffersStillDeliverEverything) {
  tcp::Options o = opts(3);
  o.sockBuf = 4096;  // many partial writes and reads, back-pressure on every stripe
  Net net(2, o);
  net.connectAll();
  std::thread a([&] { sendMessages(net.s(0, 1), 300); });
  recvMessages(net.r(1, 0), 300);
  a.join();
}

// CHORUS_TCP_CONGESTION: the name lands on the socket (reno is built into every kernel
// and allowed for every user), a name the kernel does not know is refused without touching
// the socket's own, and a transport given such a name still connects and delivers.
TEST(TcpTransport, CongestionControlIsSetOrRefusedHarmlessly) {
  auto current = [](int fd) {
    char name[32] = {};
    socklen_t len = sizeof(name);
    EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
    return std::string(name, strnlen(name, sizeof(name)));
  };
  Fd a(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(a.valid());
  const std::string before = current(a.get());
  EXPECT_FALSE(tcp::setCongestion(a.get(), "no-such-cc"));
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(current(a.get()), before);
  tcp::tuneSocket(a.get(), 0, "reno");
  EXPECT_EQ(current(a.get()), "reno");
  tcp::tuneSocket(a.get(), 0, "");  // empty: left as it is
  EXPECT_EQ(current(a.get()), "reno");

  tcp::Options o = opts(2);
  o.congestion = "no-such-cc";
  Net net(2, o);
  net.connectAll();
  std::thread t([&] { sendMessages(net.s(0, 1), 100); });
  recvMessages(net.r(1, 0), 100);
  t.join();
}

// The transport tunes its sockets before connect(): a congestion control set after the
// handshake keeps the pacing that the system default (BBR on many hosts) turned on when the
// connection completed (docs/PERF.md#perf-r36tail). So connectRetry's hook must see a socket
// that is not connected yet, and what it sets must hold on the connected socket.
TEST(TcpTransport, SocketsAreTunedBeforeTheyConnect) {
  Fd listener;
  SockAddr at;
  ASSERT_EQ(listenOn(loopback(AF_INET), false, &listener, &at), chorusSuccess);
  int calls = 0, connectedAtHook = 0;
  Fd s;
  ASSERT_EQ(
      connectRetry(at, nowNs() + kLong, -1, &s, "listener",
                   [&](int fd) {
                     ++calls;
                     SockAddr peer;
                     peer.len = sizeof(peer.ss);
                     if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer.ss), &peer.len) == 0)
                       ++connectedAtHook;
                     tcp::tuneSocket(fd, 0, "reno");
                   }),
      chorusSuccess);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(connectedAtHook, 0);
  char name[32] = {};
  socklen_t len = sizeof(name);
  ASSERT_EQ(getsockopt(s.get(), IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
  EXPECT_EQ(std::string(name, strnlen(name, sizeof(name))), "reno");
}

// Who reads the sockets: the waiting thread polls them itself for busyPollNs, then the
// progress thread takes over. Every split must deliver everything: no polling at all (the
// thread does it all), always polling, and a short poll with a sender that pauses longer
// than it (handovers both ways), each with tiny socket buffers (partial reads, stalls).
TEST(TcpTransport, EveryBusyPollSettingDeliversEverything) {
  for (int64_t poll : {int64_t{0}, int64_t{50'000}, kLong}) {
    SCOPED_TRACE("busyPollNs " + std::to_string(poll));
    tcp::Options o = opts(2);
    o.sockBuf = 4096;
    o.busyPollNs = poll;
    Net net(2, o);
    net.connectAll();
    std::thread a([&] {
      for (int part = 0; part < 4; ++part) {
        sendMessages(net.s(0, 1), 30);
        usleep(3000);  // the receiver's poll runs out: the progress thread must wake it
      }
    });
    for (int part = 0; part < 4; ++part) recvMessages(net.r(1, 0), 30);
    a.join();
  }
}

TEST(TcpTransport, MessagesSentWhileNobodyWaitsArriveLater) {
  // The receiving application polled (so it, not the progress thread, owns the sockets),
  // then stays away while the sender posts more than the FIFO and the socket buffers hold:
  // nothing may be lost or stuck once it comes back.
  tcp::Options o = opts(2);
  o.sockBuf = 4096;
  Net net(2, o);
  net.connectAll();
  const void* slot;
  size_t bytes;
  EXPECT_FALSE(net.r(1, 0)->test(&slot, &bytes));
  std::thread a([&] { sendMessages(net.s(0, 1), 200); });
  usleep(20000);
  recvMessages(net.r(1, 0), 200);
  a.join();
}

TEST(TcpTransport, LowLatencyMessagesShareTheFifoInOrder) {
  // LL threshold above the slot size: LL messages then span several slots.
  Net net(2, opts(2), 10000);
  net.connectAll();
  ASSERT_EQ(net.s(0, 1)->llMaxBytes(), 10000u);
  const int kRounds = 200;
  auto llSize = [](int r) { return static_cast<size_t>((r * 389) % 10001); };
  std::thread sender([&] {
    std::vector<unsigned char> buf(10000);
    for (int r = 0; r < kRounds; ++r) {
      if (r % 3 == 2) {  // a slot message between LL ones
        void* slot;
        ASSERT_EQ(net.s(0, 1)->acquire(&slot, waitFor(kLong)), chorusSuccess);
        std::memset(slot, r & 0xff, 100);
        net.s(0, 1)->post(100);
        continue;
      }
      const size_t bytes = llSize(r);
      for (size_t i = 0; i < bytes; ++i) buf[i] = pattern(r, i);
      ASSERT_EQ(net.s(0, 1)->sendLL(buf.data(), bytes, waitFor(kLong)), chorusSuccess);
    }
  });
  std::vector<unsigned char> out(10000);
  RecvConn* rc = net.r(1, 0);
  for (int r = 0; r < kRounds; ++r) {
    if (r % 3 == 2) {
      const void* slot;
      size_t bytes;
      ASSERT_EQ(rc->wait(&slot, &bytes, waitFor(kLong)), chorusSuccess) << threadLastError();
      ASSERT_EQ(bytes, 100u);
      ASSERT_EQ(static_cast<const unsigned char*>(slot)[99], r & 0xff);
      rc->release();
      continue;
    }
    const size_t bytes = llSize(r);
    if (r % 2) {
      ASSERT_EQ(rc->recvLL(out.data(), bytes, waitFor(kLong)), chorusSuccess) << threadLastError();
    } else {
      const void* data;
      ASSERT_EQ(rc->waitLL(&data, bytes, waitFor(kLong)), chorusSuccess) << threadLastError();
      if (bytes) std::memcpy(out.data(), data, bytes);
      rc->releaseLL();
    }
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(out[i], pattern(r, i)) << "round " << r;
  }
  sender.join();
}

TEST(TcpTransport, HeldLowLatencyMessageNeverBlocksTheSender) {
  // A receiver holding an LL message (waitLL without releaseLL) while it waits for more
  // must not keep the sender from using the whole FIFO.
  Net net(2, opts(1));
  net.connectAll();
  char b = 5;
  ASSERT_EQ(net.s(0, 1)->sendLL(&b, 1, waitFor(kLong)), chorusSuccess);
  const void* held;
  ASSERT_EQ(net.r(1, 0)->waitLL(&held, 1, waitFor(kLong)), chorusSuccess);
  std::thread sender([&] { sendMessages(net.s(0, 1), 50); });
  recvMessages(net.r(1, 0), 50);
  EXPECT_EQ(*static_cast<const char*>(held), 5);
  net.r(1, 0)->releaseLL();
  sender.join();
}

TEST(TcpTransport, MismatchedKindsAreAnErrorNotCorruption) {
  Net net(2, opts(2));
  net.connectAll();
  char b[8] = {};
  ASSERT_EQ(net.s(0, 1)->sendLL(b, 8, waitFor(kLong)), chorusSuccess);
  const void* slot;
  size_t bytes;
  EXPECT_EQ(net.r(1, 0)->wait(&slot, &bytes, waitFor(kLong)), chorusInvalidUsage);
  EXPECT_NE(std::string(threadLastError()).find("low-latency"), std::string::npos);
  EXPECT_FALSE(net.r(1, 0)->test(&slot, &bytes));
  // Wrong size on the LL path.
  EXPECT_EQ(net.r(1, 0)->recvLL(b, 4, waitFor(kLong)), chorusInvalidUsage);
}

TEST(TcpTransport, DeadlinesAndAbort) {
  tcp::Options o = opts(1);
  o.sockBuf = 4096;
  Net net(2, o);
  net.connectAll();
  const void* in;
  size_t bytes;
  EXPECT_FALSE(net.r(1, 0)->test(&in, &bytes));
  int64_t t0 = nowNs();
  EXPECT_EQ(net.r(1, 0)->wait(&in, &bytes, waitFor(50'000'000)), chorusTimeout);
  EXPECT_GE(nowNs() - t0, 50'000'000);

  // Fill everything between the two (slots on both sides, socket buffers) until the
  // sender stays blocked, then its acquire must time out.
  SendConn* s = net.s(0, 1);
  int64_t idleSince = nowNs();
  while (nowNs() - idleSince < 200'000'000) {
    void* slot = s->tryAcquire();
    if (!slot) {
      usleep(1000);
      continue;
    }
    s->post(4096);
    idleSince = nowNs();
  }
  void* slot;
  t0 = nowNs();
  EXPECT_EQ(s->acquire(&slot, waitFor(50'000'000)), chorusTimeout);
  EXPECT_GE(nowNs() - t0, 50'000'000);

  std::atomic<int> abortFlag{0};
  chorusResult_t got = chorusSuccess;
  std::thread waiter([&] { got = net.r(0, 1)->wait(&in, &bytes, waitFor(kLong, &abortFlag)); });
  usleep(50000);  // let it reach the futex
  abortFlag.store(1);
  net.t[0]->wakeAll();
  waiter.join();
  EXPECT_EQ(got, chorusAborted);
}

TEST(TcpTransport, PeerThatVanishesMidStreamIsARemoteErrorNamingIt) {
  Net net(2, opts(2));
  net.connectAll();
  // Rank 0 sends 5 messages, then dies without flushing (abort) a moment later.
  sendMessages(net.s(0, 1), 5);
  recvMessages(net.r(1, 0), 5);
  std::thread killer([&] {
    usleep(100000);
    net.kill(0, true);
  });
  const void* in;
  size_t bytes;
  int64_t t0 = nowNs();
  EXPECT_EQ(net.r(1, 0)->wait(&in, &bytes, waitFor(kLong)), chorusRemoteError);
  EXPECT_LT(nowNs() - t0, 5'000'000'000ll);  // promptly, not at the deadline
  const std::string err = threadLastError();
  EXPECT_NE(err.find("rank 0 (127.0.0.1:"), std::string::npos) << err;
  EXPECT_NE(err.find("closed the connection"), std::string::npos) << err;
  EXPECT_NE(err.find("during test"), std::string::npos) << err;
  killer.join();
  // The other direction fails too: rank 1's sends can go nowhere.
  void* slot;
  chorusResult_t r = chorusSuccess;
  for (int i = 0; i < 100 && r == chorusSuccess; ++i) {
    r = net.s(1, 0)->acquire(&slot, waitFor(kLong));
    if (r == chorusSuccess) net.s(1, 0)->post(4096);
  }
  EXPECT_EQ(r, chorusRemoteError) << threadLastError();
}

TEST(TcpTransport, ReceiverThatVanishesFailsABlockedSender) {
  Net net(2, opts(3));
  net.connectAll();
  chorusResult_t r = chorusSuccess;
  std::thread killer([&] {
    usleep(100000);
    net.kill(1, true);
  });
  int64_t t0 = nowNs();
  for (int m = 0; r == chorusSuccess && nowNs() - t0 < 10'000'000'000ll; ++m) {
    void* slot;
    r = net.s(0, 1)->acquire(&slot, waitFor(kLong));
    if (r == chorusSuccess) net.s(0, 1)->post(4096);
  }
  EXPECT_EQ(r, chorusRemoteError) << threadLastError();
  EXPECT_LT(nowNs() - t0, 5'000'000'000ll);
  killer.join();
}

TEST(TcpTransport, ASenderMayPostAndLeaveAtOnce) {
  // As with shared memory, a rank's last send completes when posted: destroying the
  // transport right after flushes what is posted, then closes. Both directions: rank 1's
  // messages travel on the pair lane, whole or (past 1000 B) striped on its own sockets.
  for (int from : {0, 1}) {
    SCOPED_TRACE("sender " + std::to_string(from));
    const int to = 1 - from;
    tcp::Options o = opts(2);
    o.pairLaneMaxBytes = 1000;
    Net net(2, o);
    net.connectAll();
    sendMessages(net.s(from, to), 40);  // more than the FIFO holds: some is in the kernel
    std::thread killer([&] { net.kill(from, false); });
    recvMessages(net.r(to, from), 40);
    killer.join();
    const void* in;
    size_t bytes;
    EXPECT_EQ(net.r(to, from)->wait(&in, &bytes, waitFor(kLong)), chorusRemoteError);
  }
}

// Posts messages 0..count-1 (sendMessages' sizes and bytes) with postFrom, all from one
// buffer of the caller's, `user`, where their bytes stay until flush().
void postFromUser(SendConn* c, std::vector<unsigned char>* user, int count) {
  size_t total = 0;
  for (int m = 0; m < count; ++m) total += sizeOf(m);
  user->assign(total, 0);  // whole before the first post: posted pieces must not move
  size_t off = 0;
  for (int m = 0; m < count; ++m) {
    const size_t bytes = sizeOf(m);
    for (size_t i = 0; i < bytes; ++i) (*user)[off + i] = pattern(m, i);
    void* slot;
    EXPECT_EQ(c->acquire(&slot, waitFor(kLong)), chorusSuccess) << threadLastError();
    c->postFrom(user->data() + off, bytes, slot);
    off += bytes;
  }
}

TEST(TcpTransport, SendsFromTheCallersMemoryUntilFlushed) {
  // 4 KiB socket buffers and a receiver that comes late: most messages are still in the
  // caller's memory when the last is posted. flush() returns once the kernel has all of
  // them; what the caller writes afterwards must not reach the receiver.
  for (bool fromUser : {true, false}) {
    SCOPED_TRACE(fromUser ? "sending from the caller's memory" : "copying into slots");
    tcp::Options o = opts(2);
    o.sockBuf = 4096;
    o.sendFromUser = fromUser;
    Net net(2, o);
    net.connectAll();
    EXPECT_EQ(net.s(0, 1)->sendsFromUser(), fromUser);
    std::vector<unsigned char> user;
    std::thread receiver([&] {
      usleep(20000);
      recvMessages(net.r(1, 0), 120);
    });
    postFromUser(net.s(0, 1), &user, 120);
    EXPECT_EQ(net.s(0, 1)->flush(waitFor(kLong)), chorusSuccess) << threadLastError();
    std::fill(user.begin(), user.end(), 0xEE);
    receiver.join();
    net.s(0, 1)->abandon("test", chorusTimeout);  // flushed: nothing to give up
    EXPECT_EQ(net.s(0, 1)->check("test"), chorusSuccess);
  }
}

TEST(TcpTransport, AbandonedSendsFailTheConnectionAndAreNeverRead) {
  // A receiver that does not read: the sender's FIFO and socket fill, flush() times out,
  // and abandon() fails the connection with the call's error. Whatever the caller writes
  // afterwards never arrives: every message the receiver completes is the original.
  tcp::Options o = opts(1);
  o.sockBuf = 4096;
  Net net(2, o);
  net.connectAll();
  SendConn* s = net.s(0, 1);
  std::vector<unsigned char> user;
  postFromUser(s, &user, 3);  // the FIFO holds 4
  // Fill what is left with ordinary messages until the sender stays blocked.
  int64_t idleSince = nowNs();
  int extra = 0;
  while (nowNs() - idleSince < 100'000'000) {
    void* slot = s->tryAcquire();
    if (!slot) {
      usleep(1000);
      continue;
    }
    std::memset(slot, 0x5A, 4096);
    s->post(4096);
    ++extra;
    idleSince = nowNs();
  }
  EXPECT_EQ(s->flush(waitFor(50'000'000)), chorusTimeout);
  s->abandon("all_reduce #9", chorusTimeout);
  EXPECT_EQ(s->check("test"), chorusTimeout);
  const std::string err = threadLastError();
  EXPECT_NE(err.find("left unsent when all_reduce #9 failed"), std::string::npos) << err;
  std::fill(user.begin(), user.end(), 0xEE);
  // The receiver now reads what made it into the kernel: whole messages only, each intact.
  RecvConn* r = net.r(1, 0);
  int got = 0;
  int64_t quietSince = nowNs();
  while (nowNs() - quietSince < 200'000'000) {
    const void* in;
    size_t bytes;
    if (!r->test(&in, &bytes)) {
      usleep(1000);
      continue;
    }
    const auto* b = static_cast<const unsigned char*>(in);
    if (got < 3) {
      ASSERT_EQ(bytes, sizeOf(got));
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(b[i], pattern(got, i)) << "byte " << i;
    } else {
      ASSERT_EQ(bytes, 4096u);
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(b[i], 0x5A) << "byte " << i;
    }
    r->release();
    ++got;
    quietSince = nowNs();
  }
  EXPECT_LT(got, 3 + extra);  // the last ones were given up
  // The sender shut its side: the receiver is told now, not at its deadline.
  const void* in;
  size_t bytes;
  const int64_t t0 = nowNs();
  EXPECT_EQ(r->wait(&in, &bytes, waitFor(kLong)), chorusRemoteError) << threadLastError();
  EXPECT_LT(nowNs() - t0, 5'000'000'000ll);
}

TEST(TcpTransport, StrangersAtTheListenerAreRejectedAndPeersStillConnect) {
  Net net(2, opts(2));
  SockAddr target;
  ASSERT_TRUE(tcp::TcpTransport::infoAddress(net.info[1].data(), &target));
  std::vector<Fd> strangers;
  auto dial = [&] {
    Fd s;
    EXPECT_EQ(connectRetry(target, nowNs() + kLong, -1, &s, "listener"), chorusSuccess);
    return s;
  };
  // 1: garbage longer than a hello.
  Fd g = dial();
  std::string junk(200, 'x');
  EXPECT_EQ(sendAll(g.get(), junk.data(), junk.size(), nowNs() + kLong, -1, "junk"), chorusSuccess);
  strangers.push_back(std::move(g));
  // 2: a well-formed hello with the wrong token, claiming to be rank 0's socket 0.
  Fd w = dial();
  tcp::Hello h{tcp::kHelloMagic, 0xdeadbeef, 0, 0};
  EXPECT_EQ(sendAll(w.get(), &h, sizeof(h), nowNs() + kLong, -1, "hello"), chorusSuccess);
  strangers.push_back(std::move(w));
  // 3: half a hello, then silence; 4: connect and hang up.
  Fd half = dial();
  EXPECT_EQ(sendAll(half.get(), &h, 5, nowNs() + kLong, -1, "half"), chorusSuccess);
  strangers.push_back(std::move(half));
  dial().reset();
  usleep(50000);
  // The rejected ones were closed by rank 1.
  for (int i = 0; i < 2; ++i) {
    char c;
    ssize_t r = ::recv(strangers[static_cast<size_t>(i)].get(), &c, 1, 0);
    // Closed with our junk unread: a reset rather than an orderly end.
    EXPECT_TRUE(r == 0 || (r < 0 && errno == ECONNRESET)) << "stranger " << i << ": " << r;
  }

  net.connectAll();
  std::thread a([&] { sendMessages(net.s(0, 1), 100); });
  recvMessages(net.r(1, 0), 100);
  a.join();
}

TEST(TcpTransport, MissingPeerSocketsFailTheConnectionAfterTheDeadline) {
  tcp::Options o = opts(2);
  o.timeoutNs = 300'000'000;
  Net net(2, o);
  // Only rank 1 connects; rank 0's sockets towards it never come.
  ASSERT_EQ(net.t[1]->connect(net.ctx[1], 0, net.info[0].data(), &net.send[1][0], &net.recv[1][0]),
            chorusSuccess);
  int64_t t0 = nowNs();
  net.t[1]->finishSetup();
  EXPECT_GE(nowNs() - t0, 250'000'000);
  const void* in;
  size_t bytes;
  EXPECT_EQ(net.r(1, 0)->wait(&in, &bytes, waitFor(kLong)), chorusRemoteError);
  EXPECT_NE(std::string(threadLastError()).find("opened only 0 of its 2"), std::string::npos)
      << threadLastError();
}

TEST(TcpTransport, TeardownInAnyOrderWhileIdle) {
  Net net(3, opts(2));
  net.connectAll();
  sendMessages(net.s(2, 0), 3);
  recvMessages(net.r(0, 2), 3);
  net.kill(1, false);
  net.kill(0, true);
  usleep(20000);
  net.kill(2, false);  // its peers are gone: no crash, no hang
}

}  // namespace
}  // namespace chorus
