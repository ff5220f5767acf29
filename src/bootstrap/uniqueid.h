// uniqueid.h — packing the root address and secret into a chorusUniqueId (the secret itself
// is secret.h and name resolution src/net/address.h, both included here for the id's users).
#pragma once

#include <cstdint>

#include "src/bootstrap/secret.h"
#include "src/net/address.h"
#include "src/net/socket.h"
#include "src/bootstrap/wire.h"
#include "chorus.h"

namespace chorus {

chorusResult_t encodeUniqueId(const SockAddr& root, const uint8_t* secret, chorusUniqueId* id);
/// Checks magic and address; a bad id is chorusInvalidArgument.
chorusResult_t decodeUniqueId(const chorusUniqueId& id, SockAddr* root, uint8_t* secret);

}  // namespace chorus
