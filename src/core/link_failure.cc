#include "src/core/link_failure.h"

#include "src/core/checks.h"

namespace chorus {

bool LinkFailure::record(int res, const std::string& msg) {
  if (res == 0 || claimed.exchange(true, std::memory_order_acq_rel)) return false;
  what = msg;
  code.store(res, std::memory_order_release);
  return true;
}

chorusResult_t LinkFailure::raise(const char* during) const {
  const int res = code.load(std::memory_order_acquire);
  return fail(res ? static_cast<chorusResult_t>(res) : chorusInternalError, __FILE__, __LINE__,
              "a connection of this communicator broke earlier, so %s cannot complete: %s",
              during ? during : "the transfer", what.c_str());
}

}  // namespace chorus
