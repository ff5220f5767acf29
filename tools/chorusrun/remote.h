// chorusrun remote launching helpers: the shell command a launch agent runs on
// another host, and the address by which the other hosts reach chorusrun.
#pragma once

#include <string>
#include <vector>

namespace chorusrun {

// Quotes one word for a POSIX shell: words made only of safe characters are
// returned as they are, anything else in single quotes (a ' inside becomes '\'').
std::string shellQuote(const std::string& word);

// How a remote rank is bound (bound_exec.h): `words` run before the command (chorusrun's
// path, then its --bound-exec words); where the remote host has no executable at words[0],
// `required` fails the rank (status 127) with `missing` on its stderr, otherwise the rank
// runs unbound after that note. Empty words: no binding.
struct RemoteBinder {
  std::vector<std::string> words;
  bool required = false;
  std::string missing;
};

// The string a launch agent hands to `sh -c` on the remote host:
//   cd WDIR || exit 1; exec env VAR=VALUE... CMD ARGS...
// with every word quoted by shellQuote. `env` holds "NAME=VALUE" entries. With a binder:
//   cd WDIR || exit 1; [ -x BINDER ] && exec env VAR=VALUE... BINDER... CMD ARGS...;
//   printf '%s\n' MISSING >&2; exec env VAR=VALUE... CMD ARGS...
// (required: `[ -x BINDER ] || { printf ... >&2; exit 127; }; exec env ... BINDER... CMD`).
std::string remoteCommand(const std::string& wdir, const std::vector<std::string>& env,
                          const std::vector<std::string>& command,
                          const RemoteBinder& binder = RemoteBinder());

// A rendezvous address: the text for the URL (IPv6 in brackets), the address
// family, and whether it is a loopback address.
struct RendezvousAddr {
  std::string urlHost;   // "10.0.0.1" or "[fd00::1]" (what goes between tcp:// and :PORT)
  std::string bindHost;  // what the root listens on: the loopback address itself, else the
                         // wildcard of the family ("0.0.0.0" or "::")
};

// From an address or name given by the user (--rendezvous-addr).
bool rendezvousFromText(const std::string& text, RendezvousAddr* out, std::string* err);

// The local address the kernel would use to reach `host` (a UDP socket
// connect()ed to it; no packet is sent).
bool rendezvousByRoute(const std::string& host, RendezvousAddr* out, std::string* err);

}  // namespace chorusrun
