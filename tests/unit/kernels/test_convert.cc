// test_convert.cc — float16/bfloat16 conversions, bit for bit, for every ISA variant and
// for the scalar functions of reduce.h (which the CUDA kernels share).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tests/unit/kernels/isa_param.h"
#include "kernels/reduce.h"
#include "tests/unit/kernels/reference.h"

namespace ck = chorus::kernels;
using chorus_test::PerIsa;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Floats that probe every rounding decision of float -> half: each half value, each
// midpoint between neighbours (the ties), one float ulp either side of both, the overflow
// and underflow edges, specials, and random bit patterns.
std::vector<float> halfProbeFloats() {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double lo = ref::halfToDouble(static_cast<uint16_t>(h));
    const double hi = ref::halfToDouble(static_cast<uint16_t>(h + 1));  // 0x7c00 = inf
    const float vals[] = {static_cast<float>(lo), static_cast<float>((lo + hi) / 2)};
    for (float f : vals) {
      if (std::isinf(f)) continue;
      for (float g : {f, std::nextafter(f, 0.0f), std::nextafter(f, INFINITY)}) {
        v.push_back(g);
        v.push_back(-g);
      }
    }
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, FLT_MAX, INFINITY, FLT_MIN,
                  FLT_TRUE_MIN, 0x1p-25f, 0x1p-26f, 0x1.8p-25f, 0x1p-24f, 0x1.fffffep-15f}) {
    v.push_back(f);
    v.push_back(-f);
  }
  for (uint32_t nan : {0x7f800001u, 0x7fc00000u, 0x7fbfffffu, 0x7f802000u, 0xffffffffu})
    v.push_back(floatOf(nan));
  std::mt19937 rng(12345);
  for (int i = 0; i < (1 << 20); ++i) v.push_back(floatOf(rng()));
  return v;
}

// The same for float -> bfloat16: all ties (low 16 bits = 0x8000) and neighbours of every
// bfloat16 pattern, plus a stride through all 2^32 float patterns.
std::vector<float> bf16ProbeFloats() {
  std::vector<float> v;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      v.push_back(floatOf((b << 16) | low));
  }
  for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 997)
    v.push_back(floatOf(static_cast<uint32_t>(x)));
  return v;
}

void expectHalfEq(uint16_t got, uint16_t want, float in, const char* what) {
  if (std::isnan(ref::halfToDouble(want))) {
    EXPECT_TRUE(std::isnan(ref::halfToDouble(got))) << what << " input " << std::hexfloat << in;
    EXPECT_EQ(got & 0x8000, want & 0x8000) << what << ": NaN sign";
  } else {
    ASSERT_EQ(got, want) << what << " input " << std::hexfloat << in << " bits 0x" << std::hex
                         << bitsOf(in);
  }
}

}  // namespace

TEST(KernelsReference, KnownValues) {
  // Pin the reference itself to hand-checked values, so a broken reference cannot hide a
  // broken kernel.
  EXPECT_EQ(ref::doubleToHalf(1.0), 0x3c00);
  EXPECT_EQ(ref::doubleToHalf(65504.0), 0x7bff);
  EXPECT_EQ(ref::doubleToHalf(65519.99), 0x7bff);
  EXPECT_EQ(ref::doubleToHalf(65520.0), 0x7c00);  // tie at the top rounds to even: inf
  EXPECT_EQ(ref::doubleToHalf(0x1p-24), 0x0001);
  EXPECT_EQ(ref::doubleToHalf(0x1p-25), 0x0000);    // tie between 0 and min subnormal
  EXPECT_EQ(ref::doubleToHalf(0x1.8p-24), 0x0002);  // tie between 1 and 2 ulps: even
  EXPECT_EQ(ref::doubleToHalf(-0x1.0p-26), 0x8000);
  EXPECT_EQ(ref::doubleToHalf(1.0 + 0x1p-11), 0x3c00);
  EXPECT_EQ(ref::doubleToHalf(1.0 + 3 * 0x1p-11), 0x3c02);
  EXPECT_EQ(ref::doubleToHalf(0x1.ffcp-15), 0x0400);  // rounds up into the smallest normal
  EXPECT_EQ(ref::doubleToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(ref::doubleToBf16(1.0), 0x3f80);
  EXPECT_EQ(ref::doubleToBf16(1.0 + 0x1p-8), 0x3f80);
  EXPECT_EQ(ref::doubleToBf16(1.0 + 3 * 0x1p-8), 0x3f82);
  EXPECT_EQ(ref::doubleToBf16(FLT_MAX), 0x7f80);  // rounds past the largest bf16: inf
  EXPECT_EQ(ref::doubleToBf16(0x1p-133), 0x0001);
  EXPECT_EQ(ref::halfToDouble(0x0001), 0x1p-24);
  EXPECT_EQ(ref::halfToDouble(0xfbff), -65504.0);
  EXPECT_EQ(ref::bf16ToDouble(0x0001), 0x1p-133);
}

// reduce.h's scalar conversions (host build) against the reference.
TEST(KernelsScalar, HalfConversionsMatchReference) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float got = ck::halfToFloat(static_cast<uint16_t>(h));
    const double want = ref::halfToDouble(static_cast<uint16_t>(h));
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(got)) << h;
    else
      ASSERT_EQ(bitsOf(got), bitsOf(static_cast<float>(want))) << h;
  }
  for (float f : halfProbeFloats())
    expectHalfEq(ck::floatToHalf(f), ref::doubleToHalf(f), f, "reduce.h floatToHalf");
}

TEST(KernelsScalar, Bf16ConversionsMatchReference) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const double want = ref::bf16ToDouble(static_cast<uint16_t>(b));
    const float got = ck::bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(want))
      ASSERT_TRUE(std::isnan(got));
    else
      ASSERT_EQ(bitsOf(got), bitsOf(static_cast<float>(want))) << b;
  }
  for (float f : bf16ProbeFloats()) {
    const uint16_t got = ck::floatToBf16(f), want = ref::doubleToBf16(f);
    if (std::isnan(f))
      ASSERT_TRUE(std::isnan(ref::bf16ToDouble(got))) << bitsOf(f);
    else
      ASSERT_EQ(got, want) << std::hexfloat << f;
  }
}

class KernelsConvert : public PerIsa {};

TEST_P(KernelsConvert, HalfToFloatAllValues) {
  std::vector<uint16_t> in(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) in[h] = static_cast<uint16_t>(h);
  std::vector<float> out(in.size());
  ops().halfToFloat(out.data(), in.data(), in.size());
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const double want = ref::halfToDouble(in[h]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(out[h])) << h;
    } else {
      ASSERT_EQ(bitsOf(out[h]), bitsOf(static_cast<float>(want))) << "half 0x" << std::hex << h;
    }
    // Vector and scalar paths agree on every bit, NaN payloads included.
    ASSERT_EQ(bitsOf(out[h]), bitsOf(ck::halfToFloat(in[h]))) << "half 0x" << std::hex << h;
  }
}

TEST_P(KernelsConvert, FloatToHalfRoundsToNearestEven) {
  const std::vector<float> in = halfProbeFloats();
  std::vector<uint16_t> out(in.size());
  ops().floatToHalf(out.data(), in.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    expectHalfEq(out[i], ref::doubleToHalf(in[i]), in[i], ops().name);
    ASSERT_EQ(out[i], ck::floatToHalf(in[i]))
        << "vector vs scalar, bits 0x" << std::hex << bitsOf(in[i]);
  }
}

TEST_P(KernelsConvert, Bf16BothWays) {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t b = 0; b < 0x10000; ++b) all[b] = static_cast<uint16_t>(b);
  std::vector<float> wide(all.size());
  ops().bf16ToFloat(wide.data(), all.data(), all.size());
  for (uint32_t b = 0; b < 0x10000; ++b) ASSERT_EQ(bitsOf(wide[b]), b << 16) << b;

  const std::vector<float> in = bf16ProbeFloats();
  std::vector<uint16_t> out(in.size());
  ops().floatToBf16(out.data(), in.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(in[i])) {
      ASSERT_TRUE(std::isnan(ref::bf16ToDouble(out[i])));
    } else {
      ASSERT_EQ(out[i], ref::doubleToBf16(in[i])) << std::hexfloat << in[i];
    }
    ASSERT_EQ(out[i], ck::floatToBf16(in[i]));
  }
}

// The reduce path itself: x + (-0) == x for every half, and exact ties h + ulp(h)/2.
TEST_P(KernelsConvert, SixteenBitSumsRoundTripAndTies) {
  for (chorusDataType_t t : {chorusFloat16, chorusBfloat16}) {
    const bool half = t == chorusFloat16;
    std::vector<uint16_t> a(0x10000), b(0x10000), d(0x10000);
    for (uint32_t x = 0; x < 0x10000; ++x) {
      a[x] = static_cast<uint16_t>(x);
      b[x] = 0x8000;  // -0
    }
    ck::ReduceSpec spec;
    spec.type = t;
    ops().reduce(spec, d.data(), a.data(), b.data(), a.size(), 0);
    for (uint32_t x = 0; x < 0x10000; ++x) {
      if (ref::isNaN(t, x))
        ASSERT_TRUE(ref::isNaN(t, d[x])) << x;
      else
        ASSERT_EQ(d[x], x) << "type " << t << " value 0x" << std::hex << x;
    }
    // Ties: b = half an ulp of a, same sign; the float sum is exact, so the 16-bit rounding
    // decides alone.
    size_t n = 0;
    const int mant = half ? 10 : 7;
    for (uint32_t x = 0; x < 0x10000; ++x) {
      const double v = half ? ref::halfToDouble(static_cast<uint16_t>(x))
                            : ref::bf16ToDouble(static_cast<uint16_t>(x));
      if (!std::isfinite(v) || v == 0) continue;
      const double tie = std::ldexp(1.0, std::ilogb(v) - mant - 1) * (v < 0 ? -1 : 1);
      const uint16_t tb = half ? ref::doubleToHalf(tie) : ref::doubleToBf16(tie);
      if ((half ? ref::halfToDouble(tb) : ref::bf16ToDouble(tb)) != tie) continue;  // below range
      a[n] = static_cast<uint16_t>(x);
      b[n] = tb;
      ++n;
    }
    ASSERT_GT(n, 50000u);
    ops().reduce(spec, d.data(), a.data(), b.data(), n, 0);
    size_t roundedUp = 0;
    for (size_t i = 0; i < n; ++i) {
      const ref::Bits want = ref::combine(t, ck::ReduceKind::Sum, a[i], b[i]);
      ASSERT_EQ(d[i], want) << "type " << t << " 0x" << std::hex << a[i] << " + 0x" << b[i];
      roundedUp += d[i] != a[i];
    }
    // Ties to even: about half of them round away from a.
    EXPECT_GT(roundedUp, n / 4);
    EXPECT_LT(roundedUp, 3 * n / 4);
  }
}

CHORUS_INSTANTIATE_PER_ISA(KernelsConvert);
