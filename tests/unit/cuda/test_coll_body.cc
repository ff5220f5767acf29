// test_coll_body.cc — the per-thread bodies of the device-path kernels (kernels/coll_body.h),
// run on the host over every thread index of several grid shapes, in shuffled order, and
// compared bit for bit with the independent reference (tests/unit/kernels/reference.*).
// The same bodies are what kernels/cuda/coll_kernels.cu runs on a GPU and what the CUDA
// stand-in runs for its kernel launches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/coll_body.h"
#include "tests/unit/kernels/reference.h"

namespace ck = chorus::kernels;

namespace {

const chorusDataType_t kTypes[] = {chorusInt8,    chorusUint8,   chorusInt32,   chorusUint32,
                                   chorusInt64,   chorusUint64,  chorusFloat16, chorusFloat32,
                                   chorusFloat64, chorusBfloat16};
const ck::ReduceKind kKinds[] = {ck::ReduceKind::Sum, ck::ReduceKind::Prod, ck::ReduceKind::Max,
                                 ck::ReduceKind::Min};
// Grid shapes: one thread doing everything, fewer threads than elements (each thread loops),
// and more threads than elements (most threads idle).
const size_t kGrids[] = {1, 37, 512};

ref::Bits load(const std::vector<unsigned char>& buf, chorusDataType_t t, size_t i) {
  ref::Bits v = 0;
  std::memcpy(&v, buf.data() + i * ref::size(t), ref::size(t));
  return v;
}

std::vector<size_t> shuffled(size_t nt, std::mt19937_64& rng) {
  std::vector<size_t> order(nt);
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// Values that exercise each type: random bits (NaNs, infinities, subnormals included for
// floats) mixed with small numbers (so products and sums do not all overflow).
std::vector<unsigned char> randomBuffer(chorusDataType_t t, size_t count, std::mt19937_64& rng) {
  std::vector<unsigned char> buf(count * ref::size(t));
  for (size_t i = 0; i < count; ++i) {
    ref::Bits v = rng();
    if (i % 2 == 0) {
      const int small = static_cast<int>(rng() % 9) - 4;
      switch (t) {
        case chorusFloat16: v = ref::doubleToHalf(small); break;
        case chorusBfloat16: v = ref::doubleToBf16(small); break;
        case chorusFloat32: {
          const float f = static_cast<float>(small) * 0.75f;
          uint32_t u;
          std::memcpy(&u, &f, 4);
          v = u;
          break;
        }
        case chorusFloat64: {
          const double d = small * 1.25;
          std::memcpy(&v, &d, 8);
          break;
        }
        default: v = static_cast<ref::Bits>(static_cast<int64_t>(small)); break;
      }
    }
    std::memcpy(buf.data() + i * ref::size(t), &v, ref::size(t));
  }
  return buf;
}

struct Decoration {
  const char* name;
  bool preMul, postDiv;
};
// Plain op; pre-multiplied sum / float avg (every source times a scalar); integer avg
// (the result divided by the number of sources).
const Decoration kDecorations[] = {
    {"plain", false, false}, {"premul", true, false}, {"postdiv", false, true}};

}  // namespace

// acceptance 2, first half: 10 types x (4 ops x {plain, pre-multiplied, post-divided}) x
// 1-8 sources x 3 grid shapes in shuffled thread order, exact against the reference.
TEST(CollBody, ReduceEveryTypeOpSourceCountAndGrid) {
  std::mt19937_64 rng(34);
  const size_t count = 131;  // prime: no grid shape divides it
  size_t checked = 0;
  for (chorusDataType_t t : kTypes)
    for (ck::ReduceKind kind : kKinds)
      for (const Decoration& dec : kDecorations)
        for (int nsrc = 1; nsrc <= ck::kMaxSources; ++nsrc) {
          std::vector<std::vector<unsigned char>> src;
          for (int j = 0; j < nsrc; ++j) src.push_back(randomBuffer(t, count, rng));
          ck::ReduceArgs a;
          a.spec.type = t;
          a.spec.kind = kind;
          a.spec.preMul = dec.preMul;
          const std::vector<unsigned char> scalarBuf = randomBuffer(t, 2, rng);
          std::memcpy(a.spec.scalar, scalarBuf.data(), ref::size(t));  // element 0: small
          a.spec.postDiv = dec.postDiv ? nsrc + 1 : 0;
          a.nsrc = nsrc;
          // Pre-multiply a varying subset (chained launches clear bit 0).
          a.preMask = dec.preMul ? (nsrc == 1 ? 1u : (0xffu & ~(nsrc % 2 ? 1u : 0u))) : 0u;
          a.post = dec.postDiv;
          a.count = count;
          for (int j = 0; j < nsrc; ++j) a.src[j] = src[j].data();
          ref::Bits scalar = 0;
          std::memcpy(&scalar, a.spec.scalar, ref::size(t));
          // Expected, in rank order.
          std::vector<ref::Bits> want(count);
          for (size_t i = 0; i < count; ++i) {
            ref::Bits v = 0;
            for (int j = 0; j < nsrc; ++j) {
              ref::Bits x = load(src[j], t, i);
              if (a.preMask & (1u << j)) x = ref::combine(t, ck::ReduceKind::Prod, x, scalar);
              v = j == 0 ? x : ref::combine(t, kind, v, x);
            }
            if (a.post) v = ref::divide(t, v, a.spec.postDiv);
            want[i] = v;
          }
          for (size_t nt : kGrids) {
            std::vector<unsigned char> dst(count * ref::size(t) + 16, 0xa5);
            a.dst = dst.data();
            const std::vector<size_t> order = shuffled(nt, rng);
            ASSERT_TRUE(ck::runReduceOnHost(a, nt, order.data()));
            for (size_t i = 0; i < count; ++i) {
              const ref::Bits got = load(dst, t, i);
              ASSERT_TRUE(ref::same(t, got, want[i]))
                  << "type " << t << " kind " << static_cast<int>(kind) << " " << dec.name
                  << " nsrc " << nsrc << " grid " << nt << " element " << i << ": got "
                  << ref::show(t, got) << " want " << ref::show(t, want[i]);
            }
            for (size_t b = count * ref::size(t); b < dst.size(); ++b)
              ASSERT_EQ(dst[b], 0xa5) << "wrote past the end";
            ++checked;
          }
        }
  EXPECT_EQ(checked, 10u * 4 * 3 * 8 * 3);
}

// In place: dst is one of the sources (the device path reduces into the user's buffer).
TEST(CollBody, ReduceInPlaceEqualsOutOfPlace) {
  std::mt19937_64 rng(7);
  for (chorusDataType_t t : kTypes)
    for (size_t nt : kGrids) {
      auto s0 = randomBuffer(t, 97, rng), s1 = randomBuffer(t, 97, rng),
           s2 = randomBuffer(t, 97, rng);
      ck::ReduceArgs a;
      a.spec.type = t;
      a.nsrc = 3;
      a.count = 97;
      a.src[0] = s0.data();
      a.src[1] = s1.data();
      a.src[2] = s2.data();
      std::vector<unsigned char> out(s0.size());
      a.dst = out.data();
      ASSERT_TRUE(ck::runReduceOnHost(a, nt));
      a.dst = s1.data();
      const auto order = shuffled(nt, rng);
      ASSERT_TRUE(ck::runReduceOnHost(a, nt, order.data()));
      for (size_t i = 0; i < 97; ++i)
        ASSERT_TRUE(ref::same(t, load(s1, t, i), load(out, t, i))) << t << " " << i;
    }
}

TEST(CollBody, UnknownTypeIsRefused) {
  ck::ReduceArgs a;
  // chorusNumTypes: no type, yet a value the enum can hold (99 would be undefined behaviour
  // on its own, which UBSan reports before the kernel can refuse it).
  a.spec.type = chorusNumTypes;
  a.nsrc = 1;
  EXPECT_FALSE(ck::runReduceOnHost(a, 4));
}

// Copy, gather, scatter, all-to-all: one body over pointer tables. Every word size (the
// addresses' alignment picks it), 1-8 pairs, 3 grid shapes, shuffled; nothing outside the
// destinations changes.
TEST(CollBody, CopyEveryAlignmentPairCountAndGrid) {
  std::mt19937_64 rng(11);
  for (size_t misalign : {0, 1, 2, 4, 8})
    for (size_t bytes : {size_t{0}, size_t{16}, size_t{48}, size_t{1000}, size_t{4096}})
      for (int n = 1; n <= ck::kMaxSources; ++n)
        for (size_t nt : kGrids) {
          const size_t len = bytes + misalign;  // a length the misalignment also divides
          std::vector<unsigned char> src(n * len + 64), dst(n * len + 64, 0x5a);
          for (auto& c : src) c = static_cast<unsigned char>(rng());
          ck::CopyArgs a;
          a.n = n;
          a.bytes = len;
          // Sources and destinations in reversed block order: a gather/scatter table.
          unsigned char* sbase =
              src.data() + 16 + misalign - (reinterpret_cast<uintptr_t>(src.data()) % 16);
          unsigned char* dbase =
              dst.data() + 16 + misalign - (reinterpret_cast<uintptr_t>(dst.data()) % 16);
          ASSERT_LE(sbase + n * len, src.data() + src.size());
          ASSERT_LE(dbase + n * len, dst.data() + dst.size());
          for (int j = 0; j < n; ++j) {
            a.src[j] = sbase + j * len;
            a.dst[j] = dbase + (n - 1 - j) * len;
          }
          const size_t word = ck::copyWord(a);
          ASSERT_EQ(len % word, 0u);
          if (misalign == 0 && len % 16 == 0) {
            ASSERT_EQ(word, 16u);
          }
          if (misalign == 1) {
            ASSERT_EQ(word, 1u);
          }
          std::vector<unsigned char> want = dst;
          for (int j = 0; j < n; ++j)
            std::memcpy(want.data() + (dbase - dst.data()) + (n - 1 - j) * len, a.src[j], len);
          const auto order = shuffled(nt, rng);
          ck::runCopyOnHost(a, nt, order.data());
          ASSERT_EQ(dst, want) << "misalign " << misalign << " bytes " << len << " n " << n
                               << " grid " << nt;
        }
}
