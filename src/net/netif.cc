#include "src/net/netif.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <vector>

#include "src/core/checks.h"
#include "src/core/debug.h"

namespace chorus {
namespace {

struct Spec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};

Spec parseSpec(const std::string& s) {
  Spec spec;
  size_t pos = 0;
  if (pos < s.size() && s[pos] == '^') {
    spec.exclude = true;
    ++pos;
  }
  if (pos < s.size() && s[pos] == '=') {
    spec.exact = true;
    ++pos;
  }
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    if (comma > pos) spec.names.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return spec;
}

bool nameMatches(const Spec& spec, const char* name) {
  std::string n(name);
  for (const auto& want : spec.names) {
    if (spec.exact ? n == want : n.compare(0, want.size(), want) == 0) return true;
  }
  return false;
}

bool isLinkLocal6(const sockaddr* sa) {
  const auto* a6 = reinterpret_cast<const sockaddr_in6*>(sa);
  return IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr);
}

}  // namespace

chorusResult_t findInterfaceAddr(const std::string& specText, SockAddr* out, std::string* ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) CHORUS_FAIL(chorusSystemError, "getifaddrs failed");
  const Spec spec = parseSpec(specText);
  const bool positive = !spec.names.empty() && !spec.exclude;

  // Rank of a candidate; lower is better, -1 = not a candidate.
  auto rankOf = [&](const ifaddrs* ifa) -> int {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) return -1;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) return -1;
    if (!spec.names.empty() && nameMatches(spec, ifa->ifa_name) == spec.exclude) return -1;
    bool loop = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
    int r = fam == AF_INET ? 0 : (isLinkLocal6(ifa->ifa_addr) ? 2 : 1);
    if (loop && !positive) r += 3;  // loopback only as a last resort unless asked for
    return r;
  };

  const ifaddrs* best = nullptr;
  int bestRank = 1 << 30;
  for (const ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    int r = rankOf(ifa);
    if (r >= 0 && r < bestRank) {
      best = ifa;
      bestRank = r;
    }
  }
  if (!best) {
    freeifaddrs(list);
    CHORUS_FAIL(chorusInvalidArgument, "no up network interface matches CHORUS_SOCKET_IFNAME='%s'",
                specText.c_str());
  }
  SockAddr a;
  a.assign(best->ifa_addr,
           best->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
  a.setPort(0);
  if (ifname) *ifname = best->ifa_name;
  freeifaddrs(list);
  *out = a;
  return chorusSuccess;
}

}  // namespace chorus
