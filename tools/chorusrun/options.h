// chorusrun command-line options.
//
// Parsing is kept apart from launching so that it has no side effects: it
// reads argv (and, for `-x VAR`, the launcher's own environment) and returns
// either a filled Options or the reason to stop (help, version, usage error).
#pragma once

#include <string>
#include <vector>

#include "tools/chorusrun/hosts.h"

#include "tools/chorusrun/binding.h"

namespace chorusrun {

// Largest -np accepted. Each rank costs a process here (a local rank or its
// launch agent) and, with --tag-output, two pipes.
constexpr int kMaxRanks = 4096;

// Environment variables chorusrun always sets itself; `-x` may not touch them.
constexpr int kNumRankVars = 5;
extern const char* const kRankVars[kNumRankVars];

struct EnvSetting {
  std::string name;
  std::string value;
};

struct Options {
  int np = 0;                         // number of ranks (>= 1 after a successful parse)
  bool tagOutput = false;             // prefix each output line with "[rank] " ("[rank,host] ")
  double timeoutSeconds = 0;          // > 0: kill the job after this many seconds
  std::string wdir;                   // empty: inherit the launcher's directory
  std::vector<EnvSetting> exports;    // from -x, in command-line order (last one wins)
  std::vector<std::string> warnings;  // non-fatal notes to print (e.g. -x of an unset variable)
  std::vector<std::string> command;   // CMD ARGS...

  // Multi-host jobs (-H / --hostfile). Without them `hosts` is empty and every
  // rank is a local child, exactly as before hosts existed.
  std::vector<HostSpec> hosts;        // merged: one entry per host, in order of appearance
  std::vector<Placement> placements;  // per rank (np entries when hosts is not empty)
  std::vector<int> localSizes;        // ranks per host
  bool oversubscribe = false;
  bool keepGoing = false;  // --keep-going: a failed rank does not stop the others
  std::vector<std::string> launchAgent{"ssh"};  // --launch-agent, split on whitespace
  std::string rendezvousAddr;                   // --rendezvous-addr (empty: found automatically)
  BindMode bindTo = BindMode::kAuto;            // --bind-to (binding.h)

  bool hostMode() const { return !hosts.empty(); }
  // More than one host, or a host that is not this machine: output tags and
  // failure messages then name the host.
  bool multiHost() const { return hosts.size() > 1 || (hosts.size() == 1 && !hosts[0].local); }
  bool anyRemote() const {
    for (const HostSpec& h : hosts) {
      if (!h.local) return true;
    }
    return false;
  }
};

enum class ParseStatus { kRun, kHelp, kVersion, kUsageError };

struct ParseResult {
  ParseStatus status = ParseStatus::kUsageError;
  std::string error;  // for kUsageError: one line, without the program name
};

ParseResult parseOptions(int argc, char** argv, Options* out);

// The full --help text.
std::string usageText();

}  // namespace chorusrun
