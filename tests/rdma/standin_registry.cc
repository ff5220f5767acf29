// standin_registry.cc — the transport table of the stand-in test binaries (TESTS ONLY).
//
// libchorus's table (transports/registry/registry.cc) binds the rdma transport to
// libibverbs. The test binaries of tests/rdma link every other library object
// (chorus_core_sans_registry) with this table instead, which binds the same RdmaTransport
// to the in-memory STAND-IN verbs (transports/rdma/verbs_standin.h), so whole collectives
// run through the rdma transport's logic on a machine without an RDMA device. Nothing here
// can reach libchorus: it is a different link, not a switch inside the library.
#include "transports/rdma/transport.h"
#include "transports/rdma/verbs_standin.h"
#include "transports/registry/registry.h"
#include "transports/tcp/transport.h"
#include "transports/transport.h"

namespace chorus {
namespace {

rdma::Options standinOptions(const TransportContext& ctx) {
  rdma::Options o = ctx.rdma;
  const rdma::standin::TransportKnobs k = rdma::standin::Fabric::instance().knobs();
  if (k.depth) o.depth = k.depth;
  if (k.slotBytes) o.slotBytes = k.slotBytes;
  if (k.regCacheBytes) o.regCacheBytes = k.regCacheBytes;
  return o;
}

// The stand-in's fabric spans one process: only ranks that are threads of it may use it.
class StandinRdmaTransport final : public Transport {
 public:
  explicit StandinRdmaTransport(const TransportContext& ctx)
      : inner_(rdma::standin::makeStandinVerbs(), standinOptions(ctx)) {}
  const char* name() const override { return "rdma"; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.pid == peer.pid && inner_.canConnect(self, peer);
  }
  chorusResult_t setup(const TransportContext& ctx, void* info) override {
    return inner_.setup(ctx, info);
  }
  chorusResult_t connect(const TransportContext& ctx, int peer, const void* peerInfo,
                         std::unique_ptr<SendConn>* send,
                         std::unique_ptr<RecvConn>* recv) override {
    return inner_.connect(ctx, peer, peerInfo, send, recv);
  }
  void finishSetup() override { inner_.finishSetup(); }
  void wakeAll() override { inner_.wakeAll(); }

 private:
  rdma::RdmaTransport inner_;
};

std::unique_ptr<Transport> createStandinRdma(const TransportContext& ctx) {
  return std::make_unique<StandinRdmaTransport>(ctx);
}

}  // namespace

const TransportEntry* transportTable(int* count) {
  static const TransportEntry kTable[] = {
      {"rdma", &createStandinRdma},  // stand-in verbs: every thread rank of this process
      {"tcp", &tcp::createTcpTransport},
  };
  *count = static_cast<int>(sizeof(kTable) / sizeof(kTable[0]));
  return kTable;
}

}  // namespace chorus
