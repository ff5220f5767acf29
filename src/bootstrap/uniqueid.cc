#include "src/bootstrap/uniqueid.h"

#include <cstdio>
#include <cstring>

#include "src/bootstrap/bootstrap.h"
#include "src/core/checks.h"
#include "src/core/debug.h"

namespace chorus {

chorusResult_t encodeUniqueId(const SockAddr& root, const uint8_t* secret, chorusUniqueId* id) {
  if (!root.validFamily())
    CHORUS_FAIL(chorusInvalidArgument, "root address has family %d", root.family());
  UniqueIdData d;
  memset(&d, 0, sizeof(d));
  d.magic = kUniqueIdMagic;
  d.addrLen = root.len;
  memcpy(d.secret, secret, kSecretBytes);
  memcpy(d.addr, &root.ss, root.len);
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &d, sizeof(d));
  return chorusSuccess;
}

chorusResult_t decodeUniqueId(const chorusUniqueId& id, SockAddr* root, uint8_t* secret) {
  UniqueIdData d;
  memcpy(&d, id.internal, sizeof(d));
  if (d.magic != kUniqueIdMagic)
    CHORUS_FAIL(chorusInvalidArgument,
                "unique id has a bad magic (0x%08x): not made by chorusGetUniqueId?", d.magic);
  if (d.addrLen > sizeof(d.addr) || !root->assign(d.addr, d.addrLen))
    CHORUS_FAIL(chorusInvalidArgument, "unique id holds a malformed root address (%u bytes)",
                d.addrLen);
  memcpy(secret, d.secret, kSecretBytes);
  return chorusSuccess;
}

chorusResult_t bootstrapIdFor(const char* host, int port, const uint8_t secret[16],
                              chorusUniqueId* id) {
  if (id == nullptr || secret == nullptr)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrapIdFor: NULL %s", id ? "secret" : "id");
  if (host == nullptr || host[0] == '\0')
    CHORUS_FAIL(chorusInvalidArgument, "bootstrapIdFor: empty host");
  if (port <= 0 || port > 65535)
    CHORUS_FAIL(chorusInvalidArgument, "bootstrapIdFor: port %d out of range", port);
  SockAddr a;
  CHORUS_CHECK(resolveHost(host, port, false, &a));
  CHORUS_CHECK(encodeUniqueId(a, secret, id));
  return chorusSuccess;
}

}  // namespace chorus
