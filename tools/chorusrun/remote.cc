#include "tools/chorusrun/remote.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace chorusrun {
namespace {

bool safeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::strchr("_@%+=:,./-", c) != nullptr;
}

bool isLoopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  }
  return false;
}

bool fill(const sockaddr* sa, socklen_t len, RendezvousAddr* out, std::string* err) {
  char host[NI_MAXHOST];
  int rc = getnameinfo(sa, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
  if (rc != 0) {
    *err = std::string("getnameinfo: ") + gai_strerror(rc);
    return false;
  }
  const bool v6 = sa->sa_family == AF_INET6;
  out->urlHost = v6 ? "[" + std::string(host) + "]" : std::string(host);
  if (isLoopback(sa)) {
    out->bindHost = host;
  } else {
    out->bindHost = v6 ? "::" : "0.0.0.0";
  }
  return true;
}

std::string stripBrackets(const std::string& s) {
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') return s.substr(1, s.size() - 2);
  return s;
}

}  // namespace

std::string shellQuote(const std::string& word) {
  if (!word.empty()) {
    bool safe = true;
    for (char c : word) safe = safe && safeChar(c);
    if (safe) return word;
  }
  std::string q = "'";
  for (char c : word) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  q += "'";
  return q;
}

std::string remoteCommand(const std::string& wdir, const std::vector<std::string>& env,
                          const std::vector<std::string>& command, const RemoteBinder& binder) {
  std::string s;
  if (!wdir.empty()) {
    // A relative directory starting with '-' must not look like an option to cd.
    std::string dir = wdir[0] == '-' ? "./" + wdir : wdir;
    s += "cd " + shellQuote(dir) + " || exit 1; ";
  }
  std::string envPart = "exec env";
  for (const std::string& e : env) envPart += " " + shellQuote(e);
  std::string commandPart;
  for (const std::string& w : command) commandPart += " " + shellQuote(w);
  if (binder.words.empty()) return s + envPart + commandPart;
  std::string bound = envPart;
  for (const std::string& w : binder.words) bound += " " + shellQuote(w);
  bound += commandPart;
  const std::string test = "[ -x " + shellQuote(binder.words[0]) + " ]";
  // printf, not echo: some shells' echo reads backslashes in the path as escapes.
  const std::string note = "printf '%s\\n' " + shellQuote(binder.missing) + " >&2";
  if (binder.required) return s + test + " || { " + note + "; exit 127; }; " + bound;
  return s + test + " && " + bound + "; " + note + "; " + envPart + commandPart;
}

bool rendezvousFromText(const std::string& text, RendezvousAddr* out, std::string* err) {
  std::string host = stripBrackets(text);
  if (host.empty()) {
    *err = "empty --rendezvous-addr";
    return false;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    *err = "cannot resolve --rendezvous-addr '" + text + "': " + gai_strerror(rc);
    return false;
  }
  const bool v6 = res->ai_family == AF_INET6;
  const bool loopback = isLoopback(res->ai_addr);
  bool ok = true;
  if (loopback) {
    ok = fill(res->ai_addr, res->ai_addrlen, out, err);
  }
  freeaddrinfo(res);
  if (!ok) return false;
  if (!loopback) {
    // Keep the user's spelling in the URL: ranks resolve a name themselves.
    bool literalV6 = host.find(':') != std::string::npos;
    out->urlHost = literalV6 ? "[" + host + "]" : host;
    out->bindHost = v6 ? "::" : "0.0.0.0";
  }
  return true;
}

bool rendezvousByRoute(const std::string& host, RendezvousAddr* out, std::string* err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  // Port 9 (discard): connect() on a UDP socket only looks up the route.
  int rc = getaddrinfo(stripBrackets(host).c_str(), "9", &hints, &res);
  if (rc != 0 || res == nullptr) {
    *err = "cannot resolve host '" + host +
           "' to find the rendezvous address: " + gai_strerror(rc) +
           " (use --rendezvous-addr ADDR)";
    return false;
  }
  std::string last = "no usable address";
  bool ok = false;
  for (addrinfo* ai = res; ai && !ok; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    int s = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
      last = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
      last = std::string("no route: ") + std::strerror(errno);
    } else if (getsockname(s, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      last = std::string("getsockname: ") + std::strerror(errno);
    } else {
      ok = fill(reinterpret_cast<sockaddr*>(&local), len, out, &last);
    }
    close(s);
  }
  freeaddrinfo(res);
  if (!ok) {
    *err = "cannot find the local address that reaches host '" + host + "': " + last +
           " (use --rendezvous-addr ADDR)";
  }
  return ok;
}

}  // namespace chorusrun
