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
  for (size_t bytes : kSizes)
    for (size_t offS : {0, 1, 5, 8})
      for (size_t offD = 0; offD < 64; offD += (bytes > 100000 ? 9 : 3))
        for (bool streaming : {false, true}) {
          std::vector<unsigned char> src(bytes + 128), dst(bytes + 256, 0x5a);
          for (auto& b : src) b = static_cast<unsigned char>(rng());
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
