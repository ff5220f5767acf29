#include "tools/chorusrun/bound_exec.h"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace chorusrun {

namespace {

const char* modeName(BindMode mode) {
  switch (mode) {
    case BindMode::kCore: return "core";
    case BindMode::kNone: return "none";
    case BindMode::kAuto: break;
  }
  return "auto";
}

bool parseCount(const char* text, long lo, long hi, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

std::vector<std::string> boundExecWords(const std::string& self, BindMode mode, int localRank,
                                        int localSize) {
  return {
      self, kBoundExecFlag, modeName(mode), std::to_string(localRank), std::to_string(localSize),
      "--"};
}

int boundExecMain(int argc, char** argv) {
  BindMode mode = BindMode::kAuto;
  int localRank = 0, localSize = 0;
  if (argc < 5 || !parseBindMode(argv[0], &mode) || !parseCount(argv[2], 1, 1 << 20, &localSize) ||
      !parseCount(argv[1], 0, localSize - 1, &localRank) || std::strcmp(argv[3], "--") != 0) {
    std::fprintf(stderr,
                 "chorusrun: usage: chorusrun %s core|none|auto LOCAL_RANK LOCAL_SIZE -- "
                 "PROGRAM [ARGS...] (what chorusrun runs on remote hosts)\n",
                 kBoundExecFlag);
    return 2;
  }
  std::string note;
  std::vector<cpu_set_t> sets = planBinding(localSize, mode, &note);
  char host[256] = "this host";
  if (gethostname(host, sizeof host) != 0) std::strcpy(host, "this host");
  host[sizeof host - 1] = '\0';
  if (!note.empty() && localRank == 0)
    std::fprintf(stderr, "chorusrun: %s: --bind-to core: %s\n", host, note.c_str());
  // Binding is advice, as for local ranks: a rank that cannot be bound runs unbound.
  if (!sets.empty())
    (void)sched_setaffinity(0, sizeof(cpu_set_t), &sets[static_cast<size_t>(localRank)]);
  char** command = argv + 4;
  execvp(command[0], command);
  const int err = errno;
  std::fprintf(stderr, "chorusrun: %s: cannot execute '%s': %s\n", host, command[0],
               std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

std::string selfExecutable() {
  std::vector<char> buf(4096);
  for (;;) {
    ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size());
    if (n < 0) return "";
    if (static_cast<size_t>(n) < buf.size()) return std::string(buf.data(), static_cast<size_t>(n));
    if (buf.size() > (1u << 20)) return "";
    buf.resize(buf.size() * 2);
  }
}

}  // namespace chorusrun
