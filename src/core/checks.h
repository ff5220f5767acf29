// checks.h — the two check macros and the one place an error is born.
//
// An error starts exactly once, at CHORUS_FAIL: that site logs one warning with context
// and records the detail that chorusGetLastError returns. Every caller on the way up uses
// CHORUS_CHECK / CHORUS_CHECK_GOTO, which add a "file:line -> code" trace line at INFO so
// CHORUS_DEBUG=INFO shows the path an error took without repeating the warning.
#pragma once

#include "chorus.h"

namespace chorus {

/// Logs a warning "what and where", stores it as this thread's last error, returns `res`.
chorusResult_t fail(chorusResult_t res, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

/// Logs the "file:line -> code" trace line of a failing check.
void traceFailure(chorusResult_t res, const char* file, int line, const char* expr);

/// This thread's last error detail ("" if none); cleared on every API entry.
const char* threadLastError();
void clearThreadLastError();

}  // namespace chorus

#define CHORUS_FAIL(res, ...) return ::chorus::fail((res), __FILE__, __LINE__, __VA_ARGS__)

#define CHORUS_CHECK(call)                                            \
  do {                                                                \
    chorusResult_t chorus_res_ = (call);                              \
    if (__builtin_expect(chorus_res_ != chorusSuccess, 0)) {          \
      ::chorus::traceFailure(chorus_res_, __FILE__, __LINE__, #call); \
      return chorus_res_;                                             \
    }                                                                 \
  } while (0)

#define CHORUS_CHECK_GOTO(call, res, label)                     \
  do {                                                          \
    (res) = (call);                                             \
    if (__builtin_expect((res) != chorusSuccess, 0)) {          \
      ::chorus::traceFailure((res), __FILE__, __LINE__, #call); \
      goto label;                                               \
    }                                                           \
  } while (0)
