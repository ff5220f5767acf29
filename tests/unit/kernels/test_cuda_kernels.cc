// test_cuda_kernels.cc — cudaReduce() (built with -Dcuda=enabled). Without a GPU it must
// fail cleanly; with one, its results must equal the host kernels' bit for bit (the host
// kernels are checked against the independent reference in test_reduce.cc).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_reduce.h"
#include "kernels/host/host_reduce.h"
#include "tests/unit/kernels/reference.h"

namespace ck = chorus::kernels;

namespace {

bool haveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(KernelsCuda, ArgumentChecksNeedNoDevice) {
  ck::ReduceSpec spec;  // float32 sum
  EXPECT_EQ(ck::cudaReduce(spec, nullptr, nullptr, nullptr, 0, 0, nullptr), 0)
      << "count 0 is a no-op";
  // A pointer that is not float-aligned is refused before anything reaches a device.
  auto* odd = reinterpret_cast<void*>(uintptr_t{0x1001});
  EXPECT_EQ(ck::cudaReduce(spec, odd, nullptr, odd, 4, 0, nullptr),
            static_cast<int>(cudaErrorInvalidValue));
  spec.type = static_cast<chorusDataType_t>(99);
  EXPECT_EQ(ck::cudaReduce(spec, odd, nullptr, odd, 4, 0, nullptr),
            static_cast<int>(cudaErrorInvalidValue));
}

TEST(KernelsCuda, NoGpuGivesAnErrorNotACrash) {
  if (haveGpu()) GTEST_SKIP() << "a GPU is present";
  std::vector<float> a(64, 1.0f), d(64);
  ck::ReduceSpec spec;
  const int rc = ck::cudaReduce(spec, d.data(), a.data(), a.data(), a.size(), 0, nullptr);
  EXPECT_NE(rc, 0) << "launch without a device must report an error";
  (void)cudaGetLastError();
}

TEST(KernelsCuda, MatchesHostKernels) {
  if (!haveGpu()) GTEST_SKIP() << "no GPU";
  const chorusDataType_t types[] = {chorusInt8,    chorusUint8,   chorusInt32,   chorusUint32,
                                    chorusInt64,   chorusUint64,  chorusFloat16, chorusFloat32,
                                    chorusFloat64, chorusBfloat16};
  std::mt19937_64 rng(5);
  const size_t n = 100003;
  for (chorusDataType_t t : types)
    for (int k = 0; k < 4; ++k)
      for (unsigned flags : {0u, unsigned{ck::kApplyPre}, unsigned{ck::kApplyPost}}) {
        if (flags == ck::kApplyPre && k != 0) continue;
        const size_t s = ref::size(t), bytes = n * s;
        std::vector<unsigned char> a(bytes), l(bytes), want(bytes), got(bytes);
        for (auto& b : a) b = static_cast<unsigned char>(rng());
        for (auto& b : l) b = static_cast<unsigned char>(rng());
        ck::ReduceSpec spec;
        spec.type = t;
        spec.kind = static_cast<ck::ReduceKind>(k);
        spec.preMul = true;
        std::memcpy(spec.scalar, l.data() + 8 * s, s);
        spec.postDiv = 3;
        ck::reduce(spec, want.data(), a.data(), l.data(), n, flags);
        void *da = nullptr, *dl = nullptr, *dd = nullptr;
        ASSERT_EQ(cudaMalloc(&da, bytes), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dl, bytes), cudaSuccess);
        ASSERT_EQ(cudaMalloc(&dd, bytes), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dl, l.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(ck::cudaReduce(spec, dd, da, dl, n, flags, nullptr), 0);
        ASSERT_EQ(cudaMemcpy(got.data(), dd, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        cudaFree(da);
        cudaFree(dl);
        cudaFree(dd);
        for (size_t i = 0; i < n; ++i) {
          ref::Bits g = 0, w = 0;
          std::memcpy(&g, got.data() + i * s, s);
          std::memcpy(&w, want.data() + i * s, s);
          ASSERT_TRUE(ref::same(t, g, w))
              << "type " << t << " kind " << k << " flags " << flags << " i " << i << ": gpu "
              << ref::show(t, g) << " host " << ref::show(t, w);
        }
      }
}

}  // namespace
