// uniqueid.h — packing the root address and secret into a chorusUniqueId, and the small
// helpers around it (name resolution; the secret itself is secret.h, included here for the
// id's users).
#pragma once

#include <cstdint>

#include "src/bootstrap/secret.h"
#include "src/net/socket.h"
#include "src/bootstrap/wire.h"
#include "chorus.h"

namespace chorus {

chorusResult_t encodeUniqueId(const SockAddr& root, const uint8_t* secret, chorusUniqueId* id);
/// Checks magic and address; a bad id is chorusInvalidArgument.
chorusResult_t decodeUniqueId(const chorusUniqueId& id, SockAddr* root, uint8_t* secret);

/// Resolves host:port (a name or a numeric IPv4/IPv6 address) to its first stream
/// address. `passive` with an empty host gives the wildcard address.
chorusResult_t resolveHost(const char* host, int port, bool passive, SockAddr* out);

}  // namespace chorus
