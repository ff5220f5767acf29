// bit_digest.h — deterministic test data and result digests for the programs that compare
// bits between runs, modes and world sizes (repro_check, world_size_check, same_bits):
// splitmix64 (a value per seed and index, no state) and FNV-1a over a result's bytes.
#pragma once

#include <cstddef>
#include <cstdint>

// splitmix64's output function: a well-mixed 64-bit value for any 64-bit input.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a's starting value, and `h` continued over `bytes` bytes at `p`.
constexpr uint64_t kFnvStart = 0xcbf29ce484222325ull;
inline uint64_t fnv(uint64_t h, const void* p, size_t bytes) {
  const auto* c = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ c[i]) * 0x100000001b3ull;
  return h;
}
