#include "options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace chorusrun {

const char* const kRankVars[4] = {"CHORUS_RANK", "CHORUS_WORLD_SIZE", "CHORUS_LOCAL_RANK",
                                  "CHORUS_LOCAL_SIZE"};

namespace {

bool ParseRankCount(const std::string& text, int* out) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < 1 || v > kMaxRanks) return false;
  *out = static_cast<int>(v);
  return true;
}

bool ParseSeconds(const std::string& text, double* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v <= 0 || v > 1e8) return false;
  *out = v;
  return true;
}

bool ValidEnvName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

// The bootstrap reads CHORUS_SECRET as 128 bits in hex; catch a bad one here
// rather than in every rank.
bool ValidSecret(const std::string& s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex) return false;
  }
  return true;
}

ParseResult UsageError(std::string msg) {
  ParseResult r;
  r.status = ParseStatus::kUsageError;
  r.error = std::move(msg);
  return r;
}

}  // namespace

std::string UsageText() {
  return
      "Usage: chorusrun -np N [options] [--] CMD [ARGS...]\n"
      "\n"
      "Start N local ranks of CMD (looked up in PATH) for one Chorus job.\n"
      "\n"
      "Options:\n"
      "  -np N, -n N, --np N   number of ranks to start (1.." + std::to_string(kMaxRanks) + ", required)\n"
      "  -x VAR                forward VAR from chorusrun's environment to every rank\n"
      "  -x VAR=VALUE          set VAR=VALUE in every rank's environment\n"
      "  --tag-output          prefix every line of rank output with \"[rank] \"\n"
      "                        (stdout to stdout, stderr to stderr, whole lines only);\n"
      "                        without it ranks share chorusrun's stdout/stderr untouched\n"
      "  --timeout SECONDS     kill the job and exit 124 if it runs longer than SECONDS\n"
      "  --wdir DIR            run the ranks in DIR (a relative CMD is taken from DIR)\n"
      "  -h, --help            show this help and exit\n"
      "  --version             show the version and exit\n"
      "\n"
      "Each rank gets CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_LOCAL_RANK,\n"
      "CHORUS_LOCAL_SIZE, CHORUS_INIT=tcp://127.0.0.1:PORT (a free port; rank 0\n"
      "listens there) and CHORUS_SECRET (128 random bits, hex). CHORUS_INIT and\n"
      "CHORUS_SECRET may be overridden with -x.\n"
      "\n"
      "Exit status: 0 if every rank succeeded; 128+SIG if a rank was killed by\n"
      "signal SIG; otherwise the largest failing exit status. When a rank fails,\n"
      "the others get SIGTERM and, 2 s later, SIGKILL. 124: --timeout expired;\n"
      "130/143: chorusrun got SIGINT/SIGTERM; 127/126: CMD not found/not\n"
      "executable; 2: usage error.\n";
}

ParseResult ParseOptions(int argc, char** argv, Options* out) {
  Options opts;
  int i = 1;
  // Options end at the first argument that does not start with '-' (CMD), or at "--".
  while (i < argc) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") break;

    // Split "--opt=value" forms; single-dash options take their value from the next argument.
    std::string name = arg;
    std::string inline_value;
    bool has_inline = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
        has_inline = true;
      }
    }
    auto takes_value = [&](std::string* value) -> bool {
      if (has_inline) {
        *value = inline_value;
        return true;
      }
      if (i + 1 >= argc) return false;
      *value = argv[++i];
      return true;
    };
    auto no_value = [&]() { return !has_inline; };

    if (name == "-h" || name == "--help") {
      if (!no_value()) return UsageError("option '" + name + "' takes no value");
      ParseResult r;
      r.status = ParseStatus::kHelp;
      return r;
    } else if (name == "--version") {
      if (!no_value()) return UsageError("option '" + name + "' takes no value");
      ParseResult r;
      r.status = ParseStatus::kVersion;
      return r;
    } else if (name == "-np" || name == "-n" || name == "--np") {
      std::string v;
      if (!takes_value(&v)) return UsageError("option '" + name + "' needs a rank count");
      if (!ParseRankCount(v, &opts.np)) {
        return UsageError("invalid rank count '" + v + "' for " + name + " (expected an integer 1.." +
                          std::to_string(kMaxRanks) + ")");
      }
    } else if (name == "-x") {
      std::string v;
      if (!takes_value(&v)) return UsageError("option '-x' needs VAR or VAR=VALUE");
      size_t eq = v.find('=');
      std::string var = v.substr(0, eq);
      if (!ValidEnvName(var)) return UsageError("invalid variable name '" + var + "' for -x");
      for (const char* reserved : kRankVars) {
        if (var == reserved) {
          return UsageError("-x cannot set " + var + ": chorusrun sets it for each rank");
        }
      }
      if (eq != std::string::npos) {
        std::string value = v.substr(eq + 1);
        if (var == "CHORUS_SECRET" && !ValidSecret(value)) {
          return UsageError("-x CHORUS_SECRET must be 32 hexadecimal digits");
        }
        opts.exports.push_back({var, value});
      } else if (const char* cur = std::getenv(var.c_str())) {
        opts.exports.push_back({var, cur});
      } else {
        opts.warnings.push_back("-x " + var + ": not set in chorusrun's environment; nothing to forward");
      }
    } else if (name == "--tag-output") {
      if (!no_value()) return UsageError("option '" + name + "' takes no value");
      opts.tag_output = true;
    } else if (name == "--timeout") {
      std::string v;
      if (!takes_value(&v)) return UsageError("option '--timeout' needs a number of seconds");
      if (!ParseSeconds(v, &opts.timeout_s)) {
        return UsageError("invalid --timeout '" + v + "' (expected a positive number of seconds)");
      }
    } else if (name == "--wdir") {
      std::string v;
      if (!takes_value(&v)) return UsageError("option '--wdir' needs a directory");
      if (v.empty()) return UsageError("option '--wdir' needs a non-empty directory");
      opts.wdir = v;
    } else {
      return UsageError("unknown option '" + arg + "'");
    }
    ++i;
  }

  if (opts.np == 0) return UsageError("missing -np N (the number of ranks to start)");
  if (i >= argc) return UsageError("missing the command to run");
  for (; i < argc; ++i) opts.command.emplace_back(argv[i]);

  *out = std::move(opts);
  ParseResult r;
  r.status = ParseStatus::kRun;
  return r;
}

}  // namespace chorusrun
