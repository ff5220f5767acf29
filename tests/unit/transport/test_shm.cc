// The shared-memory transport on its own: two ranks as threads in one process, connected by
// hand (no bootstrap), exchanging slots and LL messages. Checks ordering, sizes, wrap-around
// of the FIFO and of the LL buffers, back-pressure, deadlines, abort, and that no segment
// name is left in /dev/shm.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/core/checks.h"
#include "src/core/wait.h"
#include "transports/shm/connection.h"
#include "transports/shm/layout.h"
#include "transports/shm/transport.h"
#include "transports/transport.h"

namespace chorus {
namespace {

struct Pair {
  std::unique_ptr<Transport> t[2];
  std::unique_ptr<SendConn> send[2];  // send[i]: i -> 1-i
  std::unique_ptr<RecvConn> recv[2];  // recv[i]: (1-i) -> i
  std::vector<PeerInfo> peers{2};
  TransportContext ctx[2];
  std::string names[2];

  explicit Pair(size_t slot = 4096, int depth = 4, size_t ll = 1024) {
    static std::atomic<uint64_t> uniq{1};
    const uint64_t hash = 0xabc000 + uniq++;
    char info[2][kConnectInfoBytes] = {};
    for (int i = 0; i < 2; ++i) {
      peers[static_cast<size_t>(i)] = PeerInfo{42, 1, i, -1, 0};
      ctx[i] = TransportContext{i, 2, &peers, hash, slot, depth, ll};
      t[i] = shm::createShmTransport(ctx[i]);
      EXPECT_EQ(t[i]->setup(ctx[i], info[i]), chorusSuccess);
      names[i] = info[i];
    }
    for (int i = 0; i < 2; ++i)
      EXPECT_EQ(t[i]->connect(ctx[i], 1 - i, info[1 - i], &send[i], &recv[i]), chorusSuccess);
    for (int i = 0; i < 2; ++i) t[i]->finishSetup();
  }
};

WaitCtx waitFor(int64_t ns, const std::atomic<int>* abortFlag = nullptr) {
  return WaitCtx{nowNs() + ns, abortFlag, 100, "test"};
}

bool shmNameExists(const std::string& name) {
  std::string path = "/dev/shm" + name;
  return access(path.c_str(), F_OK) == 0;
}

TEST(ShmTransport, SlotsArriveInOrderWithTheirSizesThroughManyWrapArounds) {
  Pair p(4096, 3);
  const int kMessages = 500;
  std::thread sender([&] {
    for (int m = 0; m < kMessages; ++m) {
      void* slot;
      ASSERT_EQ(p.send[0]->acquire(&slot, waitFor(10'000'000'000)), chorusSuccess);
      size_t bytes = static_cast<size_t>(m % 4096);
      std::memset(slot, m & 0xff, bytes);
      p.send[0]->post(bytes);
    }
  });
  for (int m = 0; m < kMessages; ++m) {
    const void* slot;
    size_t bytes = 0;
    ASSERT_EQ(p.recv[1]->wait(&slot, &bytes, waitFor(10'000'000'000)), chorusSuccess);
    ASSERT_EQ(bytes, static_cast<size_t>(m % 4096));
    const auto* b = static_cast<const unsigned char*>(slot);
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(b[i], m & 0xff) << "message " << m;
    p.recv[1]->release();
  }
  sender.join();
}

TEST(ShmTransport, FullFifoBlocksTheSenderUntilTheDeadline) {
  Pair p(4096, 2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_NE(p.send[0]->tryAcquire(), nullptr);
    p.send[0]->post(8);
  }
  EXPECT_EQ(p.send[0]->tryAcquire(), nullptr);
  void* slot;
  int64_t t0 = nowNs();
  EXPECT_EQ(p.send[0]->acquire(&slot, waitFor(50'000'000)), chorusTimeout);
  EXPECT_GE(nowNs() - t0, 50'000'000);
  // Releasing one slot on the other side frees exactly one.
  const void* in;
  size_t bytes;
  ASSERT_TRUE(p.recv[1]->test(&in, &bytes));
  EXPECT_EQ(bytes, 8u);
  p.recv[1]->release();
  EXPECT_NE(p.send[0]->tryAcquire(), nullptr);
}

TEST(ShmTransport, EmptyFifoTimesOutAndAbortUnblocksAWaiter) {
  Pair p;
  const void* in;
  size_t bytes;
  EXPECT_FALSE(p.recv[1]->test(&in, &bytes));
  EXPECT_EQ(p.recv[1]->wait(&in, &bytes, waitFor(20'000'000)), chorusTimeout);

  std::atomic<int> abortFlag{0};
  chorusResult_t got = chorusSuccess;
  std::thread waiter(
      [&] { got = p.recv[1]->wait(&in, &bytes, waitFor(30'000'000'000, &abortFlag)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it reach the futex
  abortFlag.store(1);
  p.t[1]->wakeAll();
  waiter.join();
  EXPECT_EQ(got, chorusAborted);
}

TEST(ShmTransport, LowLatencyMessagesOfEverySizeAndManyRounds) {
  Pair p(4096, 4, 1024);
  ASSERT_GE(p.send[0]->llMaxBytes(), 1024u);
  const int kRounds = 300;
  std::thread sender([&] {
    std::vector<unsigned char> buf(1024);
    for (int r = 0; r < kRounds; ++r) {
      size_t bytes = static_cast<size_t>((r * 37) % 1025);
      for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<unsigned char>(r + i);
      ASSERT_EQ(p.send[0]->sendLL(buf.data(), bytes, waitFor(10'000'000'000)), chorusSuccess);
    }
  });
  std::vector<unsigned char> out(1024);
  for (int r = 0; r < kRounds; ++r) {
    size_t bytes = static_cast<size_t>((r * 37) % 1025);
    if (r % 2) {
      ASSERT_EQ(p.recv[1]->recvLL(out.data(), bytes, waitFor(10'000'000'000)), chorusSuccess);
    } else {
      const void* data;
      ASSERT_EQ(p.recv[1]->waitLL(&data, bytes, waitFor(10'000'000'000)), chorusSuccess);
      std::memcpy(out.data(), data, bytes);
      p.recv[1]->releaseLL();
    }
    for (size_t i = 0; i < bytes; ++i)
      ASSERT_EQ(out[i], static_cast<unsigned char>(r + i)) << "round " << r << " byte " << i;
  }
  sender.join();
}

TEST(ShmTransport, LowLatencySenderWaitsForTheReaderBeforeReusingABuffer) {
  Pair p;
  char byte = 7;
  for (int i = 0; i < shm::kLlShortDepth; ++i)
    ASSERT_EQ(p.send[0]->sendLL(&byte, 1, waitFor(1'000'000'000)), chorusSuccess);
  // Every short buffer holds an unread message: the next send must wait, not overwrite.
  EXPECT_EQ(p.send[0]->sendLL(&byte, 1, waitFor(20'000'000)), chorusTimeout);
  // The unread messages are all still there, intact.
  for (int i = 0; i < shm::kLlShortDepth; ++i) {
    char got = 0;
    ASSERT_EQ(p.recv[1]->recvLL(&got, 1, waitFor(1'000'000'000)), chorusSuccess);
    ASSERT_EQ(got, 7) << "message " << i + 1;
  }
}

// A message larger than an LL buffer is refused with a message, and nothing is written: the
// next message in order still arrives intact.
TEST(ShmTransport, LowLatencyMessageLargerThanItsBufferIsRefused) {
  Pair p(4096, 2, 1024);
  const size_t llMax = p.send[0]->llMaxBytes();
  std::vector<char> big(llMax + 1, 5), ok(600, 9);
  EXPECT_EQ(p.send[0]->sendLL(big.data(), big.size(), waitFor(1'000'000'000)), chorusInternalError);
  EXPECT_NE(std::string(threadLastError()).find("low-latency message on shared memory"),
            std::string::npos)
      << threadLastError();
  ASSERT_EQ(p.send[0]->sendLL(ok.data(), ok.size(), waitFor(1'000'000'000)), chorusSuccess);
  std::vector<char> got(600, 0);
  ASSERT_EQ(p.recv[1]->recvLL(got.data(), got.size(), waitFor(1'000'000'000)), chorusSuccess);
  EXPECT_EQ(got, ok);
}

TEST(ShmTransport, LowLatencySenderWaitsBeforeReusingALongBuffer) {
  Pair p(4096, 2, 1024);
  std::vector<char> msg(600, 3);  // > kLlLineMax: a long buffer
  for (int i = 0; i < shm::kLlDepth; ++i)
    ASSERT_EQ(p.send[0]->sendLL(msg.data(), msg.size(), waitFor(1'000'000'000)), chorusSuccess);
  EXPECT_EQ(p.send[0]->sendLL(msg.data(), msg.size(), waitFor(20'000'000)), chorusTimeout);
}

// Short and long messages interleave on one sequence: each kind reuses its own buffers only
// once the receiver has consumed the message that last used them, and every message arrives
// intact and in order (a sender running up to a ring ahead).
TEST(ShmTransport, ShortAndLongLowLatencyMessagesInterleaveInOrder) {
  Pair p(4096, 2, 1024);
  const size_t kSizes[] = {8, 1024, 100, 600, 448, 449, 0, 56, 57};
  constexpr int kRounds = 300;
  std::thread sender([&] {
    std::vector<unsigned char> msg(1024);
    for (int r = 0; r < kRounds; ++r) {
      const size_t bytes = kSizes[r % 9];
      for (size_t i = 0; i < bytes; ++i) msg[i] = static_cast<unsigned char>(r * 13 + i);
      ASSERT_EQ(p.send[0]->sendLL(msg.data(), bytes, waitFor(10'000'000'000)), chorusSuccess);
    }
  });
  std::vector<unsigned char> out(1024);
  for (int r = 0; r < kRounds; ++r) {
    const size_t bytes = kSizes[r % 9];
    ASSERT_EQ(p.recv[1]->recvLL(out.data(), bytes, waitFor(10'000'000'000)), chorusSuccess);
    for (size_t i = 0; i < bytes; ++i)
      ASSERT_EQ(out[i], static_cast<unsigned char>(r * 13 + i)) << "message " << r << " byte " << i;
  }
  sender.join();
}

// A short LL message's flag sits where an earlier, longer message in the same buffer left
// data. Data that holds the small numbers a flag used to be (sequence numbers, counts)
// must not read as the arrival of the next message.
TEST(ShmTransport, StaleDataOfALongerMessageIsNotTakenForAShortOnesFlag) {
  Pair p(4096, 2);
  std::vector<uint64_t> words(32);
  std::vector<uint64_t> got(32);
  // Fill the LL buffers with long messages whose every word is the sequence number of the
  // next message to use the same buffer (kLlDepth later): what the old flag would be.
  for (uint64_t seq = 1; seq <= 8; ++seq) {
    for (uint64_t& w : words) w = seq + shm::kLlDepth;
    ASSERT_EQ(p.send[0]->sendLL(words.data(), 256, waitFor(1'000'000'000)), chorusSuccess);
    ASSERT_EQ(p.recv[1]->recvLL(got.data(), 256, waitFor(1'000'000'000)), chorusSuccess);
    ASSERT_EQ(got, words);
  }
  // Nothing sent: a short message must not "arrive" from the stale words.
  uint64_t one = 0;
  EXPECT_EQ(p.recv[1]->recvLL(&one, 8, waitFor(20'000'000)), chorusTimeout);
  const uint64_t v = 0xfeedULL;
  ASSERT_EQ(p.send[0]->sendLL(&v, 8, waitFor(1'000'000'000)), chorusSuccess);
  ASSERT_EQ(p.recv[1]->recvLL(&one, 8, waitFor(1'000'000'000)), chorusSuccess);
  EXPECT_EQ(one, v);
}

// Words equal to the very flag the next message in a buffer will carry, left by earlier
// messages of every layout (long ones in the contiguous area, short ones in the lines): no
// message of any size may arrive from them, because no layout puts data where a flag goes.
// (With the flag right after the data, as before per-line flags, every case below arrived.)
TEST(ShmTransport, StaleWordsEqualToTheNextFlagDoNotPoseAsAMessageOfAnySize) {
  Pair p(4096, 2, 1024);
  const size_t kSizes[] = {1024, 440, 1000, 200, 64, 600, 8};  // long, short, long, ...
  std::vector<uint64_t> words(128), got(128);
  uint64_t seq = 0;
  for (size_t bytes : kSizes) {
    // Fill each of the kLlDepth buffers with a message whose every word is the flag that
    // the next message to use that buffer will carry.
    for (int b = 0; b < shm::kLlDepth; ++b) {
      ++seq;
      for (uint64_t& w : words) w = shm::llFlagValue(seq + shm::kLlDepth);
      ASSERT_EQ(p.send[0]->sendLL(words.data(), bytes, waitFor(1'000'000'000)), chorusSuccess);
      ASSERT_EQ(p.recv[1]->recvLL(got.data(), bytes, waitFor(1'000'000'000)), chorusSuccess);
      ASSERT_EQ(std::memcmp(got.data(), words.data(), bytes), 0);
    }
    // Nothing sent: no size may "arrive".
    for (size_t want : kSizes) {
      const void* data = nullptr;
      EXPECT_EQ(p.recv[1]->waitLL(&data, want, waitFor(5'000'000)), chorusTimeout)
          << want << "-byte message read from the stale words of " << bytes << "-byte ones";
    }
  }
  // Positive control: a real message of each size still arrives, intact.
  for (size_t bytes : kSizes) {
    for (size_t i = 0; i < words.size(); ++i) words[i] = bytes * 1000 + i;
    ASSERT_EQ(p.send[0]->sendLL(words.data(), bytes, waitFor(1'000'000'000)), chorusSuccess);
    const void* data = nullptr;
    ASSERT_EQ(p.recv[1]->waitLL(&data, bytes, waitFor(1'000'000'000)), chorusSuccess);
    EXPECT_EQ(std::memcmp(data, words.data(), bytes), 0) << bytes;
    p.recv[1]->releaseLL();
  }
}

// A short message spread over several lines counts as arrived only once every one of its
// lines carries its flag: each line missing in turn (its flag left from the message before)
// keeps the reader waiting, whatever the other lines hold. Written by hand into a
// connection area in private memory, to leave one line out on purpose.
TEST(ShmTransport, AMultiLineMessageArrivesOnlyWhenEveryLineCarriesItsFlag) {
  shm::AreaGeometry geo{4096, 2, 1024};
  void* mem = std::aligned_alloc(shm::kPage, geo.areaBytes());
  ASSERT_NE(mem, nullptr);
  std::memset(mem, 0, geo.areaBytes());
  Doorbell bells[2] = {};
  shm::ConnView v;
  v.ctrl = static_cast<shm::ConnCtrl*>(mem);
  v.ll = static_cast<char*>(mem) + geo.ctrlBytes();
  v.slots = static_cast<char*>(mem) + geo.slotsOffset();
  v.geo = geo;
  v.localBell = &bells[0];
  v.remoteBell = &bells[1];
  v.peerPid = 0;
  v.peerRank = 1;
  shm::ShmSendConn send(v);
  shm::ShmRecvConn recv(v);

  const size_t bytes = 4 * shm::kLlLineData - 8;  // 4 lines, the last one partly
  ASSERT_EQ(shm::llLines(bytes), 4u);
  std::vector<unsigned char> msg(bytes), out(bytes);
  // Messages 1..kLlShortDepth through the real path; message kLlShortDepth + 1 reuses
  // short buffer 1.
  for (int m = 1; m <= shm::kLlShortDepth; ++m) {
    for (size_t i = 0; i < bytes; ++i) msg[i] = static_cast<unsigned char>(m * 7 + i);
    ASSERT_EQ(send.sendLL(msg.data(), bytes, waitFor(1'000'000'000)), chorusSuccess);
    ASSERT_EQ(recv.recvLL(out.data(), bytes, waitFor(1'000'000'000)), chorusSuccess);
    ASSERT_EQ(out, msg);
  }
  const uint64_t seq = shm::kLlShortDepth + 1;
  char* buf = v.ll + geo.llShortOffset(seq);
  auto flag = [&](size_t line) {
    return reinterpret_cast<std::atomic<uint64_t>*>(buf + shm::llLineFlagOffset(line));
  };
  for (size_t i = 0; i < bytes; ++i) msg[i] = static_cast<unsigned char>(0xA0 ^ i);
  for (size_t l = 0; l < 4; ++l) {
    const size_t n = std::min(shm::kLlLineData, bytes - l * shm::kLlLineData);
    std::memcpy(buf + l * shm::kLlLineBytes, msg.data() + l * shm::kLlLineData, n);
    ASSERT_EQ(flag(l)->load(), shm::llFlagValue(1)) << "line " << l << " holds message 1's flag";
    flag(l)->store(shm::llFlagValue(seq));
  }
  for (size_t missing = 0; missing < 4; ++missing) {
    flag(missing)->store(shm::llFlagValue(1));  // as message 1 left it
    const void* data = nullptr;
    EXPECT_EQ(recv.waitLL(&data, bytes, waitFor(5'000'000)), chorusTimeout)
        << "arrived without line " << missing;
    EXPECT_EQ(recv.recvLL(out.data(), bytes, waitFor(5'000'000)), chorusTimeout)
        << "arrived without line " << missing;
    flag(missing)->store(shm::llFlagValue(seq));
  }
  // Every line there: the message arrives, gathered from its lines.
  ASSERT_EQ(recv.recvLL(out.data(), bytes, waitFor(1'000'000'000)), chorusSuccess);
  EXPECT_EQ(out, msg);
  std::free(mem);
}

TEST(ShmTransport, SegmentNamesAreGoneOnceConnected) {
  Pair p;
  for (const auto& n : p.names) {
    ASSERT_FALSE(n.empty());
    EXPECT_FALSE(shmNameExists(n)) << n << " still in /dev/shm";
  }
}

TEST(ShmTransport, RejectsADepthOutsideTheLayout) {
  std::vector<PeerInfo> peers{PeerInfo{1, 1, 0, -1, 0}};
  TransportContext ctx{0, 1, &peers, 99, 4096, 64, 1024};
  auto t = shm::createShmTransport(ctx);
  char info[kConnectInfoBytes];
  EXPECT_EQ(t->setup(ctx, info), chorusInvalidArgument);
}

}  // namespace
}  // namespace chorus
