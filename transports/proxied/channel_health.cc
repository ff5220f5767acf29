#include "transports/proxied/channel_health.h"

#include "src/core/checks.h"
#include "src/core/debug.h"

namespace chorus {
namespace proxied {

void ChannelHealth::markFailed(int res, const std::string& msg, bool wholeComm) {
  if (!own.record(res, msg)) return;
  CHORUS_INFO(kLogNet, "%s", msg.c_str());
  if (wholeComm && commLinks) commLinks->record(res, msg);
  // Every waiter must see it promptly: bump the bell even if nobody sleeps on it yet.
  bell->seq.fetch_add(1, std::memory_order_seq_cst);
  ringDoorbell(bell);
}

chorusResult_t ChannelHealth::raise(const char* what) const {
  const int res = own.code.load(std::memory_order_acquire);
  return fail(res ? static_cast<chorusResult_t>(res) : chorusInternalError, __FILE__, __LINE__,
              "%s during %s", own.what.c_str(), what ? what : "a transfer");
}

}  // namespace proxied
}  // namespace chorus
