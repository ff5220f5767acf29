#include "transports/rdma/transport.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>

#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/wait.h"
#include "transports/rdma/connection.h"
#include "transports/rdma/device.h"
#include "transports/rdma/wire.h"

namespace chorus {
namespace rdma {
namespace {

const char* linkName(LinkLayer l) { return l == LinkLayer::Ethernet ? "RoCE" : "InfiniBand"; }

}  // namespace

RdmaTransport::RdmaTransport(std::unique_ptr<Verbs> verbs, const Options& o)
    : verbs_(std::move(verbs)), opt_(o) {
  timing_.timeout = opt_.ackTimeout;
  timing_.retryCnt = opt_.retryCnt;
  timing_.sl = opt_.sl;
  timing_.trafficClass = opt_.trafficClass;
  if (opt_.disable) {
    whyNot_ = "disabled by CHORUS_IB_DISABLE=1";
    CHORUS_INFO(kLogNet, "RDMA disabled by CHORUS_IB_DISABLE=1; using tcp");
    return;
  }
  std::vector<DeviceInfo> devs;
  std::string why;
  verbs_->listDevices(&devs, &why);
  if (devs.empty()) {
    whyNot_ = "no RDMA device (" + why + ")";
    CHORUS_INFO(kLogNet, "no RDMA device (%s); using tcp", why.c_str());
    return;
  }
  HcaFilter filter;
  PortChoice pc;
  if (!parseHcaFilter(opt_.hca, &filter, &why) ||
      !choosePort(devs, filter, opt_.gidIndex, &pc, &why)) {
    whyNot_ = "no usable RDMA port (" + why + ")";
    // Asked-for hardware that is not there deserves a warning; otherwise it is a fact.
    if (!opt_.hca.empty() || opt_.gidIndex >= 0)
      CHORUS_WARN(kLogNet, "no usable RDMA port (%s); using tcp", why.c_str());
    else
      CHORUS_INFO(kLogNet, "no usable RDMA port (%s); using tcp", why.c_str());
    return;
  }
  dev_ = devs[static_cast<size_t>(pc.device)];
  for (const PortInfo& p : dev_.ports)
    if (p.port == pc.port) port_ = p;
  useGrh_ = pc.useGrh;
  gidIndex_ = pc.gidIndex;
  usable_ = true;
  CHORUS_INFO(kLogNet, "RDMA device %s port %d (%s, lid %u%s%s) through %s", dev_.name.c_str(),
              port_.port, linkName(port_.link), port_.lid, useGrh_ ? ", GID index " : "",
              useGrh_ ? std::to_string(gidIndex_).c_str() : "", verbs_->name());
}

RdmaTransport::~RdmaTransport() {
  if (proxy_) {
    proxy_->stop(!aborted_.load(), nowNs() + opt_.timeoutNs);
    const RegCache& rc = proxy_->regCache();
    CHORUS_TRACE(kLogNet, "RDMA registration cache: %llu hits, %llu misses, %llu evictions",
                 static_cast<unsigned long long>(rc.hits()),
                 static_cast<unsigned long long>(rc.misses()),
                 static_cast<unsigned long long>(rc.evictions()));
  }
  proxy_.reset();  // its registration cache deregisters the staging buffers
  for (auto& c : channels_) {
    if (!c) continue;
    if (c->qp) ctx_->destroyQp(c->qp);
    if (c->recvMr.handle) ctx_->deregister(c->recvMr);
  }
  channels_.clear();
  ctx_.reset();
}

chorusResult_t RdmaTransport::setup(const TransportContext& ctx, void* info) {
  rank_ = ctx.rank;
  ConnectInfo ci{};
  ci.magic = kInfoMagic;
  ci.rank = ctx.rank;
  ci.hasDevice = usable_ ? 1 : 0;
  if (!usable_) {
    // Another rank needs rdma: take part, and tell it that this rank cannot.
    std::memcpy(info, &ci, sizeof(ci));
    return chorusSuccess;
  }
  if (!ctx.exchange) CHORUS_FAIL(chorusInternalError, "rdma setup without a peer exchange");
  // Algorithms cut their pieces to the communicator's slot size: ours must hold one.
  slotBytes_ = std::max(opt_.slotBytes, ctx.slotBytes);
  depth_ = opt_.depth > 0 ? opt_.depth : ctx.fifoDepth;
  if (slotBytes_ == 0 || slotBytes_ > kMaxSlotBytes)
    CHORUS_FAIL(chorusInvalidArgument,
                "CHORUS_CHUNKSIZE=%zu: RDMA slots must be between 1 byte and %llu bytes",
                slotBytes_, static_cast<unsigned long long>(kMaxSlotBytes));
  if (depth_ < 1 || depth_ > 4096)
    CHORUS_FAIL(chorusInvalidArgument, "RDMA FIFO depth %d outside [1, 4096]", depth_);
  llMax_ = std::max<size_t>(ctx.llBytes, 64);  // what shm and tcp offer

  const uint64_t pieces = pieceCount(slotBytes_, port_.maxMsgBytes);
  const int maxSend = static_cast<int>(static_cast<uint64_t>(depth_) * pieces) + depth_ + 2;
  const int maxRecv = 2 * depth_ + 2;  // the peer's data and credits, each at most depth_
  if (maxSend > dev_.maxQpWr || maxRecv > dev_.maxQpWr)
    CHORUS_FAIL(chorusInvalidArgument,
                "%s allows %d work requests per queue; %d slots of %zu bytes need %d: lower "
                "CHORUS_BUFFSIZE or CHORUS_FIFO_DEPTH",
                dev_.name.c_str(), dev_.maxQpWr, depth_, slotBytes_, std::max(maxSend, maxRecv));
  const int cqDepth = std::max(16, (ctx.nranks - 1) * (maxSend + maxRecv));
  CHORUS_CHECK(verbs_->open(dev_.name, port_.port, cqDepth, &ctx_));
  proxy_ = std::make_unique<Proxy>(ctx.rank, ctx.nranks, ctx_.get(), opt_.regCacheBytes,
                                   port_.maxMsgBytes);
  CHORUS_CHECK(proxy_->start());
  channels_.clear();
  channels_.resize(static_cast<size_t>(ctx.nranks));

  ci.slotBytes = slotBytes_;
  ci.depth = depth_;
  ci.port = port_.port;
  ci.link = static_cast<uint8_t>(port_.link);
  snprintf(ci.device, sizeof(ci.device), "%s", dev_.name.c_str());
  std::memcpy(info, &ci, sizeof(ci));
  CHORUS_INFO(kLogNet, "RDMA on %s:%d: %d slots x %zu B per peer, writes of up to %llu B",
              dev_.name.c_str(), port_.port, depth_, slotBytes_,
              static_cast<unsigned long long>(port_.maxMsgBytes));
  return chorusSuccess;
}

chorusResult_t RdmaTransport::connect(const TransportContext& ctx, int peer, const void* peerInfo,
                                      std::unique_ptr<SendConn>* send,
                                      std::unique_ptr<RecvConn>* recv) {
  if (!proxy_) CHORUS_FAIL(chorusInternalError, "rdma connect before setup");
  ConnectInfo pi;
  std::memcpy(&pi, peerInfo, sizeof(pi));
  pi.device[sizeof(pi.device) - 1] = '\0';
  if (pi.magic != kInfoMagic || pi.rank != peer)
    CHORUS_FAIL(chorusInternalError, "rank %d published malformed RDMA connect info", peer);
  if (!pi.hasDevice)
    CHORUS_FAIL(chorusInvalidUsage,
                "rank %d has no usable RDMA device but this rank has %s: ranks must agree; "
                "set CHORUS_IB_DISABLE=1 on every rank (tcp) or give every host a device",
                peer, dev_.name.c_str());
  if (pi.slotBytes != slotBytes_ || pi.depth != depth_)
    CHORUS_FAIL(chorusInvalidUsage,
                "rank %d uses %d RDMA slots of %llu bytes, this rank %d of %zu: ranks disagree "
                "on CHORUS_CHUNKSIZE / CHORUS_BUFFSIZE / CHORUS_FIFO_DEPTH",
                peer, pi.depth, static_cast<unsigned long long>(pi.slotBytes), depth_, slotBytes_);
  if (pi.link != static_cast<uint8_t>(port_.link))
    CHORUS_FAIL(chorusInvalidUsage, "rank %d uses a %s port, this rank a %s port (%s:%d)", peer,
                linkName(static_cast<LinkLayer>(pi.link)), linkName(port_.link), dev_.name.c_str(),
                port_.port);

  auto c = std::make_unique<Channel>(proxy_.get(), proxy_->bell(), peer);
  c->commLinks = ctx.linkFailure;
  if (!c->sendRing.allocate(slotBytes_, depth_) || !c->recvRing.allocate(slotBytes_, depth_))
    CHORUS_FAIL(chorusSystemError, "cannot allocate RDMA buffers (2 x %d x %zu B) for rank %d",
                depth_, slotBytes_, peer);
  int err = ctx_->registerMemory(c->recvRing.mem.get(), c->recvRing.bytes(), true, &c->recvMr);
  if (err != 0)
    CHORUS_FAIL(chorusSystemError,
                "cannot register the %zu-byte RDMA receive FIFO for rank %d on %s: %s (check the "
                "locked-memory limit, ulimit -l)",
                c->recvRing.bytes(), peer, dev_.name.c_str(), strerror(err));
  const uint64_t pieces = pieceCount(slotBytes_, port_.maxMsgBytes);
  c->maxSendWrs = static_cast<int>(static_cast<uint64_t>(depth_) * pieces) + depth_ + 2;
  const int maxRecv = 2 * depth_ + 2;
  uint32_t qpn = 0;
  Channel* raw = c.get();
  channels_[static_cast<size_t>(peer)] = std::move(c);  // from here the destructor cleans up
  CHORUS_CHECK(ctx_->createQp(raw->maxSendWrs, maxRecv, &raw->qp, &qpn));
  for (int i = 0; i < maxRecv; ++i) {
    err = ctx_->postRecv(raw->qp, wrId(WrKind::Recv, peer, 0));
    if (err != 0)
      CHORUS_FAIL(chorusSystemError, "posting RDMA receives for rank %d: %s", peer, strerror(err));
  }

  PairInfo mine{};
  mine.magic = kPairMagic;
  mine.from = rank_;
  mine.to = peer;
  mine.qpn = qpn;
  mine.psn = static_cast<uint32_t>((nowNs() ^ (static_cast<int64_t>(qpn) << 8)) & 0xffffff);
  mine.lid = port_.lid;
  mine.useGrh = useGrh_ ? 1 : 0;
  mine.mtu = static_cast<uint8_t>(port_.activeMtu);
  for (const GidEntry& g : port_.gids)
    if (useGrh_ && g.index == gidIndex_) std::memcpy(mine.gid, g.raw, sizeof(mine.gid));
  mine.fifoAddr = reinterpret_cast<uint64_t>(raw->recvRing.mem.get());
  mine.fifoRkey = raw->recvMr.rkey;
  mine.depth = depth_;
  mine.slotBytes = slotBytes_;
  // Both ranks send first: the exchange buffers it, so the pair order cannot deadlock.
  PairInfo theirs{};
  CHORUS_CHECK(ctx.exchange->send(peer, kPairTag, &mine, sizeof(mine)));
  CHORUS_CHECK(ctx.exchange->recv(peer, kPairTag, &theirs, sizeof(theirs)));
  if (theirs.magic != kPairMagic || theirs.from != peer || theirs.to != rank_ ||
      theirs.depth != depth_ || theirs.slotBytes != slotBytes_)
    CHORUS_FAIL(chorusInternalError, "rank %d sent a malformed RDMA queue pair record", peer);

  QpAddress local, remote;
  local.qpn = qpn;
  local.psn = mine.psn;
  local.lid = mine.lid;
  std::memcpy(local.gid, mine.gid, sizeof(local.gid));
  local.gidIndex = gidIndex_;
  local.port = port_.port;
  remote.qpn = theirs.qpn;
  remote.psn = theirs.psn;
  remote.lid = theirs.lid;
  std::memcpy(remote.gid, theirs.gid, sizeof(remote.gid));
  local.useGrh = remote.useGrh = mine.useGrh || theirs.useGrh;
  local.mtu = remote.mtu = std::min<int>(mine.mtu, theirs.mtu);
  CHORUS_CHECK(ctx_->connectQp(raw->qp, local, remote, timing_));

  char desc[160];
  snprintf(desc, sizeof(desc), "rank %d (%s:%d qp 0x%x)", peer, pi.device, pi.port, theirs.qpn);
  raw->peerDesc = desc;
  raw->remoteFifo = theirs.fifoAddr;
  raw->remoteRkey = theirs.fifoRkey;
  CHORUS_TRACE(kLogNet, "RDMA qp 0x%x -> %s connected (mtu %d, %s)", qpn, desc, 128 << local.mtu,
               local.useGrh ? "GRH" : "LID");
  proxy_->activate(raw);
  *send = std::make_unique<RdmaSendConn>(raw, llMax_);
  *recv = std::make_unique<RdmaRecvConn>(raw, llMax_);
  return chorusSuccess;
}

void RdmaTransport::wakeAll() {
  aborted_.store(true);
  if (proxy_) wakeAllWaiters(proxy_->bell());
}

}  // namespace rdma
}  // namespace chorus
