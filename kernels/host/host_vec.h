// host_vec.h — SIMD building blocks for ONE host ISA variant (included only by
// host_reduce.cc, which is compiled once per instruction set).
//
// Written with GCC/Clang vector extensions, so one source becomes SSE4, AVX2 or AVX-512
// code depending on the -m flags of the variant; intrinsics appear only where the vector
// extensions have no spelling (F16C conversions, masked tails, non-temporal stores).
// Every operation here must give the same bits as its scalar twin in reduce.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if !defined(CHORUS_ISA_NS)
#error "host_vec.h belongs to an ISA variant: compile with -DCHORUS_ISA_NS=<namespace>"
#endif

// Register width of this variant, and whether AVX-512 masked loads/stores are available
// (they make tails of 1..N-1 elements a single masked step instead of a scalar loop).
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define CHORUS_VEC_BYTES 64
#define CHORUS_VEC_MASKED 1
#elif defined(__AVX2__)
#define CHORUS_VEC_BYTES 32
#define CHORUS_VEC_MASKED 0
#else
#define CHORUS_VEC_BYTES 16
#define CHORUS_VEC_MASKED 0
#endif

// F16C gives exact, correctly rounded half<->float in one instruction; without it we use
// the integer/float tricks of reduce.h lane-wise.
#if defined(__F16C__) && CHORUS_VEC_BYTES >= 32
#define CHORUS_VEC_F16C 1
#else
#define CHORUS_VEC_F16C 0
#endif

namespace chorus {
namespace kernels {
inline namespace CHORUS_ISA_NS {
namespace vec {

constexpr size_t kVB = CHORUS_VEC_BYTES;

template <class T, size_t B>
struct VecOfT {
  typedef T type __attribute__((vector_size(B)));
};
/// One register of T.
template <class T>
using Vec = typename VecOfT<T, kVB>::type;
using VF = Vec<float>;
using VU = Vec<uint32_t>;
using VI = Vec<int32_t>;
constexpr size_t kNF = kVB / sizeof(float);
/// kNF 16-bit floats: the storage that widens into one VF.
using VH = typename VecOfT<uint16_t, kVB / 2>::type;

template <class V>
inline V loadu(const unsigned char* p) {
  V v;
  std::memcpy(&v, p, sizeof v);  // becomes one unaligned vector load
  return v;
}
template <class V>
inline void storeu(unsigned char* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

/// Non-temporal store of B bytes; p must be B-aligned (callers align the head first).
template <size_t B>
inline void streamStore(unsigned char* p, const void* v) {
#if defined(__x86_64__)
  if constexpr (B == 64) {
#if defined(__AVX512F__)
    __m512i r;
    std::memcpy(&r, v, 64);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), r);  // GCC 12 wants __m512i*
#else
    static_assert(B != 64, "64-byte streaming needs AVX-512");
#endif
  } else if constexpr (B == 32) {
#if defined(__AVX__)
    __m256i r;
    std::memcpy(&r, v, 32);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), r);
#else
    static_assert(B != 32, "32-byte streaming needs AVX");
#endif
  } else if constexpr (B == 16) {
    __m128i r;
    std::memcpy(&r, v, 16);
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), r);
  } else {
    static_assert(B == 8, "unsupported streaming width");
    long long r;
    std::memcpy(&r, v, 8);
    _mm_stream_si64(reinterpret_cast<long long*>(p), r);
  }
#else
  std::memcpy(p, v, B);  // no portable non-temporal store: a plain one is correct
#endif
}

/// Orders the non-temporal stores before whatever flag the caller writes next.
inline void streamFence() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_sfence();
#endif
}

#if CHORUS_VEC_MASKED
/// Byte mask of the first `bytes` (< 64) bytes.
inline __mmask64 byteMask(size_t bytes) { return (uint64_t{1} << bytes) - 1; }
#endif

// ---------------------------------------------------------------------------------------
// Arithmetic on registers of a compute type, with the semantics of reduce.h.
template <class C>
struct VMath {
  using V = Vec<C>;
  static constexpr bool kInt = std::is_integral<C>::value;
  // Integer sum/prod go through the unsigned type: wrap-around, no UB.
  using UV =
      Vec<typename std::conditional<kInt, std::make_unsigned<C>, std::common_type<C>>::type::type>;

  static V add(V a, V b) {
    if constexpr (kInt)
      return (V)((UV)a + (UV)b);
    else
      return a + b;
  }
  static V mul(V a, V b) {
    if constexpr (kInt)
      return (V)((UV)a * (UV)b);
    else
      return a * b;
  }
  static V max(V a, V b) {
    if constexpr (kInt) {
      return a > b ? a : b;
    } else {
      using M = decltype(a != a);  // lane mask: integers of the same width
      V r = a > b ? a : b;
      r = (a == b) ? (V)((M)a & (M)b) : r;  // only +-0 differ: AND prefers +0
      r = (b != b) ? b : r;
      return (a != a) ? a : r;  // a NaN in `a` wins, as in maxC
    }
  }
  static V min(V a, V b) {
    if constexpr (kInt) {
      return a < b ? a : b;
    } else {
      using M = decltype(a != a);
      V r = a < b ? a : b;
      r = (a == b) ? (V)((M)a | (M)b) : r;  // OR prefers -0
      r = (b != b) ? b : r;
      return (a != a) ? a : r;
    }
  }
  static V div(V a, int n) {
    if constexpr (kInt) {
      // No SIMD integer division; avg of integers is rare, so lane by lane.
      for (size_t k = 0; k < sizeof(V) / sizeof(C); ++k) a[k] = divC<C>(a[k], n);
      return a;
    } else {
      return a / static_cast<C>(n);
    }
  }
  static V splat(C c) {
    // Not `V{} + c`: +0 + -0 is +0, and arithmetic would quiet a signalling NaN.
    V v;
    for (size_t k = 0; k < sizeof(V) / sizeof(C); ++k) v[k] = c;
    return v;
  }
};

// ---------------------------------------------------------------------------------------
// Lanes: how a storage type is loaded into / stored from compute registers.
//   T      storage type (int32_t, float, f16, ...)     C  compute type
//   kN     elements per register step                  kSize  bytes per element
//   kStoreBytes  bytes one store writes (the alignment streaming needs)

/// Native types: storage is the compute type.
template <class T>
struct NativeLanes {
  using Storage = T;
  using C = T;
  using V = Vec<T>;
  static constexpr size_t kSize = sizeof(T);
  static constexpr size_t kN = kVB / sizeof(T);
  static constexpr size_t kStoreBytes = kVB;

  static V load(const unsigned char* p) { return loadu<V>(p); }
  static void store(unsigned char* p, V v) { storeu(p, v); }
  static void stream(unsigned char* p, V v) { streamStore<kVB>(p, &v); }
  static V round(V v) { return v; }  // results already are values of T
#if CHORUS_VEC_MASKED
  static V loadPartial(const unsigned char* p, size_t k) {  // k < kN
    const __m512i r = _mm512_maskz_loadu_epi8(byteMask(k * kSize), p);
    return (V)r;
  }
  static void storePartial(unsigned char* p, V v, size_t k) {
    _mm512_mask_storeu_epi8(p, byteMask(k * kSize), (__m512i)v);
  }
#endif
};

/// float16 conversions on registers.
struct HalfConv {
  static VF widen(VH h) {
#if CHORUS_VEC_F16C && CHORUS_VEC_BYTES == 64
    // The maskz forms (all lanes) are the same instruction; the plain ones trip a GCC 12
    // false -Wmaybe-uninitialized inside avx512fintrin.h.
    return (VF)_mm512_maskz_cvtph_ps(0xffff, (__m256i)h);
#elif CHORUS_VEC_F16C
    return (VF)_mm256_cvtph_ps((__m128i)h);
#else
    // halfToFloat() of reduce.h, lane-wise with selects instead of branches.
    const VU x = __builtin_convertvector(h, VU);
    const VU sign = (x & 0x8000u) << 16;
    const VU em = x & 0x7fffu;
    const VU normal = (em << 13) + (112u << 23);
    const VU infnan = (em << 13) | 0x7f800000u | ((VU)(em > 0x7c00u) & 0x400000u);
    const VU sub = (VU)(__builtin_convertvector((VI)em, VF) * 5.9604644775390625e-8f);
    VU r = em >= 0x7c00u ? infnan : normal;
    r = em < 0x400u ? sub : r;
    return (VF)(r | sign);
#endif
  }
  static VH narrow(VF f) {
#if CHORUS_VEC_F16C && CHORUS_VEC_BYTES == 64
    return (VH)_mm512_maskz_cvtps_ph(0xffff, (__m512)f,
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#elif CHORUS_VEC_F16C
    return (VH)_mm256_cvtps_ph((__m256)f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    // floatToHalf() of reduce.h, lane-wise.
    const VU x = (VU)f;
    const VU sign = (x >> 16) & 0x8000u;
    const VU ax = x & 0x7fffffffu;
    const VU nan = 0x7e00u | ((ax >> 13) & 0x3ffu);
    const VU sub = (VU)((VF)ax + 0.5f) - 0x3f000000u;
    const VU nor = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;
    VU r = ax < 0x38800000u ? sub : nor;
    r = ax >= 0x477ff000u ? 0x7c00u + VU{} : r;
    r = ax > 0x7f800000u ? nan : r;
    return __builtin_convertvector(r | sign, VH);
#endif
  }
};

/// bfloat16 conversions on registers: pure integer work, exact as reduce.h.
struct Bf16Conv {
  static VF widen(VH h) {
    // GCC 12 splits the generic zero-extension into 128-bit pieces; one vpmovzxwd is
    // better. (maskz form: the plain one trips GCC 12's false -Wmaybe-uninitialized.)
#if CHORUS_VEC_BYTES == 64
    return (VF)((VU)_mm512_maskz_cvtepu16_epi32(0xffff, (__m256i)h) << 16);
#elif CHORUS_VEC_BYTES == 32
    return (VF)((VU)_mm256_cvtepu16_epi32((__m128i)h) << 16);
#else
    return (VF)(__builtin_convertvector(h, VU) << 16);
#endif
  }
  static VH narrow(VF f) {
    const VU x = (VU)f;
    const VU rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const VU nan = (x >> 16) | 0x40u;
    return __builtin_convertvector((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded, VH);
  }
};

/// 16-bit floats: stored as halves of a register, computed in float.
template <class T, class Conv>
struct Lanes16 {
  using Storage = T;
  using C = float;
  using V = VF;
  static constexpr size_t kSize = 2;
  static constexpr size_t kN = kNF;
  static constexpr size_t kStoreBytes = sizeof(VH);

  static V load(const unsigned char* p) { return Conv::widen(loadu<VH>(p)); }
  static void store(unsigned char* p, V v) { storeu(p, Conv::narrow(v)); }
  static void stream(unsigned char* p, V v) {
    const VH h = Conv::narrow(v);
    streamStore<sizeof(VH)>(p, &h);
  }
  /// Rounds an intermediate (a pre-multiplied input, a result before post-division) to T.
  static V round(V v) { return Conv::widen(Conv::narrow(v)); }
#if CHORUS_VEC_MASKED
  static V loadPartial(const unsigned char* p, size_t k) {
    return Conv::widen((VH)_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << k) - 1), p));
  }
  static void storePartial(unsigned char* p, V v, size_t k) {
    _mm256_mask_storeu_epi16(p, static_cast<__mmask16>((1u << k) - 1), (__m256i)Conv::narrow(v));
  }
#endif
};

using HalfLanes = Lanes16<f16, HalfConv>;
using Bf16Lanes = Lanes16<bf16, Bf16Conv>;

}  // namespace vec
}  // namespace CHORUS_ISA_NS
}  // namespace kernels
}  // namespace chorus
