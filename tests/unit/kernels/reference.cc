// reference.cc — see reference.h. Written from the IEEE definitions, not from reduce.h.
#include "tests/unit/kernels/reference.h"

#include <cfenv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace ref {
namespace {

using chorus::kernels::ReduceKind;

// Generic small binary format: p significand bits (with the implicit one), exponent bias.
struct Fmt {
  int p, bias, expBits;
};
constexpr Fmt kHalf{11, 15, 5};
constexpr Fmt kBf16{8, 127, 8};

double decode(Fmt f, uint16_t v) {
  const int mantBits = f.p - 1;
  const int expMax = (1 << f.expBits) - 1;
  const bool neg = v >> 15;
  const int e = (v >> mantBits) & expMax;
  const int m = v & ((1 << mantBits) - 1);
  double r;
  if (e == expMax)
    r = m ? std::nan("") : INFINITY;
  else if (e == 0)
    r = std::ldexp(m, 1 - f.bias - mantBits);
  else
    r = std::ldexp(m + (1 << mantBits), e - f.bias - mantBits);
  return neg ? -r : r;
}

uint16_t encodeRounded(Fmt f, double x) {
  const int mantBits = f.p - 1;
  const int expMax = (1 << f.expBits) - 1;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const uint16_t inf = static_cast<uint16_t>(sign | (expMax << mantBits));
  if (std::isnan(x)) return static_cast<uint16_t>(inf | (1 << (mantBits - 1)));
  double ax = std::fabs(x);
  if (std::isinf(ax)) return inf;
  if (ax == 0) return sign;
  const int emin = 1 - f.bias, emax = f.bias;
  int e = std::ilogb(ax);
  if (e < emin) e = emin;                         // subnormal range: fixed quantum
  const double q = std::ldexp(ax, mantBits - e);  // exact: power-of-two scaling
  double r = std::nearbyint(q);                   // default mode: nearest, ties to even
  if (r == std::ldexp(1.0, f.p)) {                // rounded up into the next binade
    r = std::ldexp(1.0, mantBits);
    ++e;
  }
  if (e > emax) return inf;
  const auto ir = static_cast<uint32_t>(r);
  if (ir < (1u << mantBits)) return static_cast<uint16_t>(sign | ir);  // subnormal (e == emin)
  return static_cast<uint16_t>(sign | ((e + f.bias) << mantBits) | (ir - (1u << mantBits)));
}

template <class T>
T get(Bits v) {
  T x;
  std::memcpy(&x, &v, sizeof x);
  return x;
}
template <class T>
Bits put(T x) {
  Bits v = 0;
  std::memcpy(&v, &x, sizeof x);
  return v;
}

// IEEE 754-2019 maximum/minimum on values that are exact in double.
double maxD(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::nan("");
  if (a == 0 && b == 0) return (std::signbit(a) && std::signbit(b)) ? -0.0 : 0.0;
  return a > b ? a : b;
}
double minD(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::nan("");
  if (a == 0 && b == 0) return (std::signbit(a) || std::signbit(b)) ? -0.0 : 0.0;
  return a < b ? a : b;
}

// float32 result of a OP b for float inputs: exact-enough in double, one rounding to float.
float f32op(ReduceKind k, double a, double b) {
  switch (k) {
    case ReduceKind::Sum: return static_cast<float>(a + b);
    case ReduceKind::Prod: return static_cast<float>(a * b);
    case ReduceKind::Max: return static_cast<float>(maxD(a, b));
    case ReduceKind::Min: return static_cast<float>(minD(a, b));
  }
  return 0;
}

double f64op(ReduceKind k, double a, double b) {
  const __float128 qa = a, qb = b;
  switch (k) {
    case ReduceKind::Sum: return static_cast<double>(qa + qb);
    case ReduceKind::Prod: return static_cast<double>(qa * qb);
    case ReduceKind::Max: return maxD(a, b);
    case ReduceKind::Min: return minD(a, b);
  }
  return 0;
}

// Integers: arithmetic modulo 2^64 on sign-/zero-extended values, truncated on the way out.
template <class T>
Bits intop(ReduceKind k, Bits a, Bits b) {
  const T x = get<T>(a), y = get<T>(b);
  const uint64_t ux = static_cast<uint64_t>(static_cast<int64_t>(x));
  const uint64_t uy = static_cast<uint64_t>(static_cast<int64_t>(y));
  switch (k) {
    case ReduceKind::Sum: return put(static_cast<T>(ux + uy));
    case ReduceKind::Prod: return put(static_cast<T>(ux * uy));
    case ReduceKind::Max: return put(x > y ? x : y);
    case ReduceKind::Min: return put(x < y ? x : y);
  }
  return 0;
}

}  // namespace

double halfToDouble(uint16_t h) { return decode(kHalf, h); }
double bf16ToDouble(uint16_t b) { return decode(kBf16, b); }
uint16_t doubleToHalf(double x) { return encodeRounded(kHalf, x); }
uint16_t doubleToBf16(double x) { return encodeRounded(kBf16, x); }

size_t size(chorusDataType_t t) {
  switch (t) {
    case chorusInt8:
    case chorusUint8: return 1;
    case chorusFloat16:
    case chorusBfloat16: return 2;
    case chorusInt32:
    case chorusUint32:
    case chorusFloat32: return 4;
    default: return 8;
  }
}

bool isNaN(chorusDataType_t t, Bits v) {
  switch (t) {
    case chorusFloat16: return std::isnan(halfToDouble(static_cast<uint16_t>(v)));
    case chorusBfloat16: return std::isnan(bf16ToDouble(static_cast<uint16_t>(v)));
    case chorusFloat32: return std::isnan(get<float>(v));
    case chorusFloat64: return std::isnan(get<double>(v));
    default: return false;
  }
}

bool same(chorusDataType_t t, Bits a, Bits b) {
  if (isNaN(t, a) || isNaN(t, b)) return isNaN(t, a) && isNaN(t, b);
  const size_t s = size(t);
  const Bits mask = s == 8 ? ~Bits{0} : ((Bits{1} << (8 * s)) - 1);
  return (a & mask) == (b & mask);
}

std::string show(chorusDataType_t t, Bits v) {
  char buf[96];
  double d = 0;
  switch (t) {
    case chorusFloat16: d = halfToDouble(static_cast<uint16_t>(v)); break;
    case chorusBfloat16: d = bf16ToDouble(static_cast<uint16_t>(v)); break;
    case chorusFloat32: d = get<float>(v); break;
    case chorusFloat64: d = get<double>(v); break;
    default:
      std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
      return buf;
  }
  std::snprintf(buf, sizeof buf, "%.17g (0x%llx)", d, static_cast<unsigned long long>(v));
  return buf;
}

Bits combine(chorusDataType_t t, ReduceKind k, Bits a, Bits b) {
  switch (t) {
    case chorusInt8: return intop<int8_t>(k, a, b);
    case chorusUint8: return intop<uint8_t>(k, a, b);
    case chorusInt32: return intop<int32_t>(k, a, b);
    case chorusUint32: return intop<uint32_t>(k, a, b);
    case chorusInt64: return intop<int64_t>(k, a, b);
    case chorusUint64: return intop<uint64_t>(k, a, b);
    case chorusFloat32: return put(f32op(k, get<float>(a), get<float>(b)));
    case chorusFloat64: return put(f64op(k, get<double>(a), get<double>(b)));
    case chorusFloat16:  // widen exactly, one float operation, round to half
      return doubleToHalf(
          f32op(k, halfToDouble(static_cast<uint16_t>(a)), halfToDouble(static_cast<uint16_t>(b))));
    case chorusBfloat16:
      return doubleToBf16(
          f32op(k, bf16ToDouble(static_cast<uint16_t>(a)), bf16ToDouble(static_cast<uint16_t>(b))));
    default: return 0;
  }
}

Bits divide(chorusDataType_t t, Bits a, int n) {
  switch (t) {
    case chorusInt8: return put(static_cast<int8_t>(get<int8_t>(a) / n));
    case chorusUint8: return put(static_cast<uint8_t>(get<uint8_t>(a) / static_cast<unsigned>(n)));
    case chorusInt32: return put(static_cast<int32_t>(static_cast<int64_t>(get<int32_t>(a)) / n));
    case chorusUint32:
      return put(static_cast<uint32_t>(get<uint32_t>(a) / static_cast<uint32_t>(n)));
    case chorusInt64: return put(static_cast<int64_t>(get<int64_t>(a) / n));
    case chorusUint64:
      return put(static_cast<uint64_t>(get<uint64_t>(a) / static_cast<uint64_t>(n)));
    case chorusFloat32: return put(static_cast<float>(static_cast<double>(get<float>(a)) / n));
    case chorusFloat64:
      return put(static_cast<double>(static_cast<__float128>(get<double>(a)) / n));
    case chorusFloat16:
      return doubleToHalf(static_cast<float>(halfToDouble(static_cast<uint16_t>(a)) / n));
    case chorusBfloat16:
      return doubleToBf16(static_cast<float>(bf16ToDouble(static_cast<uint16_t>(a)) / n));
    default: return 0;
  }
}

}  // namespace ref
