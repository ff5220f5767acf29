#include "src/core/debug.h"

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "src/core/params.h"

namespace chorus {
namespace {

thread_local int tlsRank = -1;

struct Sink {
  FILE* file = stderr;
  char host[64] = {0};
};

uint32_t parseMask(const std::string& spec) {
  if (spec.empty()) return kLogAll;
  bool exclude = spec[0] == '^';
  std::string list = exclude ? spec.substr(1) : spec;
  static const struct {
    const char* name;
    uint32_t bit;
  } kNames[] = {{"INIT", kLogInit},     {"COLL", kLogColl},   {"P2P", kLogP2p},
                {"SHM", kLogShm},       {"NET", kLogNet},     {"BOOTSTRAP", kLogBootstrap},
                {"TUNING", kLogTuning}, {"GRAPH", kLogGraph}, {"ENV", kLogEnv},
                {"ALLOC", kLogAlloc},   {"ALL", kLogAll}};
  uint32_t mask = 0;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string tok = list.substr(pos, comma - pos);
    for (auto& c : tok) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
    for (const auto& n : kNames)
      if (tok == n.name) mask |= n.bit;
    pos = comma + 1;
  }
  return exclude ? ~mask : mask;
}

int parseLevel(const std::string& s) {
  std::string u;
  for (char c : s) u += static_cast<char>(toupper(static_cast<unsigned char>(c)));
  if (u == "NONE" || u == "0") return 0;
  if (u == "INFO") return 2;
  if (u == "TRACE") return 3;
  return 1;  // WARN and anything unknown
}

const Sink& sink() {
  static const Sink* s = [] {
    auto* k = new Sink();
    gethostname(k->host, sizeof(k->host) - 1);
    char* dot = std::strchr(k->host, '.');
    if (dot) *dot = '\0';
    const std::string& path = paramString(Param::DebugFile);
    if (!path.empty()) {
      std::string name;
      for (size_t i = 0; i < path.size(); ++i) {
        if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'h') {
          name += k->host;
          ++i;
        } else if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'p') {
          name += std::to_string(getpid());
          ++i;
        } else {
          name += path[i];
        }
      }
      FILE* f = std::fopen(name.c_str(), "a");
      if (f) {
        setvbuf(f, nullptr, _IOLBF, 0);
        k->file = f;
      }
    }
    return k;
  }();
  return *s;
}

}  // namespace

const LogConfig& logConfig() {
  static const LogConfig cfg{parseLevel(paramString(Param::Debug)),
                             parseMask(paramString(Param::DebugSubsys))};
  return cfg;
}

void setLogRank(int rank) { tlsRank = rank; }

void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...) {
  (void)subsys;
  const Sink& s = sink();
  const char* lvl = level == LogLevel::Warn ? "WARN" : level == LogLevel::Info ? "INFO" : "TRACE";
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  // One fprintf per line so lines from several threads do not interleave.
  std::fprintf(s.file, "%s:%d:%d [%d] chorus %s %s:%d %s\n", s.host, getpid(),
               static_cast<int>(gettid()), tlsRank, lvl, base, line, msg);
}

}  // namespace chorus
