// netif.h — which local interface address to listen on (the bootstrap, the tcp transport).
#pragma once

#include <string>

#include "chorus.h"
#include "src/net/socket.h"

namespace chorus {

/// Picks a local interface address (port 0) from `spec`, the CHORUS_SOCKET_IFNAME syntax:
///   ""            the first up non-loopback IPv4 interface, else the first up non-loopback
///                 IPv6 one (global before link-local), else loopback;
///   "eth,ib"      interfaces whose name starts with one of the prefixes;
///   "=eth0,eth1"  exact names;
///   "^docker,lo"  every interface except those prefixes ("^=" for exact names);
///                 loopback only when nothing else is left.
/// Among matches IPv4 comes before IPv6. No match is chorusInvalidArgument.
chorusResult_t findInterfaceAddr(const std::string& spec, SockAddr* out, std::string* ifname);

}  // namespace chorus
