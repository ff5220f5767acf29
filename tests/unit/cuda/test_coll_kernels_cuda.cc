// test_coll_kernels_cuda.cc — the launches of the device-path kernels
// (kernels/cuda/coll_kernels.cu), CUDA builds only. Argument checks need no GPU; without
// one a launch is a CUDA error, never a crash. With a GPU, one launch of each kernel must
// equal the host run of the same body (the bodies are checked against the reference in
// test_coll_body).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_coll.h"

namespace ck = chorus::kernels;

namespace {

bool haveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(CollKernelsCuda, ArgumentChecksNeedNoDevice) {
  ck::ReduceArgs r;
  r.count = 0;
  EXPECT_EQ(ck::cudaLaunchReduce(r, nullptr), 0) << "count 0 launches nothing";
  r.count = 4;
  r.nsrc = 0;
  EXPECT_EQ(ck::cudaLaunchReduce(r, nullptr), static_cast<int>(cudaErrorInvalidValue));
  r.nsrc = 9;
  EXPECT_EQ(ck::cudaLaunchReduce(r, nullptr), static_cast<int>(cudaErrorInvalidValue));
  r.nsrc = 1;
  r.dst = reinterpret_cast<void*>(uintptr_t{0x1002});  // not float-aligned
  r.src[0] = r.dst;
  EXPECT_EQ(ck::cudaLaunchReduce(r, nullptr), static_cast<int>(cudaErrorInvalidValue));
  r.spec.type = static_cast<chorusDataType_t>(99);
  EXPECT_EQ(ck::cudaLaunchReduce(r, nullptr), static_cast<int>(cudaErrorInvalidValue));
  ck::CopyArgs c;
  EXPECT_EQ(ck::cudaLaunchCopy(c, nullptr), 0) << "nothing to copy";
  c.n = 9;
  c.bytes = 4;
  EXPECT_EQ(ck::cudaLaunchCopy(c, nullptr), static_cast<int>(cudaErrorInvalidValue));
}

TEST(CollKernelsCuda, NoGpuGivesAnErrorNotACrash) {
  if (haveGpu()) GTEST_SKIP() << "a GPU is present";
  std::vector<float> a(64, 1.0f), d(64);
  ck::ReduceArgs r;
  r.dst = d.data();
  r.src[0] = a.data();
  r.nsrc = 1;
  r.count = 64;
  EXPECT_NE(ck::cudaLaunchReduce(r, nullptr), 0);
  ck::CopyArgs c;
  c.n = 1;
  c.bytes = 256;
  c.dst[0] = d.data();
  c.src[0] = a.data();
  EXPECT_NE(ck::cudaLaunchCopy(c, nullptr), 0);
}

TEST(CollKernelsCuda, LaunchesMatchTheHostBodies) {
  if (!haveGpu()) GTEST_SKIP() << "no GPU: the bodies are checked on the host (test_coll_body)";
  const size_t n = 100003;
  std::vector<int32_t> h0(n), h1(n), h2(n), want(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    h0[i] = static_cast<int32_t>(i * 7);
    h1[i] = static_cast<int32_t>(i ^ 0x55);
    h2[i] = -static_cast<int32_t>(i);
  }
  ck::ReduceArgs r;
  r.spec.type = chorusInt32;
  r.spec.kind = ck::ReduceKind::Max;
  r.nsrc = 3;
  r.count = n;
  r.src[0] = h0.data();
  r.src[1] = h1.data();
  r.src[2] = h2.data();
  r.dst = want.data();
  ASSERT_TRUE(ck::runReduceOnHost(r, 1));
  int32_t* d[4];
  for (auto& p : d) ASSERT_EQ(cudaMalloc(&p, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d[0], h0.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d[1], h1.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d[2], h2.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  for (int j = 0; j < 3; ++j) r.src[j] = d[j];
  r.dst = d[3];
  ASSERT_EQ(ck::cudaLaunchReduce(r, nullptr), 0);
  ASSERT_EQ(cudaMemcpy(got.data(), d[3], n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, want);
  ck::CopyArgs c;
  c.n = 1;
  c.bytes = n * 4;
  c.dst[0] = d[3];
  c.src[0] = d[1];
  ASSERT_EQ(ck::cudaLaunchCopy(c, nullptr), 0);
  ASSERT_EQ(cudaMemcpy(got.data(), d[3], n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, h1);
  for (auto p : d) cudaFree(p);
}

}  // namespace
