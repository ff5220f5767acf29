// size_arg.h — the sweep flags the CUDA sweep binaries share: -b/-e ("64K", "1M", "2G" or a
// plain count of bytes), -f, -n, -w (the host binaries parse theirs in perf/common.cc, with
// error reporting).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <string>

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

/// Sizes from minBytes to maxBytes, times factor each step; iters timed calls per size after
/// warmup untimed ones.
struct Sweep {
  size_t minBytes = 8, maxBytes = 64u << 20;
  int factor = 2, iters = 20, warmup = 5;
};

/// Takes one of -b, -e, -f, -n, -w with its value into `sweep`; false for any other flag.
inline bool takeSweepFlag(Sweep* sweep, const std::string& flag, const char* value) {
  if (flag == "-b")
    sweep->minBytes = parseBytes(value);
  else if (flag == "-e")
    sweep->maxBytes = parseBytes(value);
  else if (flag == "-f")
    sweep->factor = std::atoi(value);
  else if (flag == "-n")
    sweep->iters = std::atoi(value);
  else if (flag == "-w")
    sweep->warmup = std::atoi(value);
  else
    return false;
  return true;
}

}  // namespace perf
