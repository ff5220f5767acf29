// registry.cc — the built-in transports, in order of preference for a peer pair.
#include "shm/transport.h"
#include "tcp/transport.h"
#include "transport.h"

namespace chorus {

const TransportEntry* transportTable(int* count) {
  static const TransportEntry kTable[] = {
      {"shm", &shm::createShmTransport},
      {"tcp", &tcp::createTcpTransport},  // reaches everyone: last
  };
  *count = static_cast<int>(sizeof(kTable) / sizeof(kTable[0]));
  return kTable;
}

}  // namespace chorus
