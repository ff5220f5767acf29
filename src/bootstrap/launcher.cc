#include "src/bootstrap/launcher.h"

#include <cstdint>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/root.h"
#include "src/bootstrap/secret.h"
#include "src/bootstrap/uniqueid.h"
#include "src/core/checks.h"

namespace chorus {

chorusResult_t launcherNewSecret(std::string* hex) {
  uint8_t secret[16];
  CHORUS_CHECK(randomSecret(secret));
  *hex = secretToHex(secret);
  return chorusSuccess;
}

bool launcherSecretValid(const std::string& hex) {
  uint8_t ignored[16];
  return parseSecretHex(hex, ignored);
}

chorusResult_t launcherServeRoot(const std::string& bindHost, const std::string& secretHex,
                                 int* port) {
  uint8_t key[16];
  if (!parseSecretHex(secretHex, key))
    CHORUS_FAIL(chorusInvalidArgument,
                "the job secret is not 32 hexadecimal digits (CHORUS_SECRET has %zu characters)",
                secretHex.size());
  // "No deadline": a year from now.
  const int64_t deadline = monotonicNs() + 365ll * 24 * 3600 * 1000000000ll;
  chorusUniqueId id;
  CHORUS_CHECK(bootstrapStartRoot(bindHost.c_str(), 0, key, deadline, &id));
  SockAddr addr;
  uint8_t ignored[16];
  CHORUS_CHECK(decodeUniqueId(id, &addr, ignored));
  if (addr.port() <= 0)
    CHORUS_FAIL(chorusInternalError, "the bootstrap root on %s reported no port", bindHost.c_str());
  *port = addr.port();
  return chorusSuccess;
}

}  // namespace chorus
