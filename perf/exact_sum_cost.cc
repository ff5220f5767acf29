// chorus_exact_sum_cost — what a sum independent of the world size would cost per element on
// one core, against the plain adds the reductions use today (issue 36, item 4; docs/PERF.md
// "A sum independent of the world size: measured, not built").
//
// Each candidate is split into the three local steps an all-reduce would run:
//   in    once per element per rank: the user's value to the wire format
//   op    once per element per incoming contribution: combine two wire values (the step the
//         all-reduce's owners repeat n-1 times; the plain add is this step alone)
//   out   once per element: the wire format back to the user's type
// and printed in ns per element (best of several repetitions; one core, no library) at a
// size that stays in L2 and one that streams from memory, with the bytes per element the
// wire format puts on the wire.
//
// Candidates (the formats are written here from their definitions; none is the library's):
//   f32 add, f16 add, bf16 add   the rank-order ops: one IEEE add (f16/bf16 through float,
//                                rounded back after each add), as kernels/reduce.h defines them
//   f16 exact (f64)     every float16 is a multiple of 2^-24 below 2^16, so float64 sums of up
//                       to 8192 of them are exact: any order gives the same bits; out rounds
//                       once (to float with round-to-odd, then to float16: no double rounding)
//   f16 exact (i64)     the same as int64 multiples of 2^-24 (up to 2^23 ranks; no inf/NaN)
//   f32 / bf16 2-pass   pass 1 all-reduces each element's largest exponent (uint8 max), pass 2
//                       sums the values as integers relative to it (f32: int64, 40 bits below
//                       the largest exponent; bf16: int32, 22 bits): the truncation depends
//                       only on the value and the largest exponent, so the result depends only
//                       on the multiset of contributions (up to 2^22 / 2^8 ranks)
//   f32 binned K=3      ReproBLAS-style binned accumulation: an exponent index and 3 int64
//                       bins, each the exact sum of the parts of the values that fall in a
//                       fixed 32-bit range of absolute bit positions; combining aligns the
//                       two indices and drops the bins below the higher one's 3 (a custom op:
//                       no native type does it)
//
// Usage: chorus_exact_sum_cost [small_count [large_count]]   (defaults 16384 and 8388608)
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define EXACT_AVX512 1
#endif

#include <algorithm>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define EXACT_CLONES __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define EXACT_CLONES
#endif

namespace {

using Half = _Float16;

uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
double pow2(int e) {  // 2^e for a normal double exponent
  uint64_t u = static_cast<uint64_t>(e + 1023) << 52;
  double d;
  memcpy(&d, &u, 8);
  return d;
}
// double to float rounded to odd: with 29 more bits than float16 or bfloat16 keep, the
// second rounding (float to the 16-bit type, to nearest even) then equals one rounding.
inline float toFloatOdd(double d) {
  float f = static_cast<float>(d);
  uint32_t u = floatBits(f);
  double back = f;
  uint32_t inexact = back != d;
  uint32_t away = fabs(back) > fabs(d);
  u = (u - (inexact & away)) | inexact;
  return bitsFloat(u);
}
inline uint16_t floatToBf16(float f) {  // round to nearest even (NaN kept quiet)
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
inline float bf16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

// ---- the rank-order ops -----------------------------------------------------------------
EXACT_CLONES void addF32(float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = a[i] + b[i];
}
void addF16Scalar(Half* a, const Half* b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    a[i] = static_cast<Half>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}
EXACT_CLONES void addBf16(uint16_t* a, const uint16_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = floatToBf16(bf16ToFloat(a[i]) + bf16ToFloat(b[i]));
}

// ---- float16 exact -------------------------------------------------------------------------
void f16ToF64Scalar(double* w, const Half* x, size_t n) {
  for (size_t i = 0; i < n; ++i) w[i] = static_cast<float>(x[i]);
}
EXACT_CLONES void addF64(double* a, const double* b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = a[i] + b[i];
}
void f64ToF16Scalar(Half* x, const double* w, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<Half>(toFloatOdd(w[i]));
}
void f16ToI64Scalar(int64_t* w, const Half* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    w[i] = static_cast<int64_t>(static_cast<float>(x[i]) * 16777216.0f);  // 2^24: exact
}
EXACT_CLONES void addI64(int64_t* a, const int64_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = a[i] + b[i];
}
void i64ToF16Scalar(Half* x, const int64_t* w, size_t n) {
  for (size_t i = 0; i < n; ++i)
    x[i] = static_cast<Half>(toFloatOdd(static_cast<double>(w[i]) * (1.0 / 16777216.0)));
}

// GCC 12 does not vectorise _Float16 conversions: the float16 loops by hand with AVX-512 and
// F16C where the CPU has them (as the library's kernels do), the loops above otherwise.
#if EXACT_AVX512
#define EXACT_AVX512_FN __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,f16c,avx2")))
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
const bool kHaveAvx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
EXACT_AVX512_FN void addF16Avx512(Half* a, const Half* b, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)));
    __m512 y = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + i),
                        _mm512_cvtps_ph(_mm512_add_ps(x, y), kRne));
  }
  addF16Scalar(a + i, b + i, n - i);
}
EXACT_AVX512_FN void f16ToF64Avx512(double* w, const Half* x, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm512_storeu_pd(
        w + i,
        _mm512_cvtps_pd(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)))));
  f16ToF64Scalar(w + i, x + i, n - i);
}
// Eight doubles to float16: to float rounded to odd, then to nearest even (toFloatOdd).
EXACT_AVX512_FN __m128i narrowOdd(__m512d d) {
  __m256 f = _mm512_cvtpd_ps(d);
  __m512d back = _mm512_cvtps_pd(f);
  __mmask8 inexact = _mm512_cmp_pd_mask(back, d, _CMP_NEQ_UQ);
  __mmask8 away = _mm512_cmp_pd_mask(_mm512_abs_pd(back), _mm512_abs_pd(d), _CMP_GT_OQ);
  __m256i u = _mm256_castps_si256(f), one = _mm256_set1_epi32(1);
  u = _mm256_mask_sub_epi32(u, inexact & away, u, one);
  u = _mm256_mask_or_epi32(u, inexact, u, one);
  return _mm256_cvtps_ph(_mm256_castsi256_ps(u), kRne);
}
EXACT_AVX512_FN void f64ToF16Avx512(Half* x, const double* w, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(x + i), narrowOdd(_mm512_loadu_pd(w + i)));
  f64ToF16Scalar(x + i, w + i, n - i);
}
EXACT_AVX512_FN void f16ToI64Avx512(int64_t* w, const Half* x, size_t n) {
  size_t i = 0;
  const __m256 scale = _mm256_set1_ps(16777216.0f);
  for (; i + 8 <= n; i += 8) {
    __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm512_storeu_si512(w + i, _mm512_cvttps_epi64(_mm256_mul_ps(f, scale)));
  }
  f16ToI64Scalar(w + i, x + i, n - i);
}
EXACT_AVX512_FN void i64ToF16Avx512(Half* x, const int64_t* w, size_t n) {
  size_t i = 0;
  const __m512d scale = _mm512_set1_pd(1.0 / 16777216.0);
  for (; i + 8 <= n; i += 8) {
    __m512d d = _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_loadu_si512(w + i)), scale);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(x + i), narrowOdd(d));
  }
  i64ToF16Scalar(x + i, w + i, n - i);
}
#define EXACT_PICK(name, ...) (kHaveAvx512 ? name##Avx512(__VA_ARGS__) : name##Scalar(__VA_ARGS__))
#else
#define EXACT_PICK(name, ...) name##Scalar(__VA_ARGS__)
#endif
void addF16(Half* a, const Half* b, size_t n) { EXACT_PICK(addF16, a, b, n); }
void f16ToF64(double* w, const Half* x, size_t n) { EXACT_PICK(f16ToF64, w, x, n); }
void f64ToF16(Half* x, const double* w, size_t n) { EXACT_PICK(f64ToF16, x, w, n); }
void f16ToI64(int64_t* w, const Half* x, size_t n) { EXACT_PICK(f16ToI64, w, x, n); }
void i64ToF16(Half* x, const int64_t* w, size_t n) { EXACT_PICK(i64ToF16, x, w, n); }

// ---- two passes: the largest exponent, then integers relative to it ---------------------------
EXACT_CLONES void f32Exponent(uint8_t* e, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) e[i] = static_cast<uint8_t>(floatBits(x[i]) >> 23);
}
EXACT_CLONES void bf16Exponent(uint8_t* e, const uint16_t* x, size_t n) {
  for (size_t i = 0; i < n; ++i) e[i] = static_cast<uint8_t>(x[i] >> 7);
}
EXACT_CLONES void maxU8(uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = std::max(a[i], b[i]);
}
// The exponent byte is the biased exponent (the uint8 cast drops the sign above it); 0
// (zeros and subnormals) counts as 1, their scale.
constexpr int kF32Frac = 40;   // bits kept below the largest exponent (int64: 2^22 ranks)
constexpr int kBf16Frac = 22;  // (int32: 2^8 ranks)
EXACT_CLONES void f32ToFixed(int64_t* w, const float* x, const uint8_t* e, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    int emax = e[i] ? e[i] : 1;
    w[i] = static_cast<int64_t>(static_cast<double>(x[i]) * pow2(kF32Frac + 127 - emax));
  }
}
EXACT_CLONES void fixedToF32(float* x, const int64_t* w, const uint8_t* e, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    int emax = e[i] ? e[i] : 1;
    x[i] = static_cast<float>(static_cast<double>(w[i]) * pow2(emax - 127 - kF32Frac));
  }
}
EXACT_CLONES void bf16ToFixed(int32_t* w, const uint16_t* x, const uint8_t* e, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    int emax = e[i] ? e[i] : 1;
    w[i] =
        static_cast<int32_t>(static_cast<double>(bf16ToFloat(x[i])) * pow2(kBf16Frac + 127 - emax));
  }
}
EXACT_CLONES void addI32(int32_t* a, const int32_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<int32_t>(static_cast<uint32_t>(a[i]) + b[i]);
}
EXACT_CLONES void fixedToBf16(uint16_t* x, const int32_t* w, const uint8_t* e, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    int emax = e[i] ? e[i] : 1;
    x[i] = floatToBf16(toFloatOdd(static_cast<double>(w[i]) * pow2(emax - 127 - kBf16Frac)));
  }
}

// ---- binned, K = 3 int64 bins of 32 bit positions each (structure of arrays) --------------
constexpr int kBinBits = 32;
struct Binned {
  std::vector<int32_t> idx;
  std::vector<int64_t> b0, b1, b2;
  explicit Binned(size_t n) : idx(n), b0(n), b1(n), b2(n) {}
};
// Position of a float's lowest mantissa bit in units of 2^-149 (subnormals: 0), and its
// 24-bit integer mantissa; the value is m * 2^(sh - 149).
EXACT_CLONES void binDeposit(int32_t* idx, int64_t* b0, int64_t* b1, int64_t* b2, const float* x,
                             size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t u = floatBits(x[i]);
    uint32_t ex = (u >> 23) & 0xff;
    int64_t m = (u & 0x7fffff) | (ex ? 0x800000 : 0);
    int32_t sh = ex ? static_cast<int32_t>(ex) - 1 : 0;
    int32_t top = (sh + 23) >> 5;  // the bin of the top bit (kBinBits = 32)
    // bin top holds bits [32 top, 32 top + 32): shift the mantissa so that bin top's lowest
    // bit lands on bit 32 (sh - 32 top is -23 .. 8, the shift 9 .. 40, so it fits)
    uint64_t v = static_cast<uint64_t>(m) << (sh - top * kBinBits + kBinBits);
    int64_t hi = static_cast<int64_t>(v >> 32), lo = static_cast<int64_t>(v & 0xffffffffu);
    int64_t sign = (u >> 31) ? -1 : 1;
    idx[i] = top;
    b0[i] = sign * hi;
    b1[i] = sign * lo;
    b2[i] = 0;
  }
}
// __restrict: eight arrays are more than GCC checks for overlap at run time, so without it
// the loop stays scalar.
EXACT_CLONES void binMerge(int32_t* __restrict ai, int64_t* __restrict a0, int64_t* __restrict a1,
                           int64_t* __restrict a2, const int32_t* __restrict bi,
                           const int64_t* __restrict c0, const int64_t* __restrict c1,
                           const int64_t* __restrict c2, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    int32_t ia = ai[i], ib = bi[i];
    int64_t x0 = a0[i], x1 = a1[i], x2 = a2[i], y0 = c0[i], y1 = c1[i], y2 = c2[i];
    int32_t top = std::max(ia, ib);
    int32_t da = top - ia, db = top - ib;
    // all-ones where the shift is 0, 1 or 2 bins (branch-free, so it vectorises)
    int64_t a0m = -static_cast<int64_t>(da == 0), a1m = -static_cast<int64_t>(da == 1),
            a2m = -static_cast<int64_t>(da == 2), b0m = -static_cast<int64_t>(db == 0),
            b1m = -static_cast<int64_t>(db == 1), b2m = -static_cast<int64_t>(db == 2);
    int64_t r0 = (x0 & a0m) + (y0 & b0m);
    int64_t r1 = ((x1 & a0m) | (x0 & a1m)) + ((y1 & b0m) | (y0 & b1m));
    int64_t r2 = ((x2 & a0m) | (x1 & a1m) | (x0 & a2m)) + ((y2 & b0m) | (y1 & b1m) | (y0 & b2m));
    ai[i] = top;
    a0[i] = r0;
    a1[i] = r1;
    a2[i] = r2;
  }
}
EXACT_CLONES void binOut(float* x, const int32_t* idx, const int64_t* b0, const int64_t* b1,
                         const int64_t* b2, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    int base = idx[i] * kBinBits - 149;  // bin 0's lowest bit, as a power of two
    double v = static_cast<double>(b0[i]) * pow2(base) +
               static_cast<double>(b1[i]) * pow2(base - kBinBits) +
               static_cast<double>(b2[i]) * pow2(base - 2 * kBinBits);
    x[i] = static_cast<float>(v);
  }
}

// ---- timing ---------------------------------------------------------------------------------
double nowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
template <typename F>
double nsPerElement(size_t n, F f) {
  size_t reps = std::max<size_t>(1, (size_t{1} << 26) / n);  // about 64M elements a sample
  double best = 1e300;
  f();  // warm: touch the pages
  for (int s = 0; s < 7; ++s) {
    double t0 = nowNs();
    for (size_t r = 0; r < reps; ++r) f();
    best = std::min(best, (nowNs() - t0) / static_cast<double>(reps * n));
  }
  return best;
}

// Mixed magnitudes, both signs (about 2^-20 .. 2^12), as issue 36's checks use.
float mixed(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  int e = static_cast<int>((s >> 33) % 32) - 20;
  float m = 1.0f + static_cast<float>((s >> 40) & 0xffff) / 65536.0f;
  return ((s >> 60) & 1 ? -m : m) * static_cast<float>(pow2(e));
}

// The self-checks: the candidates must give the same bits in another order, or the timings
// are of a broken loop. Returns false (and says so) on a mismatch.
bool selfCheck() {
  const size_t n = 4096, ranks = 7;
  uint64_t s = 12345;
  std::vector<std::vector<float>> f32(ranks, std::vector<float>(n));
  std::vector<std::vector<Half>> f16(ranks, std::vector<Half>(n));
  for (auto& v : f32)
    for (auto& x : v) x = mixed(s);
  for (size_t r = 0; r < ranks; ++r)
    for (size_t i = 0; i < n; ++i) f16[r][i] = static_cast<Half>(f32[r][i] * 0.001f);
  // f16 exact, forward and backward: the same bits, and the same through int64.
  std::vector<double> fw(n, 0), bw(n, 0), t(n);
  std::vector<int64_t> iw(n, 0), it(n);
  for (size_t r = 0; r < ranks; ++r) {
    f16ToF64(t.data(), f16[r].data(), n);
    addF64(fw.data(), t.data(), n);
    f16ToF64(t.data(), f16[ranks - 1 - r].data(), n);
    addF64(bw.data(), t.data(), n);
    f16ToI64(it.data(), f16[r].data(), n);
    addI64(iw.data(), it.data(), n);
  }
  std::vector<Half> h1(n), h2(n), h3(n);
  f64ToF16(h1.data(), fw.data(), n);
  f64ToF16(h2.data(), bw.data(), n);
  i64ToF16(h3.data(), iw.data(), n);
  if (memcmp(h1.data(), h2.data(), n * 2) || memcmp(h1.data(), h3.data(), n * 2)) {
    fprintf(stderr, "self-check: float16 exact sums differ by order or format\n");
    return false;
  }
  // binned: forward, backward and pairwise (a tree) give the same bits.
  // tree: pairwise, as a tree all-reduce would; otherwise a chain in the given order.
  auto binSum = [&](const std::vector<size_t>& order, bool tree) {
    std::vector<Binned> st;
    for (size_t r : order) {
      st.emplace_back(n);
      binDeposit(st.back().idx.data(), st.back().b0.data(), st.back().b1.data(),
                 st.back().b2.data(), f32[r].data(), n);
    }
    auto merge = [&](Binned& a, const Binned& b) {
      binMerge(a.idx.data(), a.b0.data(), a.b1.data(), a.b2.data(), b.idx.data(), b.b0.data(),
               b.b1.data(), b.b2.data(), n);
    };
    if (tree) {
      for (size_t step = 1; step < st.size(); step *= 2)
        for (size_t a = 0; a + step < st.size(); a += 2 * step) merge(st[a], st[a + step]);
    } else {
      for (size_t b = 1; b < st.size(); ++b) merge(st[0], st[b]);
    }
    std::vector<float> out(n);
    binOut(out.data(), st[0].idx.data(), st[0].b0.data(), st[0].b1.data(), st[0].b2.data(), n);
    return out;
  };
  std::vector<size_t> fwd(ranks), rev(ranks);
  for (size_t r = 0; r < ranks; ++r) fwd[r] = r, rev[r] = ranks - 1 - r;
  std::vector<float> o1 = binSum(fwd, false), o2 = binSum(rev, false), o3 = binSum(fwd, true);
  if (memcmp(o1.data(), o2.data(), n * 4) || memcmp(o1.data(), o3.data(), n * 4)) {
    fprintf(stderr, "self-check: binned sums differ by order\n");
    return false;
  }
  // The plain float32 chain does differ by order on these data (so the check can fail).
  std::vector<float> p1(n, 0), p2(n, 0);
  for (size_t r = 0; r < ranks; ++r) {
    addF32(p1.data(), f32[r].data(), n);
    addF32(p2.data(), f32[ranks - 1 - r].data(), n);
  }
  if (!memcmp(p1.data(), p2.data(), n * 4)) {
    fprintf(stderr, "self-check: the plain sums agree in both orders: the data show nothing\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  size_t sizes[2] = {16384, size_t{1} << 23};
  for (int a = 1; a < argc && a < 3; ++a) sizes[a - 1] = strtoull(argv[a], nullptr, 0);
  if (!selfCheck()) return 1;
  printf("# ns per element, one core, best of 7 (wire: bytes per element on the wire)\n");
  printf("%-22s %-4s %6s %12s %12s\n", "candidate", "step", "wire", "small", "large");
  struct Row {
    const char* name;
    const char* step;
    int wire;
    double t[2];
  };
  std::vector<Row> rows;
  auto add = [&](const char* name, const char* step, int wire, int k, double t) {
    for (auto& r : rows)
      if (!strcmp(r.name, name) && !strcmp(r.step, step)) {
        r.t[k] = t;
        return;
      }
    rows.push_back({name, step, wire, {0, 0}});
    rows.back().t[k] = t;
  };
  for (int k = 0; k < 2; ++k) {
    const size_t n = sizes[k];
    uint64_t s = 777;
    std::vector<float> xf(n), yf(n), of(n);
    for (auto& x : xf) x = mixed(s);
    for (auto& x : yf) x = mixed(s);
    std::vector<Half> xh(n), yh(n);
    std::vector<uint16_t> xb(n), yb(n);
    for (size_t i = 0; i < n; ++i) {
      xh[i] = static_cast<Half>(xf[i] * 0.01f);  // about 2^-27 .. 2^5: float16 subnormals too
      yh[i] = static_cast<Half>(yf[i] * 0.01f);
      xb[i] = floatToBf16(xf[i]);
      yb[i] = floatToBf16(yf[i]);
    }
    std::vector<double> wd(n), vd(n);
    std::vector<int64_t> wi(n), vi(n);
    std::vector<int32_t> w32(n), v32(n);
    std::vector<uint8_t> e1(n), e2(n);
    add("f32 add (rank order)", "op", 4, k,
        nsPerElement(n, [&] { addF32(xf.data(), yf.data(), n); }));
    add("f16 add (rank order)", "op", 2, k,
        nsPerElement(n, [&] { addF16(xh.data(), yh.data(), n); }));
    add("bf16 add (rank order)", "op", 2, k,
        nsPerElement(n, [&] { addBf16(xb.data(), yb.data(), n); }));
    add("f16 exact (f64)", "in", 8, k, nsPerElement(n, [&] { f16ToF64(wd.data(), xh.data(), n); }));
    f16ToF64(vd.data(), yh.data(), n);
    add("f16 exact (f64)", "op", 8, k, nsPerElement(n, [&] { addF64(wd.data(), vd.data(), n); }));
    add("f16 exact (f64)", "out", 8, k,
        nsPerElement(n, [&] { f64ToF16(xh.data(), wd.data(), n); }));
    add("f16 exact (i64)", "in", 8, k, nsPerElement(n, [&] { f16ToI64(wi.data(), xh.data(), n); }));
    f16ToI64(vi.data(), yh.data(), n);
    add("f16 exact (i64)", "op", 8, k, nsPerElement(n, [&] { addI64(wi.data(), vi.data(), n); }));
    add("f16 exact (i64)", "out", 8, k,
        nsPerElement(n, [&] { i64ToF16(xh.data(), wi.data(), n); }));
    add("f32 2-pass: exponent", "in", 1, k,
        nsPerElement(n, [&] { f32Exponent(e1.data(), xf.data(), n); }));
    f32Exponent(e2.data(), yf.data(), n);
    add("f32 2-pass: exponent", "op", 1, k,
        nsPerElement(n, [&] { maxU8(e1.data(), e2.data(), n); }));
    add("f32 2-pass: int64", "in", 8, k,
        nsPerElement(n, [&] { f32ToFixed(wi.data(), xf.data(), e1.data(), n); }));
    add("f32 2-pass: int64", "op", 8, k, nsPerElement(n, [&] { addI64(wi.data(), vi.data(), n); }));
    add("f32 2-pass: int64", "out", 8, k,
        nsPerElement(n, [&] { fixedToF32(of.data(), wi.data(), e1.data(), n); }));
    add("bf16 2-pass: exponent", "in", 1, k,
        nsPerElement(n, [&] { bf16Exponent(e1.data(), xb.data(), n); }));
    add("bf16 2-pass: exponent", "op", 1, k,
        nsPerElement(n, [&] { maxU8(e1.data(), e2.data(), n); }));
    add("bf16 2-pass: int32", "in", 4, k,
        nsPerElement(n, [&] { bf16ToFixed(w32.data(), xb.data(), e1.data(), n); }));
    add("bf16 2-pass: int32", "op", 4, k,
        nsPerElement(n, [&] { addI32(w32.data(), v32.data(), n); }));
    add("bf16 2-pass: int32", "out", 4, k,
        nsPerElement(n, [&] { fixedToBf16(xb.data(), w32.data(), e1.data(), n); }));
    Binned a(n), b(n);
    add("f32 binned K=3", "in", 28, k, nsPerElement(n, [&] {
          binDeposit(a.idx.data(), a.b0.data(), a.b1.data(), a.b2.data(), xf.data(), n);
        }));
    binDeposit(b.idx.data(), b.b0.data(), b.b1.data(), b.b2.data(), yf.data(), n);
    add("f32 binned K=3", "op", 28, k, nsPerElement(n, [&] {
          binMerge(a.idx.data(), a.b0.data(), a.b1.data(), a.b2.data(), b.idx.data(), b.b0.data(),
                   b.b1.data(), b.b2.data(), n);
        }));
    add("f32 binned K=3", "out", 28, k, nsPerElement(n, [&] {
          binOut(of.data(), a.idx.data(), a.b0.data(), a.b1.data(), a.b2.data(), n);
        }));
  }
  for (auto& r : rows)
    printf("%-22s %-4s %6d %12.3f %12.3f\n", r.name, r.step, r.wire, r.t[0], r.t[1]);
  printf("# small = %zu elements, large = %zu elements\n", sizes[0], sizes[1]);
  return 0;
}
