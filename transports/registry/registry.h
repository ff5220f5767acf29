// registry/registry.h — the table of built-in transports, in order of preference.
//
// Its own folder: the table names every transport, and every transport includes the
// interface (transports/transport.h), so the table cannot live beside the interface
// without a folder cycle. src/comm walks the table; test binaries may link a table of
// their own instead (tests/rdma/standin_registry.cc, chorus_core_sans_registry).
#pragma once

#include <memory>

#include "transports/transport.h"

namespace chorus {

struct TransportEntry {
  const char* name;
  /// Makes one communicator's instance; it takes its settings from ctx.shm / tcp / rdma.
  std::unique_ptr<Transport> (*create)(const TransportContext& ctx);
};
const TransportEntry* transportTable(int* count);

}  // namespace chorus
