// verbs_ibv.cc — the Verbs interface over libibverbs: what libchorus ships.
//
// Built only with -Dibverbs (HAVE_IBVERBS). Not run on our machines (no RDMA device; the
// kernel has no InfiniBand support): tests/rdma's 'rdma' suite runs it wherever
// ibv_get_device_list finds a device. ibv_get_device_list returning NULL (ENOSYS here)
// or an empty list is the normal "no device" answer, never an error.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <cstring>

#include "src/core/checks.h"
#include "src/core/debug.h"
#include "transports/rdma/transport.h"
#include "transports/rdma/verbs.h"

namespace chorus {
namespace rdma {
namespace {

GidType gidTypeOf(uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_ROCE_V1: return GidType::RoCEv1;
    case IBV_GID_TYPE_ROCE_V2: return GidType::RoCEv2;
    default: return GidType::IB;
  }
}

void describePorts(ibv_context* ctx, DeviceInfo* d) {
  ibv_device_attr da{};
  if (ibv_query_device(ctx, &da) != 0) return;
  d->maxQpWr = da.max_qp_wr;
  for (int p = 1; p <= da.phys_port_cnt; ++p) {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
    PortInfo pi;
    pi.port = p;
    pi.active = pa.state == IBV_PORT_ACTIVE;
    pi.link =
        pa.link_layer == IBV_LINK_LAYER_ETHERNET ? LinkLayer::Ethernet : LinkLayer::InfiniBand;
    pi.lid = pa.lid;
    pi.activeMtu = pa.active_mtu;
    pi.maxMsgBytes = pa.max_msg_sz ? pa.max_msg_sz : (1u << 30);
    for (int g = 0; g < pa.gid_tbl_len; ++g) {
      ibv_gid_entry e{};
      if (ibv_query_gid_ex(ctx, static_cast<uint32_t>(p), static_cast<uint32_t>(g), &e, 0) != 0)
        continue;
      static const uint8_t kZero[16] = {};
      if (std::memcmp(e.gid.raw, kZero, 16) == 0) continue;
      GidEntry ge;
      ge.index = g;
      std::memcpy(ge.raw, e.gid.raw, 16);
      ge.type = gidTypeOf(e.gid_type);
      pi.gids.push_back(ge);
    }
    d->ports.push_back(pi);
  }
}

class IbvContext final : public VerbsContext {
 public:
  ~IbvContext() override {
    if (cq_) ibv_destroy_cq(cq_);
    if (channel_) ibv_destroy_comp_channel(channel_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }

  chorusResult_t open(ibv_device* dev, const DeviceInfo& info, int port, int cqDepth) {
    info_ = info;
    for (const PortInfo& p : info.ports)
      if (p.port == port) port_ = p;
    ctx_ = ibv_open_device(dev);
    if (!ctx_)
      CHORUS_FAIL(chorusSystemError, "ibv_open_device(%s): %s", info.name.c_str(), strerror(errno));
    pd_ = ibv_alloc_pd(ctx_);
    if (!pd_)
      CHORUS_FAIL(chorusSystemError, "ibv_alloc_pd(%s): %s", info.name.c_str(), strerror(errno));
    channel_ = ibv_create_comp_channel(ctx_);
    if (!channel_)
      CHORUS_FAIL(chorusSystemError, "ibv_create_comp_channel(%s): %s", info.name.c_str(),
                  strerror(errno));
    const int flags = fcntl(channel_->fd, F_GETFL);
    if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0)
      CHORUS_FAIL(chorusSystemError, "making the completion channel non-blocking: %s",
                  strerror(errno));
    cq_ = ibv_create_cq(ctx_, cqDepth, nullptr, channel_, 0);
    if (!cq_)
      CHORUS_FAIL(chorusSystemError, "ibv_create_cq(%s, %d entries): %s", info.name.c_str(),
                  cqDepth, strerror(errno));
    return chorusSuccess;
  }

  const DeviceInfo& device() const override { return info_; }
  const PortInfo& port() const override { return port_; }

  int registerMemory(void* addr, size_t len, bool remoteWrite, MemRegion* out) override {
    const int access = IBV_ACCESS_LOCAL_WRITE | (remoteWrite ? IBV_ACCESS_REMOTE_WRITE : 0);
    ibv_mr* mr = ibv_reg_mr(pd_, addr, len, access);
    if (!mr) return errno ? errno : ENOMEM;
    out->handle = reinterpret_cast<uint64_t>(mr);
    out->lkey = mr->lkey;
    out->rkey = mr->rkey;
    return 0;
  }

  void deregister(const MemRegion& mr) override {
    if (mr.handle) ibv_dereg_mr(reinterpret_cast<ibv_mr*>(mr.handle));
  }

  chorusResult_t createQp(int maxSend, int maxRecv, uint64_t* qp, uint32_t* qpn) override {
    ibv_qp_init_attr ia{};
    ia.send_cq = cq_;
    ia.recv_cq = cq_;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = static_cast<uint32_t>(maxSend);
    ia.cap.max_recv_wr = static_cast<uint32_t>(maxRecv);
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ibv_qp* q = ibv_create_qp(pd_, &ia);
    if (!q)
      CHORUS_FAIL(chorusSystemError, "ibv_create_qp(%s): %s", info_.name.c_str(), strerror(errno));
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(port_.port);
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    const int err =
        ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (err != 0) {
      ibv_destroy_qp(q);
      CHORUS_FAIL(chorusSystemError, "ibv_modify_qp(INIT): %s", strerror(err));
    }
    *qp = reinterpret_cast<uint64_t>(q);
    *qpn = q->qp_num;
    return chorusSuccess;
  }

  chorusResult_t connectQp(uint64_t qp, const QpAddress& local, const QpAddress& remote,
                           const QpTiming& t) override {
    ibv_qp* q = reinterpret_cast<ibv_qp*>(qp);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = static_cast<ibv_mtu>(remote.mtu);
    a.dest_qp_num = remote.qpn;
    a.rq_psn = remote.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = remote.lid;
    a.ah_attr.sl = static_cast<uint8_t>(t.sl);
    a.ah_attr.port_num = static_cast<uint8_t>(local.port);
    if (remote.useGrh) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(local.gidIndex);
      a.ah_attr.grh.hop_limit = 255;
      a.ah_attr.grh.traffic_class = static_cast<uint8_t>(t.trafficClass);
    }
    int err = ibv_modify_qp(q, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (err != 0)
      CHORUS_FAIL(chorusSystemError, "ibv_modify_qp(RTR, qp 0x%x): %s", remote.qpn, strerror(err));
    ibv_qp_attr b{};
    b.qp_state = IBV_QPS_RTS;
    b.timeout = static_cast<uint8_t>(t.timeout);
    b.retry_cnt = static_cast<uint8_t>(t.retryCnt);
    b.rnr_retry = static_cast<uint8_t>(t.rnrRetry);
    b.sq_psn = local.psn;
    b.max_rd_atomic = 1;
    err = ibv_modify_qp(q, &b,
                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (err != 0) CHORUS_FAIL(chorusSystemError, "ibv_modify_qp(RTS): %s", strerror(err));
    return chorusSuccess;
  }

  void destroyQp(uint64_t qp) override { ibv_destroy_qp(reinterpret_cast<ibv_qp*>(qp)); }

  int postRecv(uint64_t qp, uint64_t wrId) override {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = wrId;
    return ibv_post_recv(reinterpret_cast<ibv_qp*>(qp), &wr, &bad);
  }

  int postWrite(uint64_t qp, const WriteRequest& w) override {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uint64_t>(w.local);
    sge.length = static_cast<uint32_t>(w.len);
    sge.lkey = w.lkey;
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = w.wrId;
    wr.sg_list = w.len ? &sge : nullptr;
    wr.num_sge = w.len ? 1 : 0;
    wr.opcode = w.withImm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(w.imm);
    wr.wr.rdma.remote_addr = w.remoteAddr;
    wr.wr.rdma.rkey = w.rkey;
    return ibv_post_send(reinterpret_cast<ibv_qp*>(qp), &wr, &bad);
  }

  int poll(Completion* out, int max) override {
    ibv_wc wc[64];
    const int n = ibv_poll_cq(cq_, max < 64 ? max : 64, wc);
    for (int i = 0; i < n; ++i) {
      out[i].wrId = wc[i].wr_id;
      out[i].status = wc[i].status;
      out[i].hasImm = wc[i].status == IBV_WC_SUCCESS && (wc[i].wc_flags & IBV_WC_WITH_IMM);
      out[i].imm = out[i].hasImm ? ntohl(wc[i].imm_data) : 0;
    }
    return n;
  }

  int eventFd() const override { return channel_->fd; }
  chorusResult_t armEvents() override {
    const int err = ibv_req_notify_cq(cq_, 0);
    if (err != 0) CHORUS_FAIL(chorusSystemError, "ibv_req_notify_cq: %s", strerror(err));
    return chorusSuccess;
  }
  void ackEvents() override {
    ibv_cq* cq = nullptr;
    void* cqCtx = nullptr;
    while (ibv_get_cq_event(channel_, &cq, &cqCtx) == 0) ibv_ack_cq_events(cq, 1);
  }
  const char* statusText(int status) const override {
    return ibv_wc_status_str(static_cast<ibv_wc_status>(status));
  }

 private:
  DeviceInfo info_;
  PortInfo port_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
};

class Ibverbs final : public Verbs {
 public:
  const char* name() const override { return "libibverbs"; }

  void listDevices(std::vector<DeviceInfo>* out, std::string* why) override {
    out->clear();
    int n = 0;
    errno = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) {
      *why = std::string("ibv_get_device_list: ") + strerror(errno ? errno : ENODEV);
      return;
    }
    for (int i = 0; i < n; ++i) {
      DeviceInfo d;
      d.name = ibv_get_device_name(list[i]);
      ibv_context* ctx = ibv_open_device(list[i]);
      if (!ctx) continue;
      describePorts(ctx, &d);
      ibv_close_device(ctx);
      out->push_back(d);
    }
    ibv_free_device_list(list);
    if (out->empty()) *why = n ? "no device could be opened" : "ibv_get_device_list found none";
  }

  chorusResult_t open(const std::string& device, int port, int cqDepth,
                      std::unique_ptr<VerbsContext>* out) override {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list) CHORUS_FAIL(chorusSystemError, "ibv_get_device_list: %s", strerror(errno));
    ibv_device* dev = nullptr;
    for (int i = 0; i < n && !dev; ++i)
      if (device == ibv_get_device_name(list[i])) dev = list[i];
    chorusResult_t res = chorusSystemError;
    auto ctx = std::make_unique<IbvContext>();
    if (dev) {
      DeviceInfo info;
      info.name = device;
      ibv_context* probe = ibv_open_device(dev);
      if (probe) {
        describePorts(probe, &info);
        ibv_close_device(probe);
      }
      res = ctx->open(dev, info, port, cqDepth);
    }
    ibv_free_device_list(list);
    if (!dev) CHORUS_FAIL(chorusSystemError, "RDMA device %s disappeared", device.c_str());
    if (res != chorusSuccess) return res;
    *out = std::move(ctx);
    return chorusSuccess;
  }
};

}  // namespace

std::unique_ptr<Verbs> makeIbverbs() { return std::make_unique<Ibverbs>(); }

std::unique_ptr<Transport> createRdmaTransport(const TransportContext& ctx) {
  return std::make_unique<RdmaTransport>(makeIbverbs(), ctx.rdma);
}

}  // namespace rdma
}  // namespace chorus
