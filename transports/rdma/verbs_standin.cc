// verbs_standin.cc — the in-memory STAND-IN for the verbs interface (tests only).
#include "transports/rdma/verbs_standin.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "src/core/checks.h"

namespace chorus {
namespace rdma {
namespace standin {
namespace {

// enum ibv_wc_status values the stand-in produces.
constexpr int kLocProtErr = 4;
constexpr int kRemAccessErr = 10;
constexpr int kRetryExcErr = 12;
constexpr int kRnrRetryExcErr = 13;

class Ctx;

struct Mr {
  Ctx* ctx;
  char* addr;
  size_t len;
  bool remoteWrite;
};

struct Qp {
  Ctx* ctx;
  uint32_t qpn;
  enum State { Init, Rtr, Rts, Error } state = Init;
  uint32_t remoteQpn = 0;
  std::deque<uint64_t> recvs;
  int maxSend = 0, maxRecv = 0;
  int sendOutstanding = 0;
};

struct Cqe {
  Completion wc;
  uint32_t qpn;
  bool send;
};

// All stand-in state; one lock for everything (tests only: simplicity over speed).
struct World {
  std::mutex mu;
  Config cfg;
  Stats stats;
  TransportKnobs knobs;
  std::unordered_map<uint32_t, Qp*> qps;
  std::unordered_map<uint32_t, Mr> mrs;  // by key (lkey == rkey)
  uint32_t nextQpn = 0x100;
  uint32_t nextKey = 0x1000;
  uint64_t faultAfter = 0;
  int faultStatus = 0;  // 0: none armed
  uint16_t nextLid = 1;
};

World& world() {
  // Function-local: the stand-in's "network" spans the process, like a fabric spans hosts.
  static World* w = new World();
  return *w;
}

const char* statusString(int s) {
  switch (s) {
    case 0: return "success";
    case kLocProtErr: return "local protection error";
    case kWcFlushErr: return "Work Request Flushed Error";
    case kRemAccessErr: return "remote access error";
    case kRetryExcErr: return "transport retry counter exceeded";
    case kRnrRetryExcErr: return "RNR retry counter exceeded";
    default: return "error (stand-in)";
  }
}

class Ctx final : public VerbsContext {
 public:
  Ctx(const DeviceInfo& d, int port) : dev_(d) {
    for (const PortInfo& p : d.ports)
      if (p.port == port) port_ = p;
    efd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  ~Ctx() override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    for (auto it = w.qps.begin(); it != w.qps.end();) {
      if (it->second->ctx == this) {
        delete it->second;
        it = w.qps.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = w.mrs.begin(); it != w.mrs.end();)
      it = it->second.ctx == this ? w.mrs.erase(it) : std::next(it);
    if (efd_ >= 0) close(efd_);
  }

  const DeviceInfo& device() const override { return dev_; }
  const PortInfo& port() const override { return port_; }

  int registerMemory(void* addr, size_t len, bool remoteWrite, MemRegion* out) override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    if (nmrs_ >= w.cfg.maxMrs) {
      ++w.stats.refusedRegs;
      return ENOMEM;
    }
    const uint32_t key = w.nextKey++;
    w.mrs[key] = Mr{this, static_cast<char*>(addr), len, remoteWrite};
    ++nmrs_;
    ++(remoteWrite ? w.stats.remoteRegs : w.stats.localRegs);
    out->handle = key;
    out->lkey = out->rkey = key;
    return 0;
  }

  void deregister(const MemRegion& mr) override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    auto it = w.mrs.find(static_cast<uint32_t>(mr.handle));
    if (it == w.mrs.end() || it->second.ctx != this) return;
    if (!it->second.remoteWrite) ++w.stats.localDeregs;
    w.mrs.erase(it);
    --nmrs_;
  }

  chorusResult_t createQp(int maxSend, int maxRecv, uint64_t* qp, uint32_t* qpn) override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    if (maxSend > w.cfg.maxQpWr || maxRecv > w.cfg.maxQpWr)
      CHORUS_FAIL(chorusSystemError, "stand-in: queue of %d/%d work requests above max_qp_wr %d",
                  maxSend, maxRecv, w.cfg.maxQpWr);
    Qp* q = new Qp();
    q->ctx = this;
    q->qpn = w.nextQpn++;
    q->maxSend = maxSend;
    q->maxRecv = maxRecv;
    w.qps[q->qpn] = q;
    *qp = q->qpn;
    *qpn = q->qpn;
    return chorusSuccess;
  }

  chorusResult_t connectQp(uint64_t qp, const QpAddress&, const QpAddress& remote,
                           const QpTiming&) override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    Qp* q = find(w, qp);
    if (!q || q->state != Qp::Init)
      CHORUS_FAIL(chorusSystemError, "stand-in: connecting qp 0x%llx not in INIT",
                  static_cast<unsigned long long>(qp));
    if (remote.mtu < 1 || remote.mtu > 5)
      CHORUS_FAIL(chorusSystemError, "stand-in: bad path MTU %d", remote.mtu);
    q->remoteQpn = remote.qpn;
    q->state = Qp::Rts;  // INIT -> RTR -> RTS
    return chorusSuccess;
  }

  void destroyQp(uint64_t qp) override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    auto it = w.qps.find(static_cast<uint32_t>(qp));
    if (it == w.qps.end() || it->second->ctx != this) return;
    delete it->second;
    w.qps.erase(it);
  }

  int postRecv(uint64_t qp, uint64_t wrId) override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    Qp* q = find(w, qp);
    if (!q) return EINVAL;
    if (q->state == Qp::Error) {
      push(w, Cqe{Completion{wrId, kWcFlushErr, false, 0}, q->qpn, false});
      return 0;
    }
    if (static_cast<int>(q->recvs.size()) >= q->maxRecv) return ENOMEM;
    q->recvs.push_back(wrId);
    return 0;
  }

  int postWrite(uint64_t qp, const WriteRequest& r) override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    Qp* q = find(w, qp);
    if (!q) return EINVAL;
    if (q->state == Qp::Init || q->state == Qp::Rtr) return EINVAL;  // posts need RTS
    if (q->sendOutstanding >= q->maxSend) return ENOMEM;             // send queue full
    ++q->sendOutstanding;
    ++w.stats.writes;
    if (q->state == Qp::Error) {
      push(w, Cqe{Completion{r.wrId, kWcFlushErr, false, 0}, q->qpn, true});
      return 0;
    }
    const int st = deliver(w, q, r);
    if (st != 0) {
      ++w.stats.errorCompletions;
      push(w, Cqe{Completion{r.wrId, st, false, 0}, q->qpn, true});
      toError(w, q);
    } else {
      push(w, Cqe{Completion{r.wrId, 0, false, 0}, q->qpn, true});
    }
    return 0;
  }

  int poll(Completion* out, int max) override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    int n = 0;
    while (n < max && !cq_.empty()) {
      const Cqe& e = cq_.front();
      if (e.send) {
        auto it = w.qps.find(e.qpn);
        if (it != w.qps.end()) --it->second->sendOutstanding;
      }
      out[n++] = e.wc;
      cq_.pop_front();
    }
    return n;
  }

  int eventFd() const override { return efd_; }
  chorusResult_t armEvents() override {
    std::lock_guard<std::mutex> lock(world().mu);
    armed_ = true;
    return chorusSuccess;
  }
  void ackEvents() override {
    uint64_t v;
    while (read(efd_, &v, sizeof(v)) > 0) {
    }
  }
  const char* statusText(int status) const override { return statusString(status); }

 private:
  static Qp* find(World& w, uint64_t qp) {
    auto it = w.qps.find(static_cast<uint32_t>(qp));
    return it == w.qps.end() ? nullptr : it->second;
  }

  // Completion delivery into `e`'s owner; wakes it if it armed its channel.
  static void push(World& w, const Cqe& e) {
    auto it = w.qps.find(e.qpn);
    if (it == w.qps.end()) return;
    it->second->ctx->pushLocked(e);
  }
  void pushLocked(const Cqe& e) {
    cq_.push_back(e);
    if (armed_) {
      armed_ = false;
      uint64_t one = 1;
      ssize_t r = write(efd_, &one, sizeof(one));
      (void)r;
    }
  }

  static void toError(World& w, Qp* q) {
    q->state = Qp::Error;
    while (!q->recvs.empty()) {
      q->ctx->pushLocked(Cqe{Completion{q->recvs.front(), kWcFlushErr, false, 0}, q->qpn, false});
      q->recvs.pop_front();
    }
    (void)w;
  }

  static bool covers(const Mr& m, const char* p, size_t len) {
    return p >= m.addr && len <= m.len && static_cast<size_t>(p - m.addr) <= m.len - len;
  }

  // The write's outcome as the requester's completion status (0: delivered).
  int deliver(World& w, Qp* q, const WriteRequest& r) {
    if (w.faultStatus != 0) {
      if (w.faultAfter == 0) {
        const int st = w.faultStatus;
        w.faultStatus = 0;
        return st;
      }
      --w.faultAfter;
    }
    if (r.len > w.cfg.maxMsgBytes) return kLocProtErr;  // real HCAs: local length error
    const char* src = static_cast<const char*>(r.local);
    if (r.len > 0) {
      auto it = w.mrs.find(r.lkey);
      if (it == w.mrs.end() || it->second.ctx != this || !covers(it->second, src, r.len))
        return kLocProtErr;
    }
    auto rq = w.qps.find(q->remoteQpn);
    if (rq == w.qps.end() || rq->second->state == Qp::Error || rq->second->state == Qp::Init)
      return kRetryExcErr;  // nobody answers: the requester retries, then gives up
    Qp* peer = rq->second;
    char* dst = reinterpret_cast<char*>(r.remoteAddr);
    if (r.len > 0) {
      auto it = w.mrs.find(r.rkey);
      if (it == w.mrs.end() || it->second.ctx != peer->ctx || !it->second.remoteWrite ||
          !covers(it->second, dst, r.len))
        return kRemAccessErr;
    }
    if (r.withImm && peer->recvs.empty()) return kRnrRetryExcErr;
    if (r.len > 0) std::memcpy(dst, src, r.len);
    w.stats.bytes += r.len;
    if (r.withImm) {
      const uint64_t id = peer->recvs.front();
      peer->recvs.pop_front();
      peer->ctx->pushLocked(Cqe{Completion{id, 0, true, r.imm}, peer->qpn, false});
    }
    return 0;
  }

  DeviceInfo dev_;
  PortInfo port_;
  int efd_ = -1;
  int nmrs_ = 0;        // guarded by world().mu
  bool armed_ = false;  // guarded by world().mu
  std::deque<Cqe> cq_;  // guarded by world().mu
};

class StandinVerbs final : public Verbs {
 public:
  const char* name() const override { return "stand-in verbs (in-memory, tests only)"; }

  void listDevices(std::vector<DeviceInfo>* out, std::string*) override {
    World& w = world();
    std::lock_guard<std::mutex> lock(w.mu);
    DeviceInfo d;
    d.name = "standin0";
    d.maxQpWr = w.cfg.maxQpWr;
    PortInfo p;
    p.port = 1;
    p.active = true;
    p.link = w.cfg.link;
    p.lid = w.nextLid++;
    p.activeMtu = 5;
    p.maxMsgBytes = w.cfg.maxMsgBytes;
    if (p.link == LinkLayer::Ethernet) {
      GidEntry g;
      g.index = 3;
      g.type = GidType::RoCEv2;
      const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
      std::memcpy(g.raw, v4, 16);
      p.gids.push_back(g);
    }
    d.ports.push_back(p);
    out->assign(1, d);
  }

  chorusResult_t open(const std::string& device, int port, int,
                      std::unique_ptr<VerbsContext>* out) override {
    std::vector<DeviceInfo> devs;
    std::string why;
    listDevices(&devs, &why);
    if (device != devs[0].name || port != 1)
      CHORUS_FAIL(chorusSystemError, "stand-in: no device %s port %d", device.c_str(), port);
    *out = std::make_unique<Ctx>(devs[0], port);
    return chorusSuccess;
  }
};

}  // namespace

Fabric& Fabric::instance() {
  static Fabric f;
  return f;
}

void Fabric::configure(const Config& c) {
  std::lock_guard<std::mutex> lock(world().mu);
  world().cfg = c;
}

Config Fabric::config() {
  std::lock_guard<std::mutex> lock(world().mu);
  return world().cfg;
}

void Fabric::injectWriteError(uint64_t afterWrites, int status) {
  std::lock_guard<std::mutex> lock(world().mu);
  world().faultAfter = afterWrites;
  world().faultStatus = status;
}

Stats Fabric::stats() {
  std::lock_guard<std::mutex> lock(world().mu);
  return world().stats;
}

void Fabric::resetStats() {
  std::lock_guard<std::mutex> lock(world().mu);
  world().stats = Stats{};
}

TransportKnobs Fabric::knobs() {
  std::lock_guard<std::mutex> lock(world().mu);
  return world().knobs;
}

void Fabric::setKnobs(const TransportKnobs& k) {
  std::lock_guard<std::mutex> lock(world().mu);
  world().knobs = k;
}

std::unique_ptr<Verbs> makeStandinVerbs() { return std::make_unique<StandinVerbs>(); }

}  // namespace standin
}  // namespace rdma
}  // namespace chorus
