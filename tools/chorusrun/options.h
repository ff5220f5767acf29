// chorusrun command-line options.
//
// Parsing is kept apart from launching so that it has no side effects: it
// reads argv (and, for `-x VAR`, the launcher's own environment) and returns
// either a filled Options or the reason to stop (help, version, usage error).
#pragma once

#include <string>
#include <vector>

namespace chorusrun {

// Largest -np accepted. Each rank costs a process and, with --tag-output, two
// pipes; a single host has no use for more.
constexpr int kMaxRanks = 4096;

// Environment variables chorusrun always sets itself; `-x` may not touch them.
extern const char* const kRankVars[4];

struct EnvSetting {
  std::string name;
  std::string value;
};

struct Options {
  int np = 0;                       // number of ranks (>= 1 after a successful parse)
  bool tag_output = false;          // prefix each output line with "[rank] "
  double timeout_s = 0;             // > 0: kill the job after this many seconds
  std::string wdir;                 // empty: inherit the launcher's directory
  std::vector<EnvSetting> exports;  // from -x, in command-line order (last one wins)
  std::vector<std::string> warnings;  // non-fatal notes to print (e.g. -x of an unset variable)
  std::vector<std::string> command;   // CMD ARGS...
};

enum class ParseStatus { kRun, kHelp, kVersion, kUsageError };

struct ParseResult {
  ParseStatus status = ParseStatus::kUsageError;
  std::string error;  // for kUsageError: one line, without the program name
};

ParseResult ParseOptions(int argc, char** argv, Options* out);

// The full --help text.
std::string UsageText();

}  // namespace chorusrun
