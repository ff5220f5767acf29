#include "src/core/checks.h"

#include <cstdarg>
#include <cstdio>
#include <string>

#include "src/core/debug.h"

namespace chorus {
namespace {
thread_local std::string tlsLastError;
}

chorusResult_t fail(chorusResult_t res, const char* file, int line, const char* fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* base = __builtin_strrchr(file, '/');
  base = base ? base + 1 : file;
  char full[1024];
  snprintf(full, sizeof(full), "%s (%s:%d)", msg, base, line);
  tlsLastError = full;
  if (logEnabled(LogLevel::Warn, kLogAll))
    logMessage(LogLevel::Warn, kLogAll, file, line, "%s: %s", chorusGetErrorString(res), msg);
  return res;
}

void traceFailure(chorusResult_t res, const char* file, int line, const char* expr) {
  CHORUS_LOG_(LogLevel::Info, kLogAll, "%s:%d -> %d (%s)", file, line, static_cast<int>(res), expr);
}

const char* threadLastError() { return tlsLastError.c_str(); }
void clearThreadLastError() { tlsLastError.clear(); }

}  // namespace chorus
