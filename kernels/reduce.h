// reduce.h — the element operations of every reduction, written once for host and device.
//
// This header is the specification: the host scalar paths and the CUDA kernels call these
// functions directly, and the vectorized host paths (host/host_vec.h) must produce the same
// bits (the unit tests check every ISA variant against an independent reference).
//
// Semantics, per element:
//   * integers: sum and prod wrap modulo 2^bits (computed in the unsigned type, so there is
//     no signed-overflow UB); max/min as usual; postDiv truncates toward zero.
//   * float32/float64: one IEEE operation, round-to-nearest-even. Never contracted into an
//     FMA (build with -ffp-contract=off / nvcc --fmad=false) so every ISA and the GPU agree.
//   * float16/bfloat16: 16-bit storage; widen to float (exact), do the operation in float,
//     round once back to the storage type (nearest-even; overflow to inf; subnormals kept).
//   * max/min are IEEE 754-2019 maximum/minimum: a NaN operand gives NaN, -0 < +0, so the
//     result does not depend on operand order.
//   * NaN payloads are unspecified (hardware picks which operand's NaN survives an add);
//     NaN-ness, and every non-NaN bit, are specified.
//   * preMul (the local input times a scalar of the same type) and postDiv (divide by an
//     integer n) produce values of the type: for 16-bit floats they are rounded to 16 bits
//     like any other operation.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define CHORUS_HD __host__ __device__ __forceinline__
#else
#define CHORUS_HD inline __attribute__((always_inline))
#endif

namespace chorus {
namespace kernels {
// Each host ISA variant compiles this header with different instruction sets. Giving its
// inline functions a per-variant namespace keeps the linker from merging, say, the AVX-512
// copy of floatToHalf() into the baseline variant (which would fault on an older CPU).
#if defined(CHORUS_ISA_NS)
inline namespace CHORUS_ISA_NS {
#endif

/// Storage types of the 16-bit floats: distinct types so templates can tell them apart.
struct f16 {
  uint16_t u;
};
struct bf16 {
  uint16_t u;
};

// --- bit casts (memcpy on the host is the only defined way; the device has intrinsics) ---
CHORUS_HD uint32_t bitsOf(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
CHORUS_HD float floatOf(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
CHORUS_HD uint64_t bitsOf(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}
CHORUS_HD double doubleOf(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}

// --- float16 <-> float ------------------------------------------------------------------
// The host versions match x86 F16C bit for bit, NaNs included (quiet bit set, payload
// shifted/truncated), so scalar tails and vector bodies can never disagree.

/// Exact widening of an IEEE binary16 to float.
CHORUS_HD float halfToFloat(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu)  // inf, or NaN made quiet
    return floatOf(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float mag = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return floatOf(sign | bitsOf(mag));
  }
  return floatOf(sign | ((exp + 112u) << 23) | (mant << 13));
#endif
}

/// float -> binary16, round to nearest, ties to even; overflow gives inf.
CHORUS_HD uint16_t floatToHalf(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  const uint32_t x = bitsOf(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)  // inf stays inf; NaN: quiet, payload truncated (as F16C does)
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  if (ax >= 0x477ff000u)  // >= 65520 = max half + half an ulp: the tie goes to inf (even)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    // Below 2^-14 the result is subnormal or zero. Adding 0.5f makes the float ulp 2^-24,
    // which is exactly the half subnormal ulp, so the FPU does the nearest-even rounding.
    const float r = floatOf(ax) + 0.5f;
    return static_cast<uint16_t>(sign | (bitsOf(r) - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest-even;
  // a carry out of the mantissa correctly bumps the exponent.
  const uint32_t odd = (ax >> 13) & 1u;
  ax += 0xc8000fffu + odd;  // -(112 << 23) + 0xfff, modulo 2^32
  return static_cast<uint16_t>(sign | (ax >> 13));
#endif
}

// --- bfloat16 <-> float -----------------------------------------------------------------
CHORUS_HD float bf16ToFloat(uint16_t b) { return floatOf(static_cast<uint32_t>(b) << 16); }

/// float -> bfloat16, round to nearest, ties to even (subnormals kept, overflow to inf).
CHORUS_HD uint16_t floatToBf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  const uint32_t x = bitsOf(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)  // NaN: keep the top payload bits, force quiet
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
#endif
}

// --- the type a value is computed in -----------------------------------------------------
/// Elem<T>::C is the arithmetic type; toC/fromC widen and round. Native types compute as is.
template <class T>
struct Elem {
  using C = T;
  static CHORUS_HD C toC(T x) { return x; }
  static CHORUS_HD T fromC(C x) { return x; }
};
template <>
struct Elem<f16> {
  using C = float;
  static CHORUS_HD C toC(f16 x) { return halfToFloat(x.u); }
  static CHORUS_HD f16 fromC(C x) { return f16{floatToHalf(x)}; }
};
template <>
struct Elem<bf16> {
  using C = float;
  static CHORUS_HD C toC(bf16 x) { return bf16ToFloat(x.u); }
  static CHORUS_HD bf16 fromC(C x) { return bf16{floatToBf16(x)}; }
};

// --- arithmetic on the compute type ------------------------------------------------------
template <class C>
CHORUS_HD C addC(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    using U = typename std::make_unsigned<C>::type;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <class C>
CHORUS_HD C mulC(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    // uint8 promotes to int; 255 * 255 still fits, so no overflow before the wrap.
    using U = typename std::make_unsigned<C>::type;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

/// IEEE 754-2019 maximum: NaN wins, +0 > -0.
template <class C>
CHORUS_HD C maxC(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    return a > b ? a : b;
  } else {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) {  // equal values differ at most in the sign of zero: AND keeps +0
      if constexpr (sizeof(C) == 4)
        return floatOf(bitsOf(a) & bitsOf(b));
      else
        return doubleOf(bitsOf(a) & bitsOf(b));
    }
    return a > b ? a : b;
  }
}

/// IEEE 754-2019 minimum: NaN wins, -0 < +0.
template <class C>
CHORUS_HD C minC(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    return a < b ? a : b;
  } else {
    if (a != a) return a;
    if (b != b) return b;
    if (a == b) {  // OR keeps -0
      if constexpr (sizeof(C) == 4)
        return floatOf(bitsOf(a) | bitsOf(b));
      else
        return doubleOf(bitsOf(a) | bitsOf(b));
    }
    return a < b ? a : b;
  }
}

/// a / n: truncating for integers (n > 0), one IEEE division for floats.
template <class C>
CHORUS_HD C divC(C a, int n) {
  if constexpr (std::is_integral<C>::value) {
    if constexpr (std::is_signed<C>::value) {
      return static_cast<C>(static_cast<int64_t>(a) / static_cast<int64_t>(n));
    } else {
      return static_cast<C>(static_cast<uint64_t>(a) / static_cast<uint64_t>(n));
    }
  } else {
    return a / static_cast<C>(n);
  }
}

// --- the ops on storage types: what reductions actually call -----------------------------
template <class T>
struct FuncSum {
  CHORUS_HD T operator()(T a, T b) const {
    return Elem<T>::fromC(addC(Elem<T>::toC(a), Elem<T>::toC(b)));
  }
};
template <class T>
struct FuncProd {
  CHORUS_HD T operator()(T a, T b) const {
    return Elem<T>::fromC(mulC(Elem<T>::toC(a), Elem<T>::toC(b)));
  }
};
template <class T>
struct FuncMax {
  CHORUS_HD T operator()(T a, T b) const {
    return Elem<T>::fromC(maxC(Elem<T>::toC(a), Elem<T>::toC(b)));
  }
};
template <class T>
struct FuncMin {
  CHORUS_HD T operator()(T a, T b) const {
    return Elem<T>::fromC(minC(Elem<T>::toC(a), Elem<T>::toC(b)));
  }
};

/// Pre-multiplication of a local input (PreMulSum; float avg uses scalar = 1/n).
template <class T>
CHORUS_HD T applyPreMul(T x, T scalar) {
  return FuncProd<T>()(x, scalar);
}

/// Post-division of a final result (integer avg; works for floats too).
template <class T>
CHORUS_HD T applyPostDiv(T x, int n) {
  return Elem<T>::fromC(divC(Elem<T>::toC(x), n));
}

#if defined(CHORUS_ISA_NS)
}  // inline namespace CHORUS_ISA_NS
#endif
}  // namespace kernels
}  // namespace chorus
