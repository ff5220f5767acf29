// test_copy.cc — copy() (plain and streaming) per ISA variant, and the public dispatching
// entry points.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/host/host_reduce.h"
#include "tests/unit/kernels/isa_param.h"

namespace ck = chorus::kernels;
using chorus_test::PerIsa;

namespace {

// The kernels take their ISA choice as an argument (the library passes CHORUS_KERNEL_ISA
// at communicator init); this binary, which links the kernels alone, does the same before
// any test runs, so a run with CHORUS_KERNEL_ISA=<isa> forces that variant.
const char* const kPicked = ck::selectIsa(std::getenv("CHORUS_KERNEL_ISA"));

class KernelsCopy : public PerIsa {};

TEST_P(KernelsCopy, OddSizesAndAlignments) {
  const size_t kSizes[] = {0,   1,   7,   63,   64,        65,        255,
                           256, 257, 511, 1000, 4096 + 13, 65536 + 7, (1 << 20) + 3};
  std::mt19937 rng(7);
  for (size_t bytes : kSizes) {
    // One random source per size (copy() never writes it): drawing it again for each of the
    // up to 176 offset and store cases was most of the test's time under ASan.
    std::vector<unsigned char> src(bytes + 128);
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    for (size_t offS : {0, 1, 5, 8})
      for (size_t offD = 0; offD < 64; offD += (bytes > 100000 ? 9 : 3))
        for (bool streaming : {false, true}) {
          std::vector<unsigned char> dst(bytes + 256, 0x5a);
          // Distance of dst.data() + offD from a 64-byte boundary varies with the heap,
          // so also vary a 64-aligned base explicitly.
          const size_t align = (64 - reinterpret_cast<uintptr_t>(dst.data()) % 64) % 64;
          unsigned char* d = dst.data() + align + offD;
          ops().copy(d, src.data() + offS, bytes, streaming);
          ASSERT_EQ(std::memcmp(d, src.data() + offS, bytes), 0)
              << ops().name << " bytes=" << bytes << " offS=" << offS << " offD=" << offD
              << " streaming=" << streaming;
          for (unsigned char* p = dst.data(); p < d; ++p)
            ASSERT_EQ(*p, 0x5a) << "byte before dst written";
          for (unsigned char* p = d + bytes; p < dst.data() + dst.size(); ++p)
            ASSERT_EQ(*p, 0x5a) << "byte after dst written, bytes=" << bytes << " offD=" << offD;
        }
  }
}

// reduce() with acc == nullptr and no decorations is a copy, streaming or not.
TEST_P(KernelsCopy, ReduceWithoutAccCopies) {
  std::vector<float> l(1000), d(1000, -1.0f);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(i) * 0.5f;
  ck::ReduceSpec spec;
  for (unsigned flags : {0u, unsigned{ck::kStreaming}}) {
    std::fill(d.begin(), d.end(), -1.0f);
    ops().reduce(spec, d.data(), nullptr, l.data(), l.size(), flags);
    EXPECT_EQ(d, l);
  }
  ops().reduce(spec, l.data(), nullptr, l.data(), l.size(), 0);  // in place: no-op
  EXPECT_EQ(l[999], 499.5f);
}

// reduceCopy() writes reduce()'s bits to both destinations (checked against reduce(), which
// test_reduce.cc checks against the independent reference), for sizes around its blocks,
// odd alignments, every decoration, streaming or not, dst2 aliasing acc or local, and no acc
// (a copy to two places); and
// writes nothing outside either destination.
TEST_P(KernelsCopy, ReduceCopyWritesBothDestinations) {
  struct T {
    chorusDataType_t type;
    size_t elem;
  };
  const T kTypes[] = {{chorusFloat32, 4}, {chorusInt8, 1}, {chorusFloat64, 8}, {chorusBfloat16, 2}};
  const size_t kCounts[] = {0, 1, 3, 64, 1023, 1024, 1025, 4099, (1 << 18) + 5};
  std::mt19937 rng(11);
  for (const T& t : kTypes)
    for (size_t count : kCounts) {
      // One random pair of inputs per type and count, copied into place for each case (an
      // aliased dst2 overwrites one): drawing them byte by byte for each of the 16 cases was
      // most of the test's time under ASan.
      std::vector<unsigned char> accInit(count * t.elem + 8), locInit(count * t.elem + 8);
      for (auto& b : accInit) b = static_cast<unsigned char>(rng() & 0x3f);  // finite values
      for (auto& b : locInit) b = static_cast<unsigned char>(rng() & 0x3f);
      for (int alias = 0; alias < 4; ++alias)  // 0: none, 1: dst2 == local, 2: == acc, 3: no acc
        for (unsigned flags :
             {0u, unsigned{ck::kStreaming}, unsigned{ck::kApplyPre | ck::kApplyPost},
              unsigned{ck::kApplyPre | ck::kApplyPost | ck::kStreaming}}) {
          ck::ReduceSpec spec;
          spec.type = t.type;
          spec.kind = ck::ReduceKind::Sum;
          if (flags & ck::kApplyPre) {
            spec.preMul = true;
            if (t.type == chorusFloat32) {
              const float two = 2.0f;
              std::memcpy(spec.scalar, &two, sizeof two);
            } else {
              spec.scalar[0] = 1;  // small integer or tiny float: any value, same bits both ways
            }
            spec.postDiv = t.type == chorusInt8 ? 3 : 0;
          }
          const size_t bytes = count * t.elem, pad = 64;
          std::vector<unsigned char> acc(accInit), loc(locInit), d(bytes + 2 * pad, 0x5a),
              d2(bytes + 2 * pad + 8, 0xa5), want(bytes + 8);
          const size_t mis = (count % 3) * t.elem;  // vary dst2's alignment by elements
          unsigned char* a = alias == 3 ? nullptr : acc.data() + mis % 8;  // 3: a copy
          unsigned char* l = loc.data() + mis % 8;
          ops().reduce(spec, want.data(), a, l, count,
                       flags & ~static_cast<unsigned>(ck::kStreaming));
          unsigned char* dst2 = alias == 1 ? l : alias == 2 ? a : d2.data() + pad + mis;
          ops().reduceCopy(spec, d.data() + pad, dst2, a, l, count, flags);
          ASSERT_EQ(std::memcmp(d.data() + pad, want.data(), bytes), 0)
              << ops().name << " type=" << t.type << " count=" << count << " flags=" << flags;
          ASSERT_EQ(std::memcmp(dst2, want.data(), bytes), 0)
              << ops().name << " dst2, type=" << t.type << " count=" << count << " alias=" << alias
              << " flags=" << flags;
          for (size_t i = 0; i < pad; ++i) {
            ASSERT_EQ(d[i], 0x5a);
            ASSERT_EQ(d[pad + bytes + i], 0x5a);
          }
          if (alias == 0 || alias == 3) {
            for (size_t i = 0; i < pad + mis; ++i) ASSERT_EQ(d2[i], 0xa5);
            for (size_t i = pad + mis + bytes; i < d2.size(); ++i) ASSERT_EQ(d2[i], 0xa5);
          }
        }
    }
}

CHORUS_INSTANTIATE_PER_ISA(KernelsCopy);

TEST(KernelsDispatch, PicksBestVariantThisCpuRuns) {
  const ck::IsaOps* best = nullptr;
  for (int i = 0; i < ck::kNumIsas; ++i)
    if (const ck::IsaOps* o = ck::isaOps(static_cast<ck::Isa>(i))) best = o;
  ASSERT_NE(best, nullptr);
  ASSERT_NE(ck::isaOps(ck::Isa::Baseline), nullptr) << "the baseline variant must always run";
  const char* forced = std::getenv("CHORUS_KERNEL_ISA");
  if (forced == nullptr || *forced == '\0') {
    EXPECT_STREQ(ck::isaName(), best->name);
  } else {
    // meson registers a second run with CHORUS_KERNEL_ISA=baseline: a lower choice is obeyed.
    EXPECT_STREQ(ck::isaName(), forced);
  }
  EXPECT_STREQ(ck::activeIsa().name, ck::isaName());
  EXPECT_STREQ(kPicked, ck::isaName());
  // The choice is made once: a later call changes nothing.
  EXPECT_STREQ(ck::selectIsa("baseline"), kPicked);
  EXPECT_STREQ(ck::isaName(), kPicked);
  std::printf("[ INFO     ] kernels ISA picked: %s\n", ck::isaName());
}

TEST(KernelsDispatch, PublicEntryPoints) {
  std::vector<float> a(77, 1.5f), l(77, 2.25f), d(77);
  ck::ReduceSpec spec;
  spec.kind = ck::ReduceKind::Prod;
  ck::reduce(spec, d.data(), a.data(), l.data(), d.size(), 0);
  for (float x : d) EXPECT_EQ(x, 3.375f);
  std::vector<float> c(77, 0.0f);
  ck::copy(c.data(), d.data(), c.size() * sizeof(float), true);
  EXPECT_EQ(c, d);
  std::vector<float> e(77, 0.0f), f(77, 0.0f);
  ck::reduceCopy(spec, e.data(), f.data(), a.data(), l.data(), e.size(), ck::kStreaming);
  EXPECT_EQ(e, d);
  EXPECT_EQ(f, d);
}

TEST(KernelsDispatch, TypeSizes) {
  EXPECT_EQ(ck::typeSize(chorusInt8), 1u);
  EXPECT_EQ(ck::typeSize(chorusUint8), 1u);
  EXPECT_EQ(ck::typeSize(chorusFloat16), 2u);
  EXPECT_EQ(ck::typeSize(chorusBfloat16), 2u);
  EXPECT_EQ(ck::typeSize(chorusInt32), 4u);
  EXPECT_EQ(ck::typeSize(chorusUint32), 4u);
  EXPECT_EQ(ck::typeSize(chorusFloat32), 4u);
  EXPECT_EQ(ck::typeSize(chorusInt64), 8u);
  EXPECT_EQ(ck::typeSize(chorusUint64), 8u);
  EXPECT_EQ(ck::typeSize(chorusFloat64), 8u);
  EXPECT_EQ(ck::typeSize(chorusNumTypes), 0u);
  EXPECT_EQ(ck::typeSize(static_cast<chorusDataType_t>(-1)), 0u);
}

}  // namespace
