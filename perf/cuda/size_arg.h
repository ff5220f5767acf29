// size_arg.h — "64K", "1M", "2G" or a plain count of bytes, as the CUDA sweep binaries take
// -b and -e (the host binaries parse theirs in perf/common.cc, with error reporting).
#pragma once

#include <cstddef>
#include <cstdlib>

namespace perf {

inline size_t parseBytes(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'K':
    case 'k': v *= 1024.0; break;
    case 'M':
    case 'm': v *= 1024.0 * 1024; break;
    case 'G':
    case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

}  // namespace perf
