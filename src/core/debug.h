// debug.h — the one logger.
//
// CHORUS_DEBUG=WARN|INFO|TRACE picks the level, CHORUS_DEBUG_SUBSYS=INIT,NET,... (or ^X to
// exclude) the subsystems, CHORUS_DEBUG_FILE=/path/%h.%p the sink (%h host, %p pid). Each
// line carries host, pid, rank and file:line. The level and mask are checked before any
// formatting, so disabled logging costs one load and a branch.
#pragma once

#include <cstdint>

namespace chorus {

enum class LogLevel : int { None = 0, Warn = 1, Info = 2, Trace = 3 };

enum LogSubsys : uint32_t {
  kLogInit = 1u << 0,
  kLogColl = 1u << 1,
  kLogP2p = 1u << 2,
  kLogShm = 1u << 3,
  kLogNet = 1u << 4,
  kLogBootstrap = 1u << 5,
  kLogTuning = 1u << 6,
  kLogGraph = 1u << 7,
  kLogEnv = 1u << 8,
  kLogAlloc = 1u << 9,
  kLogAll = ~0u,
};

struct LogConfig {
  int level;
  uint32_t mask;
};
/// Read once from the environment (through the parameter registry).
const LogConfig& logConfig();

inline bool logEnabled(LogLevel level, uint32_t subsys) {
  const LogConfig& c = logConfig();
  return static_cast<int>(level) <= c.level && (c.mask & subsys) != 0;
}

void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

/// The rank printed on log lines from this thread (-1: none yet).
void setLogRank(int rank);

}  // namespace chorus

#define CHORUS_LOG_(lvl, subsys, ...)                                         \
  do {                                                                        \
    if (::chorus::logEnabled((lvl), (subsys)))                                \
      ::chorus::logMessage((lvl), (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define CHORUS_WARN(subsys, ...) CHORUS_LOG_(::chorus::LogLevel::Warn, subsys, __VA_ARGS__)
#define CHORUS_INFO(subsys, ...) CHORUS_LOG_(::chorus::LogLevel::Info, subsys, __VA_ARGS__)
#define CHORUS_TRACE(subsys, ...) CHORUS_LOG_(::chorus::LogLevel::Trace, subsys, __VA_ARGS__)
