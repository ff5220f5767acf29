// chorusrun host lists: -H / --hostfile parsing, which names mean "this
// machine", and the rank -> host mapping. No side effects beyond reading the
// hostfile and calling gethostname().
#pragma once

#include <string>
#include <vector>

namespace chorusrun {

struct HostSpec {
  std::string name;    // as given (IPv6 without brackets)
  int slots = 1;       // >= 1
  bool local = false;  // started by fork() here rather than through the launch agent
};

// Where one rank runs.
struct Placement {
  int host = 0;       // index into the host list (also CHORUS_NODE_RANK)
  int localRank = 0;  // rank among the ranks of that host, in global rank order
};

// Parses one -H value: "a,b:2,[fe80::1]:4,a" (slots default 1). Appends to
// `hosts` in order; false with `err` set on a malformed entry.
bool parseHostList(const std::string& text, std::vector<HostSpec>* hosts, std::string* err);

// Reads an Open MPI style hostfile: "host [slots=N] [max_slots=N]" per line,
// '#' starts a comment, blank lines are skipped. max_slots / max-slots are
// accepted and ignored.
bool parseHostfile(const std::string& path, std::vector<HostSpec>* hosts, std::string* err);

// True for "localhost", "127.0.0.1", "::1" and this machine's hostname (also
// its short form, the part before the first dot).
bool isLocalHostName(const std::string& name);

// Merges repeated names (their slots add up, the first position is kept) and
// all names of this machine into one entry (the first local name seen), and
// sets HostSpec::local.
std::vector<HostSpec> mergeHosts(const std::vector<HostSpec>& hosts);

// Maps np ranks onto the slots of `hosts` by slot: host 0's slots first, then
// host 1's, ... When np exceeds the total number of slots and `oversubscribe`
// is set, the slot list is repeated (rank r takes slot r mod total); without
// it that is an error. `localSizes` gets the number of ranks per host.
bool mapRanks(const std::vector<HostSpec>& hosts, int np, bool oversubscribe,
              std::vector<Placement>* placements, std::vector<int>* localSizes, std::string* err);

int totalSlots(const std::vector<HostSpec>& hosts);

}  // namespace chorusrun
