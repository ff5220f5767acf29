// The TCP receive path against a hand-written peer: a raw socket that says hello as rank 0
// and then writes stripe headers and payloads with the cuts it chooses. The receiver reads
// through a read-ahead buffer (several messages per recv where they are queued, a header
// and its payload in one), so every way the byte stream can be cut or joined must give the
// same messages: many messages in one write, one byte per segment, headers cut anywhere,
// odd sizes around the read-ahead's edges. A peer that dies mid-header or mid-payload must
// be a prompt chorusRemoteError that names it, never a hang or a short message.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/core/checks.h"
#include "src/core/wait.h"
#include "transports/tcp/transport.h"
#include "transports/tcp/wire.h"

namespace chorus {
namespace {

constexpr int64_t kLong = 20'000'000'000ll;
constexpr size_t kSlot = 65536;

WaitCtx waitFor(int64_t ns) { return WaitCtx{nowNs() + ns, nullptr, 100, "test"}; }

tcp::Options opts() {
  tcp::Options o;
  auto* s = reinterpret_cast<sockaddr_in*>(&o.bindAddr.ss);
  s->sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &s->sin_addr);
  o.bindAddr.len = sizeof(sockaddr_in);
  o.nsocks = 1;
  o.slotBytes = kSlot;
  o.depth = 4;
  o.pairLane = false;
  o.timeoutNs = kLong;
  return o;
}

/// Rank 1 is a real transport; rank 0 is a real transport's listener (so rank 1 can open
/// its own sockets) plus `raw`, one socket to rank 1 that this test writes by hand.
struct FakePeer {
  std::vector<PeerInfo> peers{PeerInfo{42, 1, 0, -1, 0}, PeerInfo{42, 1, 1, -1, 0}};
  std::array<std::array<char, kConnectInfoBytes>, 2> info{};
  std::vector<TransportContext> ctx;
  std::unique_ptr<tcp::TcpTransport> t0, t1;
  std::unique_ptr<SendConn> send;
  std::unique_ptr<RecvConn> recv;
  Fd raw;

  explicit FakePeer(int64_t busyPollNs) {
    tcp::Options o = opts();
    o.busyPollNs = busyPollNs;
    for (int i = 0; i < 2; ++i) ctx.push_back(TransportContext{i, 2, &peers, 0x77, 4096, 4, 1024});
    t0 = std::make_unique<tcp::TcpTransport>(o);
    t1 = std::make_unique<tcp::TcpTransport>(o);
    EXPECT_EQ(t0->setup(ctx[0], info[0].data()), chorusSuccess);
    EXPECT_EQ(t1->setup(ctx[1], info[1].data()), chorusSuccess);
    EXPECT_EQ(t1->connect(ctx[1], 0, info[0].data(), &send, &recv), chorusSuccess);
    tcp::ConnectInfo ci;
    std::memcpy(&ci, info[1].data(), sizeof(ci));
    SockAddr to;
    EXPECT_TRUE(to.assign(ci.addr, ci.addrLen));
    EXPECT_EQ(connectRetry(to, nowNs() + kLong, -1, &raw, "rank 1"), chorusSuccess);
    const tcp::Hello h{tcp::kHelloMagic, ci.token, 0, 0};
    write(&h, sizeof(h));
    t1->finishSetup();  // returns once the hello is attached
  }
  ~FakePeer() {
    send.reset();
    recv.reset();
    t1->wakeAll();
    t1.reset();
    raw.reset();
    t0.reset();
  }
  void write(const void* p, size_t n) {
    ASSERT_EQ(sendAll(raw.get(), p, n, nowNs() + kLong, -1, "raw"), chorusSuccess);
  }
};

unsigned char pattern(uint64_t msg, size_t i) {
  return static_cast<unsigned char>(msg * 37 + i * 11 + (i >> 9));
}

/// Message m's bytes on the wire: its stripe header (one stripe) and its payload.
std::string wireMessage(uint64_t m, size_t bytes) {
  tcp::StripeHeader h{
      m, static_cast<uint32_t>(bytes), 0, static_cast<uint32_t>(bytes), 1, 0, tcp::kStripeCheck};
  std::string w(reinterpret_cast<const char*>(&h), sizeof(h));
  for (size_t i = 0; i < bytes; ++i) w.push_back(static_cast<char>(pattern(m, i)));
  return w;
}

// Around the header (24 B), the read-aheads (4 and 64 KiB, less a header) and the slot,
// small after large and large after small.
size_t sizeOf(uint64_t m) {
  static const size_t kSizes[] = {0,     1,     8,     23,   24,    25,    511,   4047,  4048,
                                  4049,  4071,  4072,  4073, 4095,  4096,  4097,  8143,  8144,
                                  8168,  8192,  3,     12,   65535, 65536, 16383, 16384, 100,
                                  65511, 65512, 65513, 5,    65536, 65536, 1};
  const size_t k = sizeof(kSizes) / sizeof(kSizes[0]);
  return m < k ? kSizes[m] : static_cast<size_t>((m * 2654435761u) % (kSlot + 1));
}

void expectMessages(RecvConn* r, uint64_t from, uint64_t to) {
  for (uint64_t m = from; m < to; ++m) {
    const void* slot;
    size_t bytes = 12345;
    ASSERT_EQ(r->wait(&slot, &bytes, waitFor(kLong)), chorusSuccess) << threadLastError();
    ASSERT_EQ(bytes, sizeOf(m)) << "message " << m;
    const auto* b = static_cast<const unsigned char*>(slot);
    for (size_t i = 0; i < bytes; ++i)
      ASSERT_EQ(b[i], pattern(m, i)) << "message " << m << " byte " << i;
    r->release();
  }
}

// How the writer cuts the stream of every message into writes.
enum class Cut { kAllAtOnce, kEveryByteFirst, kOddPieces };

class TcpStream : public ::testing::TestWithParam<std::tuple<Cut, int64_t>> {};

TEST_P(TcpStream, EveryCutOfTheByteStreamGivesTheSameMessages) {
  const Cut cut = std::get<0>(GetParam());
  FakePeer p(std::get<1>(GetParam()));
  const uint64_t kMessages = 120;  // 30 trips around the 4-slot FIFO
  std::string stream;
  for (uint64_t m = 0; m < kMessages; ++m) stream += wireMessage(m, sizeOf(m));
  std::thread writer([&] {
    size_t off = 0;
    size_t piece = 0;
    while (off < stream.size()) {
      size_t n = stream.size() - off;
      if (cut == Cut::kEveryByteFirst && off < 3000) {
        n = 1;  // the first messages a byte per segment: headers in 24 reads
        if (off % 97 == 0) usleep(200);
      } else if (cut == Cut::kOddPieces) {
        static const size_t kPieces[] = {1, 23, 25, 4095, 4097, 7, 24, 9000, 4072, 48, 3};
        n = std::min(n, kPieces[piece++ % (sizeof(kPieces) / sizeof(kPieces[0]))]);
        if (piece % 5 == 0) usleep(100);
      }
      p.write(stream.data() + off, n);
      off += n;
    }
  });
  expectMessages(p.recv.get(), 0, kMessages);
  writer.join();
}

INSTANTIATE_TEST_SUITE_P(
    Cuts, TcpStream,
    // Busy poll 100 us: the waiting thread reads; 0: the progress thread always does.
    ::testing::Combine(::testing::Values(Cut::kAllAtOnce, Cut::kEveryByteFirst, Cut::kOddPieces),
                       ::testing::Values(int64_t{100000}, int64_t{0})),
    [](const ::testing::TestParamInfo<std::tuple<Cut, int64_t>>& i) {
      const Cut c = std::get<0>(i.param);
      return std::string(c == Cut::kAllAtOnce        ? "all_at_once"
                         : c == Cut::kEveryByteFirst ? "every_byte_first"
                                                     : "odd_pieces") +
             (std::get<1>(i.param) ? "_caller_reads" : "_thread_reads");
    });

// The peer dies with a message cut short: the messages before it arrive whole, the cut one
// is a remote error naming the peer, promptly (the socket's end is seen, no deadline).
TEST(TcpStreamDeath, APeerThatDiesMidMessageIsAPromptRemoteError) {
  struct Death {
    const char* where;
    size_t keep;  // bytes of the last message's wire form that are sent before the close
  };
  const size_t last = 5000;
  for (const Death d : {Death{"mid-header", 10}, Death{"after the header", 24},
                        Death{"mid-payload", 24 + 3000}, Death{"one byte short", 24 + last - 1}}) {
    SCOPED_TRACE(d.where);
    FakePeer p(100000);
    std::string stream;
    for (uint64_t m = 0; m < 3; ++m) stream += wireMessage(m, sizeOf(m));
    ASSERT_EQ(sizeOf(3), 23u);
    stream += wireMessage(3, sizeOf(3));
    std::string cut = wireMessage(4, last);
    // Whole messages and the start of the cut one in a single write: the receiver's read
    // finds the complete ones and the stub together.
    stream += cut.substr(0, d.keep);
    p.write(stream.data(), stream.size());
    usleep(20000);
    p.raw.reset();
    expectMessages(p.recv.get(), 0, 4);
    const void* slot;
    size_t bytes;
    const int64_t t0 = nowNs();
    EXPECT_EQ(p.recv->wait(&slot, &bytes, waitFor(kLong)), chorusRemoteError);
    EXPECT_LT(nowNs() - t0, 5'000'000'000ll);
    const std::string err = threadLastError();
    EXPECT_NE(err.find("rank 0 (127.0.0.1:"), std::string::npos) << err;
    EXPECT_NE(err.find("closed the connection"), std::string::npos) << err;
  }
}

// A header that is wrong in any field stops the connection with a message saying what,
// even when it arrives in the same read as good messages before it.
TEST(TcpStreamDeath, ABadHeaderBehindGoodMessagesFailsTheConnection) {
  FakePeer p(100000);
  std::string stream = wireMessage(0, 100) + wireMessage(1, 7);
  tcp::StripeHeader bad{2, 10, 0, static_cast<uint32_t>(kSlot) + 1, 1, 0, tcp::kStripeCheck};
  stream.append(reinterpret_cast<const char*>(&bad), sizeof(bad));
  p.write(stream.data(), stream.size());
  const void* slot;
  size_t bytes;
  for (uint64_t m = 0; m < 2; ++m) {
    ASSERT_EQ(p.recv->wait(&slot, &bytes, waitFor(kLong)), chorusSuccess) << threadLastError();
    EXPECT_EQ(bytes, m == 0 ? 100u : 7u);
    EXPECT_EQ(static_cast<const unsigned char*>(slot)[bytes - 1], pattern(m, bytes - 1));
    p.recv->release();
  }
  EXPECT_EQ(p.recv->wait(&slot, &bytes, waitFor(kLong)), chorusRemoteError);
  const std::string err = threadLastError();
  EXPECT_NE(err.find("stripe outside the slot"), std::string::npos) << err;
}

}  // namespace
}  // namespace chorus
