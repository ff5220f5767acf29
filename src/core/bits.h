// bits.h — powers of two: the one floor(log2) every schedule, model and size bucket uses.
#pragma once

#include <cstdint>

namespace chorus {

/// floor(log2 x) for x >= 1; 0 for x == 0 (so a size bucket of 0 bytes is bucket 0).
constexpr int floorLog2(uint64_t x) { return x <= 1 ? 0 : 63 - __builtin_clzll(x); }

/// The largest power of two <= x (x >= 1).
constexpr uint64_t floorPow2(uint64_t x) { return uint64_t{1} << floorLog2(x); }

static_assert(floorLog2(1) == 0 && floorLog2(2) == 1 && floorLog2(3) == 1 && floorLog2(4) == 2,
              "floorLog2");
static_assert(floorPow2(5) == 4 && floorPow2(8) == 8 && floorPow2(1) == 1, "floorPow2");

}  // namespace chorus
