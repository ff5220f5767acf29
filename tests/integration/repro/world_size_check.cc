// world_size_check.cc — does a float16 sum depend on the world size? (docs/REPRODUCIBLE.md,
// "Independent of the world size: float16 through float64"; issue 36, item 4)
//
//   chorusrun -np N world_size_check --method recipe|rank-order     (N = 2, 3 or 4)
//
// The same float16 data at every world size: per element, two values a and b (mixed
// magnitudes, both signs, subnormals too) are the contributions at np 2; at np 3 b is split
// into b_hi + b_lo (b_hi: b with its low 5 mantissa bits cleared; b_lo: those bits, exactly a
// float16), and at np 4 a is split too, the parts spread over the ranks:
//   np 2: a, b        np 3: b_hi, a, b_lo        np 4: a_hi, b_lo, b_hi, a_lo
// so the exact sum is a + b at every world size. The methods:
//   rank-order  chorusAllReduce of float16 (in CHORUS_REPRODUCIBLE=1, the rank-order sum,
//               rounded to float16 after every add: its bits change with the world size)
//   recipe      each rank widens its float16 values to float64 (exactly), all-reduces float64
//               with chorusSum, and rounds the sum to float16 once: float64 holds every sum of
//               up to 8192 float16 values exactly (each a multiple of 2^-24 below 2^16), so any
//               algorithm, order and world size gives the same exact sum; the check also
//               compares it bit for bit with the correctly rounded a + b it computes itself
//               (integer arithmetic, no float16 type), and fails on any difference.
// Rank 0 prints "digest <hex>" (FNV-1a of the results of every count): tests/integration/repro
// /world_size.sh runs np 2, 3 and 4 and wants the digests equal (recipe) or not all equal
// (rank-order: so the comparison can fail).
#include <chorus.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/integration/bit_digest.h"

namespace {

// A float16 as an integer number of 2^-24 (exact: every finite float16 is one, below 2^40).
int64_t halfUnits(uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int64_t m = (h & 0x3ff) | (e ? 0x400 : 0);
  const int64_t k = m << (e ? e - 1 : 0);
  return (h & 0x8000) ? -k : k;
}

// k * 2^-24 rounded to the nearest float16, ties to even (inf past the largest).
uint16_t unitsToHalf(int64_t k) {
  const uint16_t sign = k < 0 ? 0x8000 : 0;
  uint64_t a = static_cast<uint64_t>(k < 0 ? -k : k);
  if (a < 0x800) return static_cast<uint16_t>(sign | a);  // subnormal or exponent 1: exact
  int len = 64 - __builtin_clzll(a);
  int shift = len - 11;
  uint64_t q = a >> shift;
  const uint64_t rem = a & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
  if (shift > 0 && (rem > half || (rem == half && (q & 1)))) ++q;
  if (q == 0x800) q >>= 1, ++shift;
  const int e = shift + 1;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | (e << 10) | (q & 0x3ff));
}

// Mixed magnitudes: exponent fields 0 (subnormal) .. 26 (below 2^12), random mantissa and sign.
uint16_t value(uint64_t seed, size_t i, int which) {
  const uint64_t r = mix(seed ^ (i * 2 + static_cast<uint64_t>(which)) * 0x2545f4914f6cdd1dull);
  const uint16_t e = static_cast<uint16_t>(r % 27), m = static_cast<uint16_t>((r >> 8) & 0x3ff);
  return static_cast<uint16_t>(((r >> 20) & 1 ? 0x8000 : 0) | (e << 10) | m);
}

// The high part (low 5 stored mantissa bits cleared) and the rest, both exact float16s.
uint16_t hiPart(uint16_t h) { return static_cast<uint16_t>(h & ~0x1f); }
uint16_t loPart(uint16_t h) { return unitsToHalf(halfUnits(h) - halfUnits(hiPart(h))); }

// Rank r's contribution to element i at world size n (see the head of the file).
uint16_t contribution(uint64_t seed, size_t i, int n, int r) {
  const uint16_t a = value(seed, i, 0), b = value(seed, i, 1);
  switch (n) {
    case 2: return r == 0 ? a : b;
    case 3: return r == 0 ? hiPart(b) : r == 1 ? a : loPart(b);
    default: {
      const uint16_t parts[4] = {hiPart(a), loPart(b), hiPart(b), loPart(a)};
      return parts[r];
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string method;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--method")) method = argv[i + 1];
  if (method != "recipe" && method != "rank-order") {
    std::fprintf(stderr, "usage: world_size_check --method recipe|rank-order\n");
    return 2;
  }
  chorusComm_t comm;
  if (chorusCommInitFromEnv(&comm, nullptr) != chorusSuccess) {
    std::fprintf(stderr, "world_size_check: init: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  if (n < 2 || n > 4) {
    std::fprintf(stderr, "world_size_check: runs on 2, 3 or 4 ranks, not %d\n", n);
    chorusCommDestroy(comm);
    return 2;
  }
  const uint64_t seed = 36;
  uint64_t digest = kFnvStart;
  long wrong = 0;
  for (size_t count : {size_t{7}, size_t{4099}, size_t{70001}}) {
    std::vector<uint16_t> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = contribution(seed, i, n, rank);
    chorusResult_t r;
    if (method == "rank-order") {
      r = chorusAllReduce(in.data(), out.data(), count, chorusFloat16, chorusSum, comm, nullptr);
    } else {
      std::vector<double> wide(count), sum(count);
      for (size_t i = 0; i < count; ++i)  // exact: |units| < 2^40
        wide[i] = static_cast<double>(halfUnits(in[i])) * 0x1p-24;
      r = chorusAllReduce(wide.data(), sum.data(), count, chorusFloat64, chorusSum, comm, nullptr);
      for (size_t i = 0; i < count; ++i)  // the exact sum, a multiple of 2^-24 below 2^53
        out[i] = unitsToHalf(static_cast<int64_t>(sum[i] * 0x1p24));
    }
    if (r != chorusSuccess) {
      std::fprintf(stderr, "world_size_check: rank %d: all-reduce of %zu: %s: %s\n", rank, count,
                   chorusGetErrorString(r), chorusGetLastError(comm));
      chorusCommDestroy(comm);
      return 1;
    }
    if (method == "recipe")
      for (size_t i = 0; i < count; ++i) {
        const uint16_t want =
            unitsToHalf(halfUnits(value(seed, i, 0)) + halfUnits(value(seed, i, 1)));
        if (out[i] != want && wrong++ == 0)
          std::fprintf(stderr,
                       "world_size_check: rank %d np %d count %zu element %zu: 0x%04x, want the "
                       "correctly rounded sum 0x%04x\n",
                       rank, n, count, i, out[i], want);
      }
    digest = fnv(digest, out.data(), count * sizeof(uint16_t));
  }
  if (rank == 0) std::printf("digest %016" PRIx64 "\n", digest);
  chorusCommDestroy(comm);
  if (wrong) {
    std::fprintf(stderr, "world_size_check: rank %d: %ld elements differ from the exact sum\n",
                 rank, wrong);
    return 1;
  }
  return 0;
}
