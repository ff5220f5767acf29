// proxied/channel_health.h — how a channel driven by a progress thread (tcp, rdma) fails.
//
// The first thread to see a failure (the progress thread, or set-up for a peer that never
// connected) records it once; every application waiter then returns it, naming the peer and
// what it was doing (kept in a LinkFailure: written once, first writer only). A failure
// that loses data also goes to the communicator's LinkFailure, so waits on its other
// peers end too.
#pragma once

#include <string>

#include "chorus.h"
#include "src/core/link_failure.h"
#include "src/core/wait.h"

namespace chorus {
namespace proxied {

struct ChannelHealth {
  ChannelHealth(Doorbell* b, int peerRank) : bell(b), peer(peerRank) {}
  Doorbell* const bell;  // the application's waiters sleep here
  const int peer;
  std::string peerDesc;  // "rank 3 (10.0.0.2:41234)", set before activation

  /// The communicator's record of its first broken link (null: none), set before
  /// activation: a failure that loses data is recorded there too (see link_failure.h).
  LinkFailure* commLinks = nullptr;

  LinkFailure own;  // this channel's first failure

  bool healthy() const { return !own.failed(); }
  /// Records the first failure and wakes every waiter (any thread). `wholeComm`: also
  /// fails the communicator's other waits; false only for a peer that left cleanly
  /// between messages, which breaks nothing unless someone waits for it.
  void markFailed(int res, const std::string& msg, bool wholeComm = true);
  /// Application thread: the recorded failure as an error return (logged once per call by
  /// CHORUS_FAIL's machinery) naming the peer and what was being done.
  chorusResult_t raise(const char* what) const;
};

}  // namespace proxied
}  // namespace chorus
