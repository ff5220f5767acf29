#include "tools/chorusrun/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "src/bootstrap/launcher.h"

namespace chorusrun {

const char* const kRankVars[kNumRankVars] = {"CHORUS_RANK", "CHORUS_WORLD_SIZE",
                                             "CHORUS_LOCAL_RANK", "CHORUS_LOCAL_SIZE",
                                             "CHORUS_NODE_RANK"};

namespace {

bool parseRankCount(const std::string& text, int* out) {
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

bool parseSeconds(const std::string& text, double* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v <= 0 || v > 1e8) return false;
  *out = v;
  return true;
}

bool validEnvName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

ParseResult usageError(std::string msg) {
  ParseResult r;
  r.status = ParseStatus::kUsageError;
  r.error = std::move(msg);
  return r;
}

}  // namespace

std::string usageText() {
  return "Usage: chorusrun -np N [options] [--] CMD [ARGS...]\n"
         "       chorusrun [-np N] {-H HOSTS | --hostfile FILE} [options] [--] CMD [ARGS...]\n"
         "\n"
         "Start N ranks of CMD (looked up in PATH) for one Chorus job: on this machine,\n"
         "or across hosts (local ones by fork, the others through the launch agent).\n"
         "\n"
         "Options:\n"
         "  -np N, -n N, --np N   number of ranks to start (1.." +
         std::to_string(kMaxRanks) +
         "; required\n"
         "                        without hosts, else defaults to the total number of slots)\n"
         "  -H, --host HOSTS      hosts as host[:slots],... (slots default 1; a repeated host\n"
         "                        adds up: -H a,a,b is a:2,b:1; IPv6 as [addr]:slots)\n"
         "  --hostfile FILE       hosts from FILE, one 'host [slots=N]' per line, '#' comments\n"
         "                        (not together with -H)\n"
         "  --bind-to core|none|auto\n"
         "                        on every host: core: each of the host's ranks on a core\n"
         "                        of its own (more ranks than cores: local rank i on core\n"
         "                        i mod cores); none: where the kernel likes; auto\n"
         "                        (default): core where a host runs 2 or more ranks and has\n"
         "                        at least as many cores, else none. A remote host binds\n"
         "                        its ranks with chorusrun at this chorusrun's path there\n"
         "  --oversubscribe       allow more ranks than slots: ranks beyond the last slot\n"
         "                        start again at the first slot (rank r takes slot r mod S)\n"
         "  --launch-agent CMD    how remote ranks are started (default: ssh); CMD is split\n"
         "                        on whitespace and run as: CMD... HOST 'shell command'\n"
         "  --rendezvous-addr A   the address remote hosts use to reach chorusrun (default:\n"
         "                        the local address routed towards the first remote host)\n"
         "  -x VAR                forward VAR from chorusrun's environment to every rank\n"
         "  -x VAR=VALUE          set VAR=VALUE in every rank's environment\n"
         "  --tag-output          prefix every line of rank output with \"[rank] \"\n"
         "                        (\"[rank,host] \" in multi-host jobs; stdout to stdout,\n"
         "                        stderr to stderr, whole lines only); without it ranks\n"
         "                        share chorusrun's stdout/stderr untouched\n"
         "  --timeout SECONDS     kill the job and exit 124 if it runs longer than SECONDS\n"
         "  --keep-going          a rank that fails does not stop the others (programs that\n"
         "                        shrink their communicator and go on); see Exit status\n"
         "  --wdir DIR            run the ranks in DIR (a relative CMD is taken from DIR;\n"
         "                        remote ranks run in DIR, default chorusrun's directory)\n"
         "  -h, --help            show this help and exit\n"
         "  --version             show the version and exit\n"
         "\n"
         "Hosts named localhost, 127.0.0.1, ::1 or this machine's hostname are local.\n"
         "Ranks fill host 1's slots, then host 2's, ...\n"
         "\n"
         "Each rank gets CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_LOCAL_RANK,\n"
         "CHORUS_LOCAL_SIZE, CHORUS_NODE_RANK, CHORUS_SECRET (128 random bits, hex) and\n"
         "CHORUS_INIT. Without hosts CHORUS_INIT=tcp://127.0.0.1:PORT (a free port; rank 0\n"
         "listens there); with hosts chorusrun serves the bootstrap root itself at\n"
         "CHORUS_INIT=tcp://ADDR:PORT and sets CHORUS_INIT_SERVED=1. CHORUS_INIT and\n"
         "CHORUS_SECRET may be overridden with -x. Remote ranks get the CHORUS_* variables\n"
         "of chorusrun's environment and every -x variable on their command line.\n"
         "\n"
         "Exit status: 0 if every rank succeeded; 128+SIG if a rank was killed by\n"
         "signal SIG; otherwise the failing exit status (remote ranks: the launch\n"
         "agent's). When a rank fails, the others (and the agents) get SIGTERM and,\n"
         "2 s later, SIGKILL. 124: --timeout expired; 130/143: chorusrun got\n"
         "SIGINT/SIGTERM; 127/126: CMD (or the launch agent) not found/not\n"
         "executable; 2: usage error.\n"
         "With --keep-going chorusrun waits for every rank, and exits 0 if at least one\n"
         "rank exited 0 and every other rank either exited 0 or was killed by a signal\n"
         "(a lost rank the survivors handled; a remote rank's agent status above 128\n"
         "counts as a signal); otherwise with the first failure's status as above.\n";
}

ParseResult parseOptions(int argc, char** argv, Options* out) {
  Options opts;
  std::vector<HostSpec> hostList;  // as given, before merging
  bool haveH = false, haveHostfile = false;
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
    std::string inlineValue;
    bool hasInline = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        name = arg.substr(0, eq);
        inlineValue = arg.substr(eq + 1);
        hasInline = true;
      }
    }
    auto takesValue = [&](std::string* value) -> bool {
      if (hasInline) {
        *value = inlineValue;
        return true;
      }
      if (i + 1 >= argc) return false;
      *value = argv[++i];
      return true;
    };
    auto noValue = [&]() { return !hasInline; };

    if (name == "-h" || name == "--help") {
      if (!noValue()) return usageError("option '" + name + "' takes no value");
      ParseResult r;
      r.status = ParseStatus::kHelp;
      return r;
    } else if (name == "--version") {
      if (!noValue()) return usageError("option '" + name + "' takes no value");
      ParseResult r;
      r.status = ParseStatus::kVersion;
      return r;
    } else if (name == "-np" || name == "-n" || name == "--np") {
      std::string v;
      if (!takesValue(&v)) return usageError("option '" + name + "' needs a rank count");
      if (!parseRankCount(v, &opts.np)) {
        return usageError("invalid rank count '" + v + "' for " + name +
                          " (expected an integer 1.." + std::to_string(kMaxRanks) + ")");
      }
    } else if (name == "-x") {
      std::string v;
      if (!takesValue(&v)) return usageError("option '-x' needs VAR or VAR=VALUE");
      size_t eq = v.find('=');
      std::string var = v.substr(0, eq);
      if (!validEnvName(var)) return usageError("invalid variable name '" + var + "' for -x");
      for (const char* reserved : kRankVars) {
        if (var == reserved) {
          return usageError("-x cannot set " + var + ": chorusrun sets it for each rank");
        }
      }
      if (eq != std::string::npos) {
        std::string value = v.substr(eq + 1);
        // The bootstrap reads CHORUS_SECRET as 128 bits in hex; catch a bad one here
        // rather than in every rank.
        if (var == "CHORUS_SECRET" && !chorus::launcherSecretValid(value)) {
          return usageError("-x CHORUS_SECRET must be 32 hexadecimal digits");
        }
        opts.exports.push_back({var, value});
      } else if (const char* cur = std::getenv(var.c_str())) {
        opts.exports.push_back({var, cur});
      } else {
        opts.warnings.push_back("-x " + var +
                                ": not set in chorusrun's environment; nothing to forward");
      }
    } else if (name == "--tag-output") {
      if (!noValue()) return usageError("option '" + name + "' takes no value");
      opts.tagOutput = true;
    } else if (name == "--timeout") {
      std::string v;
      if (!takesValue(&v)) return usageError("option '--timeout' needs a number of seconds");
      if (!parseSeconds(v, &opts.timeoutSeconds)) {
        return usageError("invalid --timeout '" + v + "' (expected a positive number of seconds)");
      }
    } else if (name == "--wdir") {
      std::string v;
      if (!takesValue(&v)) return usageError("option '--wdir' needs a directory");
      if (v.empty()) return usageError("option '--wdir' needs a non-empty directory");
      opts.wdir = v;
    } else if (name == "-H" || name == "--host") {
      std::string v, err;
      if (!takesValue(&v))
        return usageError("option '" + name + "' needs a host list (host[:slots],...)");
      if (haveHostfile) return usageError("use either -H or --hostfile, not both");
      if (!parseHostList(v, &hostList, &err)) return usageError(err);
      haveH = true;
    } else if (name == "--hostfile") {
      std::string v, err;
      if (!takesValue(&v)) return usageError("option '--hostfile' needs a file name");
      if (haveHostfile) return usageError("--hostfile given twice");
      if (haveH) return usageError("use either -H or --hostfile, not both");
      if (!parseHostfile(v, &hostList, &err)) return usageError(err);
      haveHostfile = true;
    } else if (name == "--bind-to") {
      std::string v;
      if (!takesValue(&v)) return usageError("option '--bind-to' needs core, none or auto");
      if (!parseBindMode(v, &opts.bindTo))
        return usageError("invalid --bind-to '" + v + "' (expected core, none or auto)");
    } else if (name == "--oversubscribe") {
      if (!noValue()) return usageError("option '" + name + "' takes no value");
      opts.oversubscribe = true;
    } else if (name == "--keep-going") {
      if (!noValue()) return usageError("option '" + name + "' takes no value");
      opts.keepGoing = true;
    } else if (name == "--launch-agent") {
      std::string v;
      if (!takesValue(&v)) return usageError("option '--launch-agent' needs a command");
      std::vector<std::string> words;
      size_t p = 0;
      while (p < v.size()) {
        size_t b = v.find_first_not_of(" \t\n", p);
        if (b == std::string::npos) break;
        size_t e = v.find_first_of(" \t\n", b);
        if (e == std::string::npos) e = v.size();
        words.push_back(v.substr(b, e - b));
        p = e;
      }
      if (words.empty()) return usageError("option '--launch-agent' needs a non-empty command");
      opts.launchAgent = words;
    } else if (name == "--rendezvous-addr") {
      std::string v;
      if (!takesValue(&v) || v.empty())
        return usageError("option '--rendezvous-addr' needs an address");
      opts.rendezvousAddr = v;
    } else {
      return usageError("unknown option '" + arg + "'");
    }
    ++i;
  }

  if (haveH && haveHostfile) return usageError("use either -H or --hostfile, not both");
  if (!hostList.empty()) {
    opts.hosts = mergeHosts(hostList);
    int total = totalSlots(opts.hosts);
    if (opts.np == 0) {
      if (total > kMaxRanks) {
        return usageError("the hosts offer " + std::to_string(total) + " slots, more than the " +
                          std::to_string(kMaxRanks) + " ranks chorusrun starts at most; give -np");
      }
      opts.np = total;
    }
    std::string err;
    if (!mapRanks(opts.hosts, opts.np, opts.oversubscribe, &opts.placements, &opts.localSizes,
                  &err)) {
      return usageError(err);
    }
  }

  if (opts.np == 0) return usageError("missing -np N (the number of ranks to start)");
  if (i >= argc) return usageError("missing the command to run");
  for (; i < argc; ++i) opts.command.emplace_back(argv[i]);
  if (opts.anyRemote()) {
    // A remote rank is started as `exec env VAR=VALUE... CMD ARGS` by sh.
    const std::string& cmd = opts.command[0];
    if (cmd.empty() || cmd[0] == '-' || cmd.find('=') != std::string::npos) {
      return usageError(
          "a command for remote hosts may not be empty, start with '-' or contain '=': '" + cmd +
          "'");
    }
  }

  *out = std::move(opts);
  ParseResult r;
  r.status = ParseStatus::kRun;
  return r;
}

}  // namespace chorusrun
