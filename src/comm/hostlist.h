// hostlist.h — the rendezvous strings of the environment, parsed by pure functions (so
// they can be fuzzed, tests/fuzz): Slurm's compressed host lists ("node[01-03,7],login1")
// and host:port addresses. CHORUS_SECRET's hex is src/bootstrap/secret.h.
#pragma once

#include <string>
#include <vector>

namespace chorus {

/// Expands a Slurm host list: comma-separated names, each with any number of bracket
/// groups of numbers and ranges whose zero padding is kept ("n[08-10]" -> n08 n09 n10;
/// "r[1-2]-n[1-2]" -> r1-n1 r1-n2 r2-n1 r2-n2). Returns false on malformed input
/// (unbalanced brackets, a range that runs backwards, more than `limit` names).
bool expandHostList(const std::string& list, std::vector<std::string>* out, size_t limit = 1 << 16);

/// Splits "host:port" or "[v6addr]:port" (the part after tcp://). The host may be empty;
/// the port must be a decimal number in 1..65535. On failure returns false and `*why`.
bool parseHostPort(const std::string& hostport, std::string* host, int* port, const char** why);

}  // namespace chorus
