// core/link_failure.h — a communicator's first broken connection, seen by every wait.
//
// A collective needs every link it uses. When one breaks (a tcp socket reset, an RDMA
// write's error completion), the rank whose send was lost may by then be waiting on a
// different, healthy peer, and that peer waits on the broken link's far end: each sits
// until its deadline and nobody says why. So a progress thread records the failure here
// as well as on the channel, and every wait of the communicator returns it (as NCCL's
// asynchronous error puts the whole communicator in error). Each proxied channel keeps
// its own failure in one too (transports/proxied/channel_health.h). Written once; `code`
// is stored with release after `what`.
#pragma once

#include <atomic>
#include <string>

#include "chorus.h"

namespace chorus {

struct LinkFailure {
  std::atomic<int> code{0};  ///< a chorusResult_t; 0 while every link is healthy
  std::atomic<bool> claimed{false};
  std::string what;  ///< "rank 1 (10.0.0.2:4123) closed the connection ..."

  bool failed() const { return code.load(std::memory_order_acquire) != 0; }
  /// Any thread: keeps the first failure only; true if this call recorded it.
  bool record(int res, const std::string& msg);
  /// Application thread: the failure as an error return, logged, naming `during`.
  chorusResult_t raise(const char* during) const;
};

}  // namespace chorus
