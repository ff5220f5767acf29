// test_rdma_unit.cc — the rdma transport's logic without hardware: HCA/port/GID choice,
// wire packing, the registration cache (over the STAND-IN verbs), discovery outcomes, and
// one connection pair driven by hand through credit exhaustion and chunked writes.
#include <gtest/gtest.h>

#include <errno.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/comm/peer_exchange.h"
#include "src/core/checks.h"
#include "src/core/wait.h"
#include "transports/rdma/device.h"
#include "transports/rdma/reg_cache.h"
#include "transports/rdma/transport.h"
#include "transports/rdma/verbs_standin.h"
#include "transports/rdma/wire.h"

using namespace chorus;
using namespace chorus::rdma;

namespace {

PortInfo ibPort(int port, bool active) {
  PortInfo p;
  p.port = port;
  p.active = active;
  p.link = LinkLayer::InfiniBand;
  p.lid = static_cast<uint16_t>(10 + port);
  return p;
}

PortInfo rocePort() {
  PortInfo p;
  p.port = 1;
  p.active = true;
  p.link = LinkLayer::Ethernet;
  GidEntry v1, v2ll, v2v4;
  v1.index = 0;
  v1.type = GidType::RoCEv1;
  v1.raw[0] = 0xfe;
  v1.raw[1] = 0x80;
  v2ll = v1;
  v2ll.index = 1;
  v2ll.type = GidType::RoCEv2;
  v2v4.index = 3;
  v2v4.type = GidType::RoCEv2;
  const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7};
  std::memcpy(v2v4.raw, mapped, 16);
  p.gids = {v1, v2ll, v2v4};
  return p;
}

// Fabric settings are process-wide: every test that changes them puts them back.
struct FabricGuard {
  standin::Config saved = standin::Fabric::instance().config();
  ~FabricGuard() {
    standin::Fabric::instance().configure(saved);
    standin::Fabric::instance().setKnobs({});
  }
};

}  // namespace

TEST(RdmaDevice, HcaFilterSyntax) {
  HcaFilter f;
  std::string why;
  ASSERT_TRUE(parseHcaFilter("", &f, &why));
  EXPECT_TRUE(hcaMatches(f, "anything", 1));
  ASSERT_TRUE(parseHcaFilter("mlx5_0:1,mlx5_1", &f, &why));
  EXPECT_FALSE(f.exclude);
  EXPECT_TRUE(hcaMatches(f, "mlx5_0", 1));
  EXPECT_FALSE(hcaMatches(f, "mlx5_0", 2));
  EXPECT_TRUE(hcaMatches(f, "mlx5_1", 2));
  EXPECT_TRUE(hcaMatches(f, "mlx5_10", 1));  // a prefix
  EXPECT_FALSE(hcaMatches(f, "mlx4_0", 1));
  ASSERT_TRUE(parseHcaFilter("=mlx5_1", &f, &why));
  EXPECT_TRUE(f.exact);
  EXPECT_FALSE(hcaMatches(f, "mlx5_10", 1));
  EXPECT_TRUE(hcaMatches(f, "mlx5_1", 1));
  ASSERT_TRUE(parseHcaFilter("^mlx5_0", &f, &why));
  EXPECT_TRUE(f.exclude);
  EXPECT_FALSE(hcaMatches(f, "mlx5_0", 1));
  EXPECT_TRUE(hcaMatches(f, "bnxt_re0", 1));
  EXPECT_FALSE(parseHcaFilter("mlx5_0:x", &f, &why));
  EXPECT_NE(why.find("bad port"), std::string::npos) << why;
  EXPECT_FALSE(parseHcaFilter("mlx5_0:0", &f, &why));
}

TEST(RdmaDevice, ChoosesFirstActiveMatchingPort) {
  std::vector<DeviceInfo> devs(2);
  devs[0].name = "mlx5_0";
  devs[0].ports = {ibPort(1, false)};
  devs[1].name = "mlx5_1";
  devs[1].ports = {ibPort(1, true), ibPort(2, true)};
  HcaFilter f;
  std::string why;
  PortChoice pc;
  ASSERT_TRUE(parseHcaFilter("", &f, &why));
  ASSERT_TRUE(choosePort(devs, f, -1, &pc, &why)) << why;
  EXPECT_EQ(pc.device, 1);
  EXPECT_EQ(pc.port, 1);
  EXPECT_FALSE(pc.useGrh);  // InfiniBand: LID routing
  ASSERT_TRUE(parseHcaFilter("mlx5_1:2", &f, &why));
  ASSERT_TRUE(choosePort(devs, f, -1, &pc, &why)) << why;
  EXPECT_EQ(pc.port, 2);
  ASSERT_TRUE(parseHcaFilter("mlx5_0", &f, &why));
  EXPECT_FALSE(choosePort(devs, f, -1, &pc, &why));
  EXPECT_NE(why.find("mlx5_0:1 is not active"), std::string::npos) << why;
  ASSERT_TRUE(parseHcaFilter("=mlx5", &f, &why));
  EXPECT_FALSE(choosePort(devs, f, -1, &pc, &why));
  EXPECT_NE(why.find("matches CHORUS_IB_HCA"), std::string::npos) << why;
  EXPECT_FALSE(choosePort({}, f, -1, &pc, &why));
}

TEST(RdmaDevice, RoceGidChoice) {
  const PortInfo p = rocePort();
  bool grh = false;
  int idx = -1;
  std::string why;
  ASSERT_TRUE(chooseGid(p, -1, &grh, &idx, &why)) << why;
  EXPECT_TRUE(grh);
  EXPECT_EQ(idx, 3);  // RoCE v2, IPv4-mapped
  ASSERT_TRUE(chooseGid(p, 1, &grh, &idx, &why));
  EXPECT_EQ(idx, 1);
  EXPECT_FALSE(chooseGid(p, 7, &grh, &idx, &why));
  EXPECT_NE(why.find("CHORUS_IB_GID_INDEX=7"), std::string::npos) << why;
  PortInfo v1only = p;
  v1only.gids.resize(1);
  ASSERT_TRUE(chooseGid(v1only, -1, &grh, &idx, &why));
  EXPECT_EQ(idx, 0);
  PortInfo none = p;
  none.gids.clear();
  EXPECT_FALSE(chooseGid(none, -1, &grh, &idx, &why));
  EXPECT_EQ(gidString(p.gids[2].raw), "::ffff:10.0.0.7");
}

TEST(RdmaWire, ImmediatesAndWorkRequestIds) {
  EXPECT_EQ(immData(12345, false) & kImmBytesMask, 12345u);
  EXPECT_FALSE(immData(12345, false) & (kImmLL | kImmCredit));
  EXPECT_TRUE(immData(7, true) & kImmLL);
  EXPECT_EQ(immCredit(9) & ~kImmCredit, 9u);
  const uint64_t id = wrId(WrKind::Last, 1234567, (1ull << 40) + 77);
  EXPECT_EQ(wrKind(id), WrKind::Last);
  EXPECT_EQ(wrPeer(id), 1234567);
  EXPECT_EQ(wrSeq(id), 77u);  // 40 bits
  EXPECT_EQ(pieceCount(0, 4096), 1u);
  EXPECT_EQ(pieceCount(4096, 4096), 1u);
  EXPECT_EQ(pieceCount(4097, 4096), 2u);
  EXPECT_EQ(pieceCount(512 << 10, 64 << 10), 8u);
}

TEST(RdmaRegCache, EvictsLeastRecentlyUsedIdleBuffer) {
  FabricGuard guard;
  auto verbs = standin::makeStandinVerbs();
  std::unique_ptr<VerbsContext> ctx;
  ASSERT_EQ(verbs->open("standin0", 1, 16, &ctx), chorusSuccess);
  std::vector<char> a(4096), b(4096), c(4096);
  RegCache cache(ctx.get(), 8192);  // two buffers fit
  uint32_t ka = 0, kb = 0, kc = 0, k = 0;
  ASSERT_EQ(cache.acquire(a.data(), a.size(), &ka), 0);
  ASSERT_EQ(cache.acquire(b.data(), b.size(), &kb), 0);
  cache.release(a.data());
  cache.release(b.data());
  ASSERT_EQ(cache.acquire(b.data(), b.size(), &k), 0);  // hit: b is now most recent
  EXPECT_EQ(k, kb);
  cache.release(b.data());
  EXPECT_EQ(cache.hits(), 1u);
  ASSERT_EQ(cache.acquire(c.data(), c.size(), &kc), 0);  // evicts a, not b
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.registeredBytes(), 8192u);
  ASSERT_EQ(cache.acquire(b.data(), b.size(), &k), 0);
  EXPECT_EQ(k, kb);  // b survived
  // Everything busy: the cache goes over its bound rather than fail or evict a user.
  ASSERT_EQ(cache.acquire(a.data(), a.size(), &k), 0);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.registeredBytes(), 3u * 4096);
}

TEST(RdmaRegCache, DeviceOutOfRegistrationsEvictsAndRetries) {
  FabricGuard guard;
  standin::Config cfg = guard.saved;
  cfg.maxMrs = 2;
  standin::Fabric::instance().configure(cfg);
  auto verbs = standin::makeStandinVerbs();
  std::unique_ptr<VerbsContext> ctx;
  ASSERT_EQ(verbs->open("standin0", 1, 16, &ctx), chorusSuccess);
  std::vector<char> a(4096), b(4096), c(4096);
  RegCache cache(ctx.get(), 1ull << 30);
  uint32_t k = 0;
  ASSERT_EQ(cache.acquire(a.data(), a.size(), &k), 0);
  ASSERT_EQ(cache.acquire(b.data(), b.size(), &k), 0);
  cache.release(a.data());
  const uint64_t refusedBefore = standin::Fabric::instance().stats().refusedRegs;
  ASSERT_EQ(cache.acquire(c.data(), c.size(), &k), 0);  // ENOMEM, evict a, retry
  EXPECT_EQ(standin::Fabric::instance().stats().refusedRegs, refusedBefore + 1);
  EXPECT_EQ(cache.evictions(), 1u);
  // b and c in use, the device full: try again once a write releases one.
  EXPECT_EQ(cache.acquire(a.data(), a.size(), &k), EBUSY);
  cache.release(b.data());
  ASSERT_EQ(cache.acquire(a.data(), a.size(), &k), 0);
  EXPECT_EQ(cache.evictions(), 2u);
  // A device that refuses even the first registration: a real error.
  standin::Config none = guard.saved;
  none.maxMrs = 0;
  standin::Fabric::instance().configure(none);
  std::unique_ptr<VerbsContext> ctx2;
  ASSERT_EQ(verbs->open("standin0", 1, 16, &ctx2), chorusSuccess);
  RegCache empty(ctx2.get(), 1ull << 30);
  EXPECT_EQ(empty.acquire(a.data(), a.size(), &k), ENOMEM);
}

namespace {
class NoDeviceVerbs final : public Verbs {
 public:
  const char* name() const override { return "test double: no device"; }
  void listDevices(std::vector<DeviceInfo>* out, std::string* why) override {
    out->clear();
    *why = "ibv_get_device_list: Function not implemented";
  }
  chorusResult_t open(const std::string&, int, int, std::unique_ptr<VerbsContext>*) override {
    return chorusSystemError;
  }
};
}  // namespace

TEST(RdmaDiscovery, NoDeviceOrDisabledMeansNotUsable) {
  Options o;
  RdmaTransport none(std::make_unique<NoDeviceVerbs>(), o);
  EXPECT_FALSE(none.usable());
  EXPECT_EQ(none.whyNot(), "no RDMA device (ibv_get_device_list: Function not implemented)");
  PeerInfo a{}, b{};
  EXPECT_FALSE(none.canConnect(a, b));
  o.disable = true;
  RdmaTransport off(standin::makeStandinVerbs(), o);
  EXPECT_FALSE(off.usable());
  EXPECT_NE(off.whyNot().find("CHORUS_IB_DISABLE"), std::string::npos);
  o.disable = false;
  o.hca = "mlx5";
  RdmaTransport filtered(standin::makeStandinVerbs(), o);
  EXPECT_FALSE(filtered.usable());
  o.hca = "standin";
  RdmaTransport chosen(standin::makeStandinVerbs(), o);
  EXPECT_TRUE(chosen.usable()) << chosen.whyNot();
}

// Two ranks (threads), one RdmaTransport each over the stand-in, connected through a real
// bootstrap. FIFO depth 2, 4 KiB slots written in 1 KiB pieces (the port's max message):
// the sender fills both slots, must then find no free slot while the receiver holds them
// (credits exhausted), and gets one back only after the receiver releases; 200 messages
// of distinct sizes and contents then go through in order.
TEST(RdmaPair, CreditExhaustionAndChunkedWrites) {
  FabricGuard guard;
  standin::Config cfg = guard.saved;
  cfg.maxMsgBytes = 1024;
  standin::Fabric::instance().configure(cfg);
  chorusUniqueId id;
  ASSERT_EQ(bootstrapCreateRoot(&id), chorusSuccess);
  constexpr int kDepth = 2;
  constexpr size_t kSlot = 4096;
  constexpr int kMessages = 200;
  std::atomic<int> abortFlag{0};
  std::atomic<int> stage{0};  // 1: sender saw credits exhausted; 2: receiver released one
  std::string errors[2];
  const uint64_t writesBefore = standin::Fabric::instance().stats().writes;

  auto body = [&](int rank) {
    std::string& err = errors[rank];
    std::unique_ptr<Bootstrap> bs;
    if (Bootstrap::init(id, rank, 2, monotonicNs() + 20000000000ll, &bs) != chorusSuccess) {
      err = "bootstrap init failed";
      return;
    }
    std::vector<PeerInfo> peers(2);
    peers[0].rank = 0;
    peers[1].rank = 1;
    Options o;
    o.depth = kDepth;
    o.timeoutNs = 20000000000ll;
    RdmaTransport t(standin::makeStandinVerbs(), o);
    TransportContext ctx{rank, 2, &peers, 1, kSlot, kDepth, 64};
    BootstrapPeerExchange exchange(bs.get());
    ctx.exchange = &exchange;
    std::vector<char> infos(2 * kConnectInfoBytes);
    std::unique_ptr<SendConn> send;
    std::unique_ptr<RecvConn> recv;
    if (t.setup(ctx, infos.data() + rank * kConnectInfoBytes) != chorusSuccess ||
        bs->allGather(infos.data(), kConnectInfoBytes) != chorusSuccess ||
        t.connect(ctx, 1 - rank, infos.data() + (1 - rank) * kConnectInfoBytes, &send, &recv) !=
            chorusSuccess ||
        bs->barrier() != chorusSuccess) {
      err = "setup/connect failed";
      return;
    }
    t.finishSetup();
    WaitCtx w{monotonicNs() + 20000000000ll, &abortFlag, 0, "the credit test"};
    auto sizeOf = [kSlot](int m) { return static_cast<size_t>((m * 977) % (kSlot + 1)); };
    auto byteOf = [](int m, size_t i) { return static_cast<char>((m * 31 + i * 7) & 0xff); };
    if (rank == 0) {
      for (int m = 0; m < kMessages; ++m) {
        if (m == kDepth) {
          // Both slots are in the receiver's hands: no credit may come back.
          usleep(100000);
          if (send->tryAcquire() != nullptr) {
            err = "a third slot was free before the receiver released any";
            stage.store(-1);
            return;
          }
          stage.store(1);
        }
        void* slot = nullptr;
        if (send->acquire(&slot, w) != chorusSuccess) {
          err = std::string("acquire failed: ") + threadLastError();
          return;
        }
        if (m == kDepth && stage.load() != 2) {
          err = "acquire returned before the receiver released a slot";
          return;
        }
        const size_t n = sizeOf(m);
        for (size_t i = 0; i < n; ++i) static_cast<char*>(slot)[i] = byteOf(m, i);
        send->post(n);
      }
      // Let the last writes complete before the transport goes away.
      void* slot = nullptr;
      for (int i = 0; i < kDepth; ++i) send->acquire(&slot, w), send->post(0);
    } else {
      while (stage.load() == 0) usleep(1000);
      if (stage.load() < 0) return;
      for (int m = 0; m < kMessages + kDepth; ++m) {
        const void* slot = nullptr;
        size_t bytes = 0;
        if (recv->wait(&slot, &bytes, w) != chorusSuccess) {
          err = std::string("wait failed: ") + threadLastError();
          return;
        }
        const size_t want = m < kMessages ? sizeOf(m) : 0;
        if (bytes != want) {
          err = "message " + std::to_string(m) + ": " + std::to_string(bytes) + " bytes, want " +
                std::to_string(want);
          return;
        }
        for (size_t i = 0; i < bytes; ++i)
          if (static_cast<const char*>(slot)[i] != byteOf(m, i)) {
            err = "message " + std::to_string(m) + " differs at byte " + std::to_string(i);
            return;
          }
        if (m == 0) stage.store(2);  // before the release that returns the first credit
        recv->release();
      }
    }
  };
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  // Each message of n bytes took ceil(n / 1 KiB) writes (at least one); credits add more.
  uint64_t pieces = 0;
  for (int m = 0; m < kMessages; ++m) pieces += pieceCount((m * 977) % (kSlot + 1), 1024);
  EXPECT_GE(standin::Fabric::instance().stats().writes - writesBefore, pieces);
}

// Ranks must agree: a rank with a device facing a peer without one fails connect with a
// clear error instead of waiting for a queue pair that never comes.
TEST(RdmaPair, PeerWithoutDeviceIsAClearError) {
  chorusUniqueId id;
  ASSERT_EQ(bootstrapCreateRoot(&id), chorusSuccess);
  chorusResult_t res[2] = {chorusSuccess, chorusSuccess};
  std::string msg;
  auto body = [&](int rank) {
    std::unique_ptr<Bootstrap> bs;
    ASSERT_EQ(Bootstrap::init(id, rank, 2, monotonicNs() + 20000000000ll, &bs), chorusSuccess);
    std::vector<PeerInfo> peers(2);
    Options o;
    std::unique_ptr<Verbs> v;
    if (rank == 0)
      v = standin::makeStandinVerbs();
    else
      v = std::make_unique<NoDeviceVerbs>();
    RdmaTransport t(std::move(v), o);
    TransportContext ctx{rank, 2, &peers, 1, 4096, 2, 64};
    BootstrapPeerExchange exchange(bs.get());
    ctx.exchange = &exchange;
    std::vector<char> infos(2 * kConnectInfoBytes);
    ASSERT_EQ(t.setup(ctx, infos.data() + rank * kConnectInfoBytes), chorusSuccess);
    ASSERT_EQ(bs->allGather(infos.data(), kConnectInfoBytes), chorusSuccess);
    EXPECT_EQ(t.canConnect(peers[0], peers[1]), rank == 0);
    if (rank == 0) {
      std::unique_ptr<SendConn> send;
      std::unique_ptr<RecvConn> recv;
      res[0] = t.connect(ctx, 1, infos.data() + kConnectInfoBytes, &send, &recv);
      msg = threadLastError();
    }
  };
  std::thread t0(body, 0), t1(body, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(res[0], chorusInvalidUsage);
  EXPECT_NE(msg.find("rank 1 has no usable RDMA device"), std::string::npos) << msg;
}
