// rdma/verbs_standin.h — STAND-IN verbs for tests: NOT an RDMA implementation.
//
// Our machines have no RDMA device, so the rdma transport's logic is tested against this
// in-memory model of the verbs it uses: queue pairs between the thread ranks of ONE
// process, RDMA WRITE (with immediate) done as a memcpy by the posting thread into the
// peer's registered memory, completion queues with a completion channel (an eventfd), an
// MR table with keys and bounds checks and an optional size limit, and injectable error
// completions. It follows verbs semantics where the transport depends on them (a write
// with immediate consumes a posted receive or fails receiver-not-ready, an error moves the
// queue pair to the error state and flushes its receives, posts need RTS, keys and ranges
// are checked), so a transport bug shows up as the error completion real hardware would
// give. Compiled into test binaries only (tests/rdma); libchorus never contains it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "transports/rdma/verbs.h"

namespace chorus {
namespace rdma {
namespace standin {

struct Config {
  uint64_t maxMsgBytes = 1ull << 30;  ///< port max_msg_sz: larger messages go in pieces
  int maxMrs = 1 << 20;               ///< registrations per device context (ENOMEM beyond)
  int maxQpWr = 16384;
  LinkLayer link = LinkLayer::InfiniBand;
};

struct Stats {
  uint64_t writes = 0;     ///< writes posted (data pieces and credits)
  uint64_t bytes = 0;      ///< bytes moved
  uint64_t localRegs = 0;  ///< registrations without remote access (send staging)
  uint64_t localDeregs = 0;
  uint64_t remoteRegs = 0;        ///< registrations with remote write (receive FIFOs)
  uint64_t refusedRegs = 0;       ///< registrations refused (maxMrs)
  uint64_t errorCompletions = 0;  ///< error completions generated (injected or not)
};

/// Test-only knobs applied to the transport's Options (0 keeps the normal value).
struct TransportKnobs {
  int depth = 0;
  size_t slotBytes = 0;
  size_t regCacheBytes = 0;
};

/// The process-wide in-memory "network" every stand-in device joins.
class Fabric {
 public:
  static Fabric& instance();
  void configure(const Config& c);
  Config config();
  /// The write posted after `afterWrites` more successful ones completes with `status`
  /// (an enum ibv_wc_status value, e.g. 12 = transport retry counter exceeded).
  void injectWriteError(uint64_t afterWrites, int status);
  Stats stats();
  void resetStats();
  TransportKnobs knobs();
  void setKnobs(const TransportKnobs& k);
};

/// A Verbs whose single device "standin0" (port 1, active) lives on the Fabric.
std::unique_ptr<Verbs> makeStandinVerbs();

}  // namespace standin
}  // namespace rdma
}  // namespace chorus
