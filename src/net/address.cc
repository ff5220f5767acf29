#include "src/net/address.h"

#include <netdb.h>

#include <cstdio>
#include <cstring>

#include "src/core/checks.h"

namespace chorus {

chorusResult_t resolveHost(const char* host, int port, bool passive, SockAddr* out) {
  if (host == nullptr) CHORUS_FAIL(chorusInvalidArgument, "host is NULL");
  if (port < 0 || port > 65535) CHORUS_FAIL(chorusInvalidArgument, "port %d out of range", port);
  // Accept "[v6addr]" as well as the bare address.
  char name[256];
  size_t n = strlen(host);
  if (n >= sizeof(name)) CHORUS_FAIL(chorusInvalidArgument, "host name too long (%zu)", n);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    memcpy(name, host + 1, n - 2);
    name[n - 2] = '\0';
  } else {
    memcpy(name, host, n + 1);
  }
  char service[16];
  snprintf(service, sizeof(service), "%d", port);
  addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  int rc = getaddrinfo(name[0] ? name : nullptr, service, &hints, &res);
  if (rc != 0)
    CHORUS_FAIL(chorusInvalidArgument, "cannot resolve '%s': %s", host, gai_strerror(rc));
  bool ok = false;
  for (addrinfo* ai = res; ai && !ok; ai = ai->ai_next) {
    if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
        out->assign(ai->ai_addr, ai->ai_addrlen))
      ok = true;
  }
  freeaddrinfo(res);
  if (!ok) CHORUS_FAIL(chorusInvalidArgument, "'%s' has no IPv4/IPv6 address", host);
  return chorusSuccess;
}

}  // namespace chorus
