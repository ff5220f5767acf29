// test_shrink_handshake.cc — the survivors' handshakes (src/comm/shrink.cc) against a
// hostile insider: ranks are threads, each with a real socket bootstrap; one rank sends
// crafted messages (garbled, short, from a later round, of the other kind, a mask of
// garbage) or nothing at all, or a hostile leader answers with garbage. Every honest rank
// must return an error naming what happened within its bounded wait, never crash or hang.
// Also: stale messages of an earlier round are skipped, and chorusCommFailedRanks' probe
// finds a rank whose bootstrap is gone. (Suite 'tsan' runs it under ThreadSanitizer.)
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/comm/comm.h"
#include "src/comm/shrink.h"
#include "src/core/checks.h"

namespace chorus {
namespace {

constexpr int kRanks = 4;
constexpr int64_t kTimeoutNs = 1000000000ll;  // 1 s: the leader's window is 2 T + 2 s

struct Group {
  std::vector<std::unique_ptr<chorusComm>> comms;
};

// kRanks communicators with only a bootstrap (all the handshakes use).
void makeGroup(Group* g) {
  chorusUniqueId id;
  ASSERT_EQ(bootstrapCreateRoot(&id), chorusSuccess);
  g->comms.resize(kRanks);
  std::vector<std::thread> ts;
  std::vector<chorusResult_t> res(kRanks, chorusInternalError);
  for (int r = 0; r < kRanks; ++r) {
    g->comms[static_cast<size_t>(r)] = std::make_unique<chorusComm>();
    chorusComm* c = g->comms[static_cast<size_t>(r)].get();
    c->rank = r;
    c->nranks = kRanks;
    c->timeoutNs = kTimeoutNs;
    ts.emplace_back([c, r, id, &res] {
      res[static_cast<size_t>(r)] =
          Bootstrap::init(id, r, kRanks, monotonicNs() + 10 * kTimeoutNs, &c->bootstrap);
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(res[static_cast<size_t>(r)], chorusSuccess);
}

std::vector<uint8_t> message(FtKind kind, uint32_t round, const std::vector<uint8_t>& mask,
                             uint32_t magic = kFtMagic) {
  FtHeader h{};
  h.magic = magic;
  h.kind = static_cast<uint32_t>(kind);
  h.round = round;
  h.status = chorusSuccess;
  std::vector<uint8_t> out(sizeof h + mask.size());
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + sizeof h, mask.data(), mask.size());
  return out;
}

struct Outcome {
  chorusResult_t res = chorusInternalError;
  std::string detail;
  ShrinkResult s;
  double seconds = 0;
};

// Honest ranks (all but `hostile`) shrink with `excluded` at round 1; `hostile` runs `act`.
std::vector<Outcome> shrinkWith(Group& g, const std::vector<uint8_t>& excluded, int hostile,
                                const std::function<void(chorusComm*)>& act) {
  std::vector<Outcome> out(kRanks);
  std::vector<std::thread> ts;
  for (int r = 0; r < kRanks; ++r) {
    chorusComm* c = g.comms[static_cast<size_t>(r)].get();
    ts.emplace_back([&, c, r] {
      if (r == hostile) {
        act(c);
        return;
      }
      clearThreadLastError();
      c->ftRound = 1;
      const int64_t t0 = monotonicNs();
      Outcome& o = out[static_cast<size_t>(r)];
      o.res = shrinkRendezvous(c, excluded, "", &o.s);
      o.detail = threadLastError();
      o.seconds = static_cast<double>(monotonicNs() - t0) / 1e9;
    });
  }
  for (auto& t : ts) t.join();
  return out;
}

const std::vector<uint8_t> kNone(kRanks, 0);

// Every honest rank fails with `code`, its detail containing `needle`, within its window.
void expectAllFail(const std::vector<Outcome>& out, int hostile, chorusResult_t code,
                   const std::string& needle) {
  for (int r = 0; r < kRanks; ++r) {
    if (r == hostile) continue;
    const Outcome& o = out[static_cast<size_t>(r)];
    EXPECT_EQ(o.res, code) << "rank " << r << ": " << o.detail;
    EXPECT_NE(o.detail.find(needle), std::string::npos) << "rank " << r << ": " << o.detail;
    EXPECT_LT(o.seconds, 3 * kTimeoutNs / 1e9 + 4.5) << "rank " << r;
  }
}

TEST(ShrinkHandshake, GarbledMagicFromAnInsider) {
  Group g;
  makeGroup(&g);
  auto out = shrinkWith(g, kNone, 3, [](chorusComm* c) {
    auto m = message(FtKind::Shrink, 1, kNone, 0xdeadbeef);
    EXPECT_EQ(c->bootstrap->send(0, kFtTag, m.data(), m.size()), chorusSuccess);
  });
  expectAllFail(out, 3, chorusRemoteError, "rank 3 sent a garbled");
}

TEST(ShrinkHandshake, ShortMessage) {
  Group g;
  makeGroup(&g);
  auto out = shrinkWith(g, kNone, 3, [](chorusComm* c) {
    uint8_t junk[10] = {1, 2, 3};
    EXPECT_EQ(c->bootstrap->send(0, kFtTag, junk, sizeof junk), chorusSuccess);
  });
  expectAllFail(out, 3, chorusInvalidUsage, "rank 3 sent 10 bytes");
}

TEST(ShrinkHandshake, LaterRoundMeansCallsDoNotMatch) {
  Group g;
  makeGroup(&g);
  auto out = shrinkWith(g, kNone, 3, [](chorusComm* c) {
    auto m = message(FtKind::Shrink, 1000, kNone);
    EXPECT_EQ(c->bootstrap->send(0, kFtTag, m.data(), m.size()), chorusSuccess);
  });
  expectAllFail(out, 3, chorusInvalidUsage, "do not match");
}

TEST(ShrinkHandshake, OtherKindOfCall) {
  Group g;
  makeGroup(&g);
  auto out = shrinkWith(g, kNone, 3, [](chorusComm* c) {
    auto m = message(FtKind::FailedRanks, 1, kNone);
    EXPECT_EQ(c->bootstrap->send(0, kFtTag, m.data(), m.size()), chorusSuccess);
  });
  expectAllFail(out, 3, chorusInvalidUsage, "rank 3 called chorusCommFailedRanks");
}

TEST(ShrinkHandshake, GarbageMaskIsADifferentList) {
  Group g;
  makeGroup(&g);
  auto out = shrinkWith(g, kNone, 3, [](chorusComm* c) {
    auto m = message(FtKind::Shrink, 1, std::vector<uint8_t>(kRanks, 0xa5));
    EXPECT_EQ(c->bootstrap->send(0, kFtTag, m.data(), m.size()), chorusSuccess);
  });
  expectAllFail(out, 3, chorusInvalidArgument, "rank 3 excludes {0, 1, 2, 3}");
}

TEST(ShrinkHandshake, SilentRankTimesOutNamingIt) {
  Group g;
  makeGroup(&g);
  auto out = shrinkWith(g, kNone, 3, [](chorusComm*) {});
  expectAllFail(out, 3, chorusTimeout, "rank 3 did not join the shrink");
}

TEST(ShrinkHandshake, HostileLeaderAnswersGarbage) {
  Group g;
  makeGroup(&g);
  auto out = shrinkWith(g, kNone, 0, [](chorusComm* c) {
    for (int p = 1; p < kRanks; ++p) {
      std::vector<uint8_t> m(sizeof(FtHeader) + kRanks);
      EXPECT_EQ(c->bootstrap->recv(p, kFtTag, m.data(), m.size()), chorusSuccess);
      std::vector<uint8_t> junk(m.size(), 0x5a);
      EXPECT_EQ(c->bootstrap->send(p, kFtTag, junk.data(), junk.size()), chorusSuccess);
    }
  });
  expectAllFail(out, 0, chorusRemoteError, "rank 0 sent a garbled");
}

TEST(ShrinkHandshake, StaleMessageOfAnEarlierRoundIsSkipped) {
  Group g;
  makeGroup(&g);
  // Rank 3 first leaves a message of round 0 behind (as a rank the leader gave up on
  // would), then takes part honestly in round 1: the shrink succeeds, one id for all.
  std::vector<Outcome> out(kRanks);
  std::vector<std::thread> ts;
  for (int r = 0; r < kRanks; ++r) {
    chorusComm* c = g.comms[static_cast<size_t>(r)].get();
    ts.emplace_back([&, c, r] {
      clearThreadLastError();
      if (r == 3) {
        auto m = message(FtKind::Shrink, 0, std::vector<uint8_t>(kRanks, 1));
        EXPECT_EQ(c->bootstrap->send(0, kFtTag, m.data(), m.size()), chorusSuccess);
      }
      c->ftRound = 1;
      Outcome& o = out[static_cast<size_t>(r)];
      o.res = shrinkRendezvous(c, kNone, "", &o.s);
      o.detail = threadLastError();
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < kRanks; ++r) {
    const Outcome& o = out[static_cast<size_t>(r)];
    ASSERT_EQ(o.res, chorusSuccess) << "rank " << r << ": " << o.detail;
    EXPECT_EQ(o.s.nranks, kRanks);
    EXPECT_EQ(o.s.rank, r);
    EXPECT_EQ(std::memcmp(&o.s.id, &out[0].s.id, sizeof o.s.id), 0) << "rank " << r;
  }
}

TEST(ShrinkHandshake, FailedRanksFindsAGoneBootstrap) {
  Group g;
  makeGroup(&g);
  g.comms[2]->bootstrap.reset();  // rank 2 "dies": its listener closes
  std::vector<std::vector<int>> failed(kRanks);
  std::vector<chorusResult_t> res(kRanks, chorusInternalError);
  std::vector<std::thread> ts;
  for (int r : {0, 1, 3}) {
    chorusComm* c = g.comms[static_cast<size_t>(r)].get();
    ts.emplace_back([&, c, r] {
      res[static_cast<size_t>(r)] = failedRanksAgree(c, &failed[static_cast<size_t>(r)]);
    });
  }
  for (auto& t : ts) t.join();
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(res[static_cast<size_t>(r)], chorusSuccess) << "rank " << r;
    EXPECT_EQ(failed[static_cast<size_t>(r)], std::vector<int>{2}) << "rank " << r;
  }
}

}  // namespace
}  // namespace chorus
