// address.h — turning a host name or numeric address into a socket address: the one
// parser the bootstrap (unique ids, the root's bind address) and the launchers share.
#pragma once

#include "chorus.h"
#include "src/net/socket.h"

namespace chorus {

/// Resolves host:port (a name or a numeric IPv4/IPv6 address, "[v6]" accepted) to its
/// first stream address. `passive` with an empty host gives the wildcard address.
chorusResult_t resolveHost(const char* host, int port, bool passive, SockAddr* out);

}  // namespace chorus
