// test_reduce.cc — reduce() for every type x op x decoration, per ISA variant, against the
// independent reference: lengths around every vector width, unaligned pointers, aliasing,
// acc == nullptr, streaming stores, and guard bytes that must stay untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "tests/unit/kernels/isa_param.h"
#include "tests/unit/kernels/reference.h"

namespace ck = chorus::kernels;
using chorus_test::PerIsa;
using ref::Bits;

namespace {

const chorusDataType_t kTypes[] = {chorusInt8,    chorusUint8,   chorusInt32,   chorusUint32,
                                   chorusInt64,   chorusUint64,  chorusFloat16, chorusFloat32,
                                   chorusFloat64, chorusBfloat16};

// Random elements that hit the interesting cases often: full-range bits (wrap-around,
// NaN/inf/subnormal patterns of the 16-bit floats), ordinary values, and specials.
class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  Bits operator()(chorusDataType_t t) {
    const uint32_t pick = rng_() % 16;
    switch (t) {
      case chorusFloat32: return f32(pick);
      case chorusFloat64: return f64(pick);
      case chorusFloat16:
      case chorusBfloat16:
        // Random patterns cover NaN, inf, subnormals, zeros; a third are kept moderate
        // (exponents near 1) so sums and products are not all overflow or underflow.
        if (pick < 5) return (rng_() & 0x80ff) | (t == chorusFloat16 ? 0x3800 : 0x3f00);
        return rng_() & 0xffff;
      default: {
        const Bits r = (Bits{rng_()} << 32) | rng_();
        if (pick == 0) return 0;
        if (pick == 1) return ~Bits{0};  // -1 / max unsigned
        if (pick < 6) return r % 7;      // small values
        return r;
      }
    }
  }
  int divisor() { return std::vector<int>{2, 3, 7, 200, 1000}[rng_() % 5]; }

 private:
  template <class T>
  static Bits put(T x) {
    Bits v = 0;
    std::memcpy(&v, &x, sizeof x);
    return v;
  }
  Bits f32(uint32_t pick) {
    using L = std::numeric_limits<float>;
    const float specials[] = {L::quiet_NaN(),
                              -L::quiet_NaN(),
                              L::infinity(),
                              -L::infinity(),
                              0.0f,
                              -0.0f,
                              L::denorm_min(),
                              -L::denorm_min(),
                              L::min() / 3,
                              L::max(),
                              -L::max(),
                              L::min(),
                              1.0f,
                              -1.0f};
    if (pick < 3) return put(specials[rng_() % (sizeof specials / sizeof *specials)]);
    if (pick < 5) return rng_();  // any pattern
    std::uniform_real_distribution<float> d(-100.0f, 100.0f);
    return put(d(rng_));
  }
  Bits f64(uint32_t pick) {
    using L = std::numeric_limits<double>;
    const double specials[] = {L::quiet_NaN(),
                               -L::quiet_NaN(),
                               L::infinity(),
                               -L::infinity(),
                               0.0,
                               -0.0,
                               L::denorm_min(),
                               -L::denorm_min(),
                               L::min() / 3,
                               L::max(),
                               -L::max(),
                               L::min(),
                               1.0,
                               -1.0};
    if (pick < 3) return put(specials[rng_() % (sizeof specials / sizeof *specials)]);
    if (pick < 5) return (Bits{rng_()} << 32) | rng_();
    std::uniform_real_distribution<double> d(-100.0, 100.0);
    return put(d(rng_));
  }
  std::mt19937 rng_;
};

enum class Alias { None, DstIsAcc, DstIsLocal };

// One reduction call in the form the tests vary.
struct Call {
  chorusDataType_t type;
  ck::ReduceKind kind;
  bool hasAcc, pre, post, stream;
  size_t n;
  size_t offD, offA, offL;  // byte offsets from a 64-byte aligned base
  Alias alias;
};

constexpr size_t kGuard = 80;
constexpr unsigned char kCanary = 0xa5;

// A buffer whose element 0 sits `off` bytes after a 64-byte boundary, with canary bytes
// on both sides (the span from the boundary to the start, and kGuard after the end).
struct Buf {
  Buf(size_t bytes, size_t off) : raw(64 + off + bytes + kGuard, kCanary), off(off) {
    const auto addr = reinterpret_cast<uintptr_t>(raw.data());
    start = (64 - addr % 64) % 64;
    len = off + bytes + kGuard;
  }
  unsigned char* at() { return raw.data() + start + off; }
  unsigned char byte(size_t i) const { return raw[start + i]; }  // i < len
  std::vector<unsigned char> raw;
  size_t off, start = 0, len = 0;
};

std::string describe(const Call& c, const char* isa) {
  std::string s = std::string(isa) + " type=" + std::to_string(c.type) +
                  " kind=" + std::to_string(static_cast<int>(c.kind)) +
                  " acc=" + std::to_string(c.hasAcc) + " pre=" + std::to_string(c.pre) +
                  " post=" + std::to_string(c.post) + " stream=" + std::to_string(c.stream) +
                  " n=" + std::to_string(c.n) + " off=" + std::to_string(c.offD) + "/" +
                  std::to_string(c.offA) + "/" + std::to_string(c.offL) +
                  " alias=" + std::to_string(static_cast<int>(c.alias));
  return s;
}

// Runs one call and checks every element and both guard zones; returns false on failure.
bool check(const ck::IsaOps& ops, const Call& c, Gen& gen) {
  const size_t S = ref::size(c.type), bytes = c.n * S;
  Buf acc(bytes, c.offA), local(bytes, c.offL), own(bytes, c.offD);
  std::vector<Bits> av(c.n), lv(c.n), want(c.n);
  for (size_t i = 0; i < c.n; ++i) {
    av[i] = gen(c.type);
    lv[i] = gen(c.type);
    std::memcpy(acc.at() + i * S, &av[i], S);
    std::memcpy(local.at() + i * S, &lv[i], S);
  }
  ck::ReduceSpec spec;
  spec.type = c.type;
  spec.kind = c.kind;
  spec.preMul = c.pre;
  const Bits scalar = gen(c.type);
  std::memcpy(spec.scalar, &scalar, S);
  spec.postDiv = c.post ? gen.divisor() : 0;
  for (size_t i = 0; i < c.n; ++i) {
    Bits v = lv[i];
    if (c.pre) v = ref::combine(c.type, ck::ReduceKind::Prod, v, scalar);
    if (c.hasAcc) v = ref::combine(c.type, c.kind, av[i], v);
    if (c.post) v = ref::divide(c.type, v, spec.postDiv);
    want[i] = v;
  }
  Buf* dst = c.alias == Alias::DstIsAcc ? &acc : c.alias == Alias::DstIsLocal ? &local : &own;
  const unsigned flags = (c.pre ? ck::kApplyPre : 0u) | (c.post ? ck::kApplyPost : 0u) |
                         (c.stream ? ck::kStreaming : 0u);
  ops.reduce(spec, dst->at(), c.hasAcc ? acc.at() : nullptr, local.at(), c.n, flags);

  for (size_t i = 0; i < c.n; ++i) {
    Bits got = 0;
    std::memcpy(&got, dst->at() + i * S, S);
    if (!ref::same(c.type, got, want[i])) {
      ADD_FAILURE() << describe(c, ops.name) << "\n  element " << i << ": acc "
                    << ref::show(c.type, av[i]) << " local " << ref::show(c.type, lv[i])
                    << " scalar " << ref::show(c.type, scalar) << " div " << spec.postDiv
                    << "\n  got " << ref::show(c.type, got) << " want "
                    << ref::show(c.type, want[i]);
      return false;
    }
  }
  for (Buf* b : {&acc, &local, &own}) {
    const bool written = b == dst;
    for (size_t i = 0; i < b->len; ++i) {
      const bool inside = i >= b->off && i < b->off + bytes;
      if (inside) continue;
      if (b->byte(i) != kCanary) {
        ADD_FAILURE() << describe(c, ops.name) << ": byte " << i << " outside the "
                      << (written ? "destination" : "inputs") << " was modified";
        return false;
      }
    }
  }
  // Inputs that are not the destination are read-only.
  if (dst != &acc)
    for (size_t i = 0; i < c.n; ++i)
      if (std::memcmp(acc.at() + i * S, &av[i], S) != 0) {
        ADD_FAILURE() << describe(c, ops.name) << ": acc was modified";
        return false;
      }
  if (dst != &local)
    for (size_t i = 0; i < c.n; ++i)
      if (std::memcmp(local.at() + i * S, &lv[i], S) != 0) {
        ADD_FAILURE() << describe(c, ops.name) << ": local was modified";
        return false;
      }
  return true;
}

struct Mode {
  ck::ReduceKind kind;
  bool hasAcc, pre, post;
};
const Mode kModes[] = {
    {ck::ReduceKind::Sum, true, false, false},  {ck::ReduceKind::Prod, true, false, false},
    {ck::ReduceKind::Max, true, false, false},  {ck::ReduceKind::Min, true, false, false},
    {ck::ReduceKind::Sum, true, true, false},  // pre-multiplied sum
    {ck::ReduceKind::Sum, true, false, true},  // integer avg's last step
    {ck::ReduceKind::Sum, true, true, true},    {ck::ReduceKind::Max, true, false, true},
    {ck::ReduceKind::Prod, true, true, false},   // unusual combination: scalar fallback
    {ck::ReduceKind::Sum, false, false, false},  // first contribution: a copy
    {ck::ReduceKind::Sum, false, true, false},  {ck::ReduceKind::Sum, false, false, true},
    {ck::ReduceKind::Min, false, true, true},
};

class KernelsReduce : public PerIsa {};

// Every type x mode over lengths that straddle each register width and unroll step.
TEST_P(KernelsReduce, AllTypesAllModesAllLengths) {
  const size_t kLengths[] = {0,  1,  2,  3,  7,   8,   15,  16,   17,  31,
                             33, 63, 64, 65, 127, 129, 255, 1023, 4097};
  Gen gen(1);
  for (chorusDataType_t t : kTypes)
    for (const Mode& m : kModes)
      for (size_t n : kLengths)
        for (bool stream : {false, true}) {
          const Call c{t, m.kind, m.hasAcc, m.pre, m.post, stream, n, 0, 0, 0, Alias::None};
          ASSERT_TRUE(check(ops(), c, gen));
        }
}

// Unaligned pointers (1..7 bytes, each pointer differently) and exact aliasing.
TEST_P(KernelsReduce, UnalignedAndAliased) {
  const size_t kLengths[] = {1, 7, 15, 63, 64, 1023, 4097};
  const size_t kOffsets[][3] = {{1, 2, 3}, {7, 5, 1}, {4, 4, 4}, {3, 0, 6}, {2, 6, 0}, {0, 1, 5}};
  Gen gen(2);
  for (chorusDataType_t t : kTypes)
    for (const Mode& m : kModes)
      for (size_t n : kLengths)
        for (const auto& o : kOffsets)
          for (Alias alias : {Alias::None, Alias::DstIsAcc, Alias::DstIsLocal}) {
            if (alias == Alias::DstIsAcc && !m.hasAcc) continue;
            // An aliased destination has its input's offset.
            const size_t offD = alias == Alias::DstIsAcc     ? o[1]
                                : alias == Alias::DstIsLocal ? o[2]
                                                             : o[0];
            const bool stream = (o[0] + n) % 2 == 0;
            const Call c{t, m.kind, m.hasAcc, m.pre, m.post, stream, n, offD, o[1], o[2], alias};
            ASSERT_TRUE(check(ops(), c, gen));
          }
}

// Streaming with destination offsets that make the aligned head 0..63 bytes long.
TEST_P(KernelsReduce, StreamingHeadsAndTails) {
  Gen gen(3);
  for (chorusDataType_t t :
       {chorusFloat32, chorusFloat16, chorusInt8, chorusFloat64, chorusBfloat16})
    for (size_t offD = 0; offD < 64; offD += ref::size(t))
      for (size_t n : {size_t{300}, size_t{5000}}) {
        const Call c{t, ck::ReduceKind::Sum, true, false, false, true, n, offD, 3, 0, Alias::None};
        ASSERT_TRUE(check(ops(), c, gen));
      }
}

// Hand-picked semantics that random data might hit too rarely.
TEST_P(KernelsReduce, SpecialValueSemantics) {
  auto run1 = [&](chorusDataType_t t, ck::ReduceKind k, auto a, auto b) {
    // Place the pair at every position of a 70-element array, so vector bodies and
    // tails (masked or scalar) are all exercised.
    using T = decltype(a);
    std::vector<T> av(70, a), bv(70, b), d(70);
    ck::ReduceSpec spec;
    spec.type = t;
    spec.kind = k;
    ops().reduce(spec, d.data(), av.data(), bv.data(), d.size(), 0);
    return d;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float x : run1(chorusFloat32, ck::ReduceKind::Max, nan, 1.0f)) EXPECT_TRUE(std::isnan(x));
  for (float x : run1(chorusFloat32, ck::ReduceKind::Max, 1.0f, nan)) EXPECT_TRUE(std::isnan(x));
  for (float x : run1(chorusFloat32, ck::ReduceKind::Min, -INFINITY, nan))
    EXPECT_TRUE(std::isnan(x));
  for (float x : run1(chorusFloat32, ck::ReduceKind::Max, -0.0f, 0.0f))
    EXPECT_FALSE(std::signbit(x));
  for (float x : run1(chorusFloat32, ck::ReduceKind::Max, 0.0f, -0.0f))
    EXPECT_FALSE(std::signbit(x));
  for (float x : run1(chorusFloat32, ck::ReduceKind::Min, 0.0f, -0.0f))
    EXPECT_TRUE(std::signbit(x));
  for (double x : run1(chorusFloat64, ck::ReduceKind::Min, -0.0, 0.0)) EXPECT_TRUE(std::signbit(x));
  for (double x : run1(chorusFloat64, ck::ReduceKind::Max, 2.0, std::nan("")))
    EXPECT_TRUE(std::isnan(x));
  for (float x : run1(chorusFloat32, ck::ReduceKind::Sum, INFINITY, -INFINITY))
    EXPECT_TRUE(std::isnan(x));
  for (int32_t x : run1(chorusInt32, ck::ReduceKind::Sum, INT32_MAX, int32_t{1}))
    EXPECT_EQ(x, INT32_MIN);
  for (int64_t x : run1(chorusInt64, ck::ReduceKind::Prod, INT64_MIN, int64_t{-1}))
    EXPECT_EQ(x, INT64_MIN);
  for (int8_t x : run1(chorusInt8, ck::ReduceKind::Prod, int8_t{-128}, int8_t{-1}))
    EXPECT_EQ(x, -128);
  for (uint8_t x : run1(chorusUint8, ck::ReduceKind::Max, uint8_t{200}, uint8_t{100}))
    EXPECT_EQ(x, 200);
  for (int8_t x : run1(chorusInt8, ck::ReduceKind::Max, int8_t{-100}, int8_t{100}))
    EXPECT_EQ(x, 100);
  // float16: 65504 + 16 is exactly the overflow tie and must round to inf (even).
  for (uint16_t x : run1(chorusFloat16, ck::ReduceKind::Sum, uint16_t{0x7bff}, uint16_t{0x4c00}))
    EXPECT_EQ(x, 0x7c00);
  // float16 subnormal arithmetic: 2^-24 + 2^-24 = 2^-23.
  for (uint16_t x : run1(chorusFloat16, ck::ReduceKind::Sum, uint16_t{1}, uint16_t{1}))
    EXPECT_EQ(x, 2);
  // bfloat16 max with NaN and with signed zeros.
  for (uint16_t x : run1(chorusBfloat16, ck::ReduceKind::Max, uint16_t{0x7fc0}, uint16_t{0x3f80}))
    EXPECT_TRUE(ref::isNaN(chorusBfloat16, x));
  for (uint16_t x : run1(chorusBfloat16, ck::ReduceKind::Max, uint16_t{0x8000}, uint16_t{0x0000}))
    EXPECT_EQ(x, 0);
}

// Integer avg divides the wrapped sum with truncation toward zero, also when the divisor
// does not fit the element type.
TEST_P(KernelsReduce, IntegerPostDivide) {
  std::vector<int8_t> a(40, -7), l(40, 0), d(40);
  ck::ReduceSpec spec;
  spec.type = chorusInt8;
  spec.postDiv = 2;
  ops().reduce(spec, d.data(), a.data(), l.data(), d.size(), ck::kApplyPost);
  for (int8_t x : d) EXPECT_EQ(x, -3);
  spec.postDiv = 300;
  std::fill(a.begin(), a.end(), int8_t{127});
  ops().reduce(spec, d.data(), a.data(), l.data(), d.size(), ck::kApplyPost);
  for (int8_t x : d) EXPECT_EQ(x, 0);
  // Without the flag, postDiv is not applied.
  ops().reduce(spec, d.data(), a.data(), l.data(), d.size(), 0);
  for (int8_t x : d) EXPECT_EQ(x, 127);
}

CHORUS_INSTANTIATE_PER_ISA(KernelsReduce);

}  // namespace
