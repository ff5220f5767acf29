// Bootstrap: the working paths. Ranks are threads of this process.
#include <atomic>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "src/bootstrap/bootstrap.h"
#include "src/net/netif.h"
#include "src/bootstrap/root.h"
#include "src/bootstrap/socket_bootstrap.h"
#include "src/bootstrap/uniqueid.h"
#include "src/core/checks.h"
#include "tests/unit/bootstrap/test_bootstrap_util.h"

namespace chorus {
namespace test {
namespace {

uint8_t pattern(int owner, size_t i, size_t bytes) {
  return static_cast<uint8_t>((owner * 131 + i * 7 + bytes) & 0xff);
}

class BootstrapSizes : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapSizes, InitAllGatherBarrier) {
  const int n = GetParam();
  chorusUniqueId id = startRoot();
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, n, monotonicNs() + 10 * kSec, &comms, &res);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(res[static_cast<size_t>(r)], chorusSuccess) << "rank " << r;
    EXPECT_EQ(comms[static_cast<size_t>(r)]->rank(), r);
    EXPECT_EQ(comms[static_cast<size_t>(r)]->nranks(), n);
  }

  const size_t sizes[] = {1, 3, 8, 100, 4096, 65537, size_t(1) << 20};
  std::vector<int> bad(static_cast<size_t>(n), 0);
  std::vector<chorusResult_t> agRes(static_cast<size_t>(n), chorusSuccess);
  std::atomic<int> arrived{0};
  std::vector<int> seenAfterBarrier(static_cast<size_t>(n), -1);
  runRanks(n, [&](int r) {
    Bootstrap* b = comms[static_cast<size_t>(r)].get();
    for (size_t bytes : sizes) {
      if (bytes > 65537 && n > 5) continue;  // keep the 8-rank case quick on 2 cores
      std::vector<uint8_t> buf(bytes * static_cast<size_t>(n), 0xEE);
      for (size_t i = 0; i < bytes; ++i)
        buf[static_cast<size_t>(r) * bytes + i] = pattern(r, i, bytes);
      chorusResult_t rc = b->allGather(buf.data(), bytes);
      if (rc != chorusSuccess) {
        agRes[static_cast<size_t>(r)] = rc;
        return;
      }
      for (int o = 0; o < n; ++o)
        for (size_t i = 0; i < bytes; ++i)
          if (buf[static_cast<size_t>(o) * bytes + i] != pattern(o, i, bytes))
            ++bad[static_cast<size_t>(r)];
    }
    // Barrier: nobody leaves before everybody arrived.
    arrived.fetch_add(1);
    agRes[static_cast<size_t>(r)] = b->barrier();
    seenAfterBarrier[static_cast<size_t>(r)] = arrived.load();
    if (agRes[static_cast<size_t>(r)] == chorusSuccess)
      agRes[static_cast<size_t>(r)] = b->barrier();
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(agRes[static_cast<size_t>(r)], chorusSuccess) << "rank " << r;
    EXPECT_EQ(bad[static_cast<size_t>(r)], 0) << "rank " << r << " saw wrong bytes";
    EXPECT_EQ(seenAfterBarrier[static_cast<size_t>(r)], n)
        << "rank " << r << " left the barrier early";
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapSizes, ::testing::Values(1, 2, 3, 5, 8));

TEST(Bootstrap, SendRecvTagsOutOfOrder) {
  const int n = 3;
  chorusUniqueId id = startRoot();
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, n, monotonicNs() + 10 * kSec, &comms, &res);
  for (auto r : res) ASSERT_EQ(r, chorusSuccess);

  // Each sender sends these in order; the receiver asks in another order, interleaving
  // the two senders. Same-tag messages (tag 3) arrive in the order they were sent.
  struct M {
    int tag;
    size_t bytes;
  };
  const M sent[] = {{5, 10}, {3, 1}, {9, 100002}, {3, 80}, {11, 0}};
  const int recvOrder[] = {2, 4, 1, 0, 3};
  auto content = [](int from, int k, size_t bytes) {
    std::vector<uint8_t> m(bytes);
    for (size_t i = 0; i < bytes; ++i) m[i] = static_cast<uint8_t>(from * 31 + k * 17 + i);
    return m;
  };
  std::vector<int> failures(n, 0);
  runRanks(n, [&](int r) {
    Bootstrap* b = comms[static_cast<size_t>(r)].get();
    auto check = [&](chorusResult_t rc) {
      if (rc != chorusSuccess) ++failures[static_cast<size_t>(r)];
    };
    if (r == 0 || r == 2) {
      for (int k = 0; k < 5; ++k) {
        auto m = content(r, k, sent[k].bytes);
        check(b->send(1, sent[k].tag, m.data(), m.size()));
      }
    } else {
      for (int k : recvOrder) {
        for (int from : {2, 0}) {
          std::vector<uint8_t> got(sent[k].bytes, 0xEE);
          check(b->recv(from, sent[k].tag, got.data(), got.size()));
          if (got != content(from, k, sent[k].bytes)) ++failures[static_cast<size_t>(r)];
        }
      }
    }
    // Self messages.
    uint32_t v = 0xabc00000u + static_cast<uint32_t>(r), w = 0;
    check(b->send(r, 77, &v, sizeof(v)));
    check(b->recv(r, 77, &w, sizeof(w)));
    if (w != v) ++failures[static_cast<size_t>(r)];
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], 0) << "rank " << r;
}

TEST(Bootstrap, LargeMessagesBothWaysAtOnce) {
  // Both ranks send 8 MiB to each other before either receives: only works because a
  // rank drains incoming messages while its own send waits.
  chorusUniqueId id = startRoot();
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, 2, monotonicNs() + 10 * kSec, &comms, &res);
  for (auto r : res) ASSERT_EQ(r, chorusSuccess);
  const size_t bytes = 8u << 20;
  std::vector<chorusResult_t> out(2, chorusInternalError);
  std::vector<int> ok(2, 0);
  runRanks(2, [&](int r) {
    Bootstrap* b = comms[static_cast<size_t>(r)].get();
    b->setDeadline(monotonicNs() + 10 * kSec);
    std::vector<uint8_t> s(bytes), g(bytes);
    for (size_t i = 0; i < bytes; ++i) s[i] = static_cast<uint8_t>(i * 13 + r);
    chorusResult_t rc = b->send(1 - r, 1, s.data(), bytes);
    if (rc == chorusSuccess) rc = b->recv(1 - r, 1, g.data(), bytes);
    out[static_cast<size_t>(r)] = rc;
    bool same = true;
    for (size_t i = 0; i < bytes && same; ++i) same = g[i] == static_cast<uint8_t>(i * 13 + 1 - r);
    ok[static_cast<size_t>(r)] = same;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[static_cast<size_t>(r)], chorusSuccess);
    EXPECT_TRUE(ok[static_cast<size_t>(r)]);
  }
}

TEST(Bootstrap, SizeMismatchIsAClearError) {
  chorusUniqueId id = startRoot();
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  initRanks(id, 2, monotonicNs() + 10 * kSec, &comms, &res);
  for (auto r : res) ASSERT_EQ(r, chorusSuccess);
  char ten[10] = "012345678";
  int follow = 1234, got = 0;
  ASSERT_EQ(comms[0]->send(1, 4, ten, sizeof(ten)), chorusSuccess);
  ASSERT_EQ(comms[0]->send(1, 4, &follow, sizeof(follow)), chorusSuccess);
  char eight[8];
  comms[1]->setDeadline(monotonicNs() + 5 * kSec);
  EXPECT_EQ(comms[1]->recv(0, 4, eight, sizeof(eight)), chorusInvalidUsage);
  EXPECT_NE(std::string(threadLastError()).find("sent 10 bytes"), std::string::npos)
      << threadLastError();
  // The stream is still in step: the next message arrives intact.
  EXPECT_EQ(comms[1]->recv(0, 4, &got, sizeof(got)), chorusSuccess);
  EXPECT_EQ(got, follow);

  // allGather with different record sizes on the two ranks: an error, not garbage.
  std::vector<chorusResult_t> ag(2);
  runRanks(2, [&](int r) {
    comms[static_cast<size_t>(r)]->setDeadline(monotonicNs() + 5 * kSec);
    size_t bytes = r == 0 ? 16 : 24;
    std::vector<uint8_t> buf(bytes * 2, 0);
    ag[static_cast<size_t>(r)] = comms[static_cast<size_t>(r)]->allGather(buf.data(), bytes);
  });
  EXPECT_EQ(ag[0], chorusInvalidUsage);
  EXPECT_EQ(ag[1], chorusInvalidUsage);
}

TEST(Bootstrap, RanksStartBeforeTheRoot) {
  // Reserve a port, release it, let the ranks retry against it, then start the root there.
  uint8_t secret[16];
  ASSERT_EQ(randomSecret(secret), chorusSuccess);
  SockAddr any;
  ASSERT_EQ(resolveHost("127.0.0.1", 0, true, &any), chorusSuccess);
  int port = 0;
  {
    Fd l;
    SockAddr bound;
    ASSERT_EQ(listenOn(any, false, &l, &bound), chorusSuccess);
    port = bound.port();
  }
  chorusUniqueId id;
  ASSERT_EQ(bootstrapIdFor("127.0.0.1", port, secret, &id), chorusSuccess);
  std::vector<std::unique_ptr<Bootstrap>> comms;
  std::vector<chorusResult_t> res;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    chorusUniqueId rid = startRoot(10, "127.0.0.1", port, secret);
    EXPECT_EQ(memcmp(&rid, &id, sizeof(id)), 0);
  });
  initRanks(id, 3, monotonicNs() + 10 * kSec, &comms, &res);
  late.join();
  for (auto r : res) EXPECT_EQ(r, chorusSuccess);
}

TEST(Bootstrap, Ipv6AndWildcardRoots) {
  for (const char* host : {"::1", ""}) {
    if (std::string(host) == "::1") {
      SockAddr v6;
      Fd probe;
      if (resolveHost("::1", 0, true, &v6) != chorusSuccess ||
          listenOn(v6, false, &probe, nullptr) != chorusSuccess) {
        GTEST_LOG_(INFO) << "no IPv6 loopback here; skipping the ::1 root";
        continue;
      }
    }
    chorusUniqueId id = startRoot(10, host);
    if (std::string(host) == "::1") {
      EXPECT_EQ(rootOf(id).family(), AF_INET6);
    }
    std::vector<std::unique_ptr<Bootstrap>> comms;
    std::vector<chorusResult_t> res;
    initRanks(id, 2, monotonicNs() + 10 * kSec, &comms, &res);
    for (auto r : res) EXPECT_EQ(r, chorusSuccess) << "root host '" << host << "'";
    if (res[0] != chorusSuccess || res[1] != chorusSuccess) continue;
    std::vector<chorusResult_t> ag(2);
    std::vector<int> vals(2);
    runRanks(2, [&](int r) {
      int v[2] = {0, 0};
      v[r] = 100 + r;
      ag[static_cast<size_t>(r)] = comms[static_cast<size_t>(r)]->allGather(v, sizeof(int));
      vals[static_cast<size_t>(r)] = v[0] * 1000 + v[1];
    });
    EXPECT_EQ(ag[0], chorusSuccess);
    EXPECT_EQ(vals[0], 100101);
    EXPECT_EQ(vals[1], 100101);
  }
}

TEST(Bootstrap, InterfaceSelection) {
  SockAddr a;
  std::string name;
  ASSERT_EQ(findInterfaceAddr("=lo", &a, &name), chorusSuccess);
  EXPECT_EQ(name, "lo");
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.str(), "127.0.0.1:0");
  ASSERT_EQ(findInterfaceAddr("l", &a, &name), chorusSuccess);  // prefix
  EXPECT_EQ(name, "lo");
  EXPECT_EQ(findInterfaceAddr("=l", &a, &name), chorusInvalidArgument);  // exact: no "l"
  EXPECT_EQ(findInterfaceAddr("nosuchif0", &a, &name), chorusInvalidArgument);
  // The default prefers a non-loopback interface when one is up; "^" excludes.
  ASSERT_EQ(findInterfaceAddr("", &a, &name), chorusSuccess);
  std::string def = name;
  ASSERT_EQ(findInterfaceAddr("^" + def, &a, &name), chorusSuccess);
  EXPECT_NE(name, def);
  if (def != "lo") {
    EXPECT_EQ(a.family() == AF_INET || a.family() == AF_INET6, true);
    ASSERT_EQ(findInterfaceAddr("^lo", &a, &name), chorusSuccess);
    EXPECT_NE(name, "lo");
  }
}

TEST(Bootstrap, BadArgumentsAndIds) {
  std::unique_ptr<Bootstrap> b;
  chorusUniqueId id;
  memset(&id, 0x5a, sizeof(id));
  EXPECT_EQ(Bootstrap::init(id, 0, 2, monotonicNs() + kSec, &b), chorusInvalidArgument);
  chorusUniqueId good = startRoot(2);
  EXPECT_EQ(Bootstrap::init(good, 2, 2, monotonicNs() + kSec, &b), chorusInvalidArgument);
  EXPECT_EQ(Bootstrap::init(good, -1, 2, monotonicNs() + kSec, &b), chorusInvalidArgument);
  EXPECT_EQ(Bootstrap::init(good, 0, 0, monotonicNs() + kSec, &b), chorusInvalidArgument);
  EXPECT_EQ(Bootstrap::init(good, 0, 1, monotonicNs() + kSec, nullptr), chorusInvalidArgument);
  // An id whose address length is nonsense.
  UniqueIdData d;
  memcpy(&d, good.internal, sizeof(d));
  d.addrLen = 9999;
  chorusUniqueId badLen;
  memcpy(badLen.internal, &d, sizeof(d));
  EXPECT_EQ(Bootstrap::init(badLen, 0, 1, monotonicNs() + kSec, &b), chorusInvalidArgument);
  uint8_t secret[16] = {1};
  EXPECT_EQ(bootstrapIdFor("", 1234, secret, &id), chorusInvalidArgument);
  EXPECT_EQ(bootstrapIdFor("127.0.0.1", 70000, secret, &id), chorusInvalidArgument);
  EXPECT_EQ(bootstrapIdFor("no.such.host.invalid", 1234, secret, &id), chorusInvalidArgument);
  ASSERT_EQ(bootstrapIdFor("[::1]", 1234, secret, &id), chorusSuccess);
  EXPECT_EQ(rootOf(id).str(), "[::1]:1234");
  // The root from `good` is served by a 1-rank communicator so it exits now.
  ASSERT_EQ(Bootstrap::init(good, 0, 1, monotonicNs() + 5 * kSec, &b), chorusSuccess);
  EXPECT_EQ(b->nranks(), 1);
  int x = 7;
  EXPECT_EQ(b->allGather(&x, sizeof(x)), chorusSuccess);
  EXPECT_EQ(b->barrier(), chorusSuccess);
  EXPECT_EQ(b->send(1, 0, &x, sizeof(x)), chorusInvalidArgument);
  EXPECT_EQ(b->recv(0, 3, &x, sizeof(x)), chorusInvalidUsage);  // self, nothing sent
}

}  // namespace
}  // namespace test
}  // namespace chorus
