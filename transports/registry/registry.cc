// registry.cc — the built-in transports, in order of preference for a peer pair.
#include "transports/registry/registry.h"

#include "config.h"
#include "transports/rdma/transport.h"
#include "transports/shm/transport.h"
#include "transports/tcp/transport.h"

namespace chorus {

const TransportEntry* transportTable(int* count) {
  static const TransportEntry kTable[] = {
    {"shm", &shm::createShmTransport},
#if HAVE_IBVERBS
    // Usable only with an active device port and without CHORUS_IB_DISABLE=1; otherwise
    // it logs why and leaves every pair to tcp.
    {"rdma", &rdma::createRdmaTransport},
#endif
    {"tcp", &tcp::createTcpTransport},  // reaches everyone: last
  };
  *count = static_cast<int>(sizeof(kTable) / sizeof(kTable[0]));
  return kTable;
}

}  // namespace chorus
