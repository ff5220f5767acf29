// test_no_gpu.cc — a process without a usable GPU (this machine, in both the CUDA-enabled
// and the host-only build; or CHORUS_CUDA_DISABLE=1) gets chorusInvalidUsage with a
// message naming the cause for a CUDA stream or a device-like pointer, and never crashes.
// Public API only. On a machine with a usable GPU it reports SKIPPED (exit 77): this test
// is about its absence, tests/gpu covers the rest.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "chorus.h"

namespace {

const bool kCudaBuild = CHORUS_TEST_CUDA_BUILD != 0;
bool disabledByEnv() {
  const char* v = std::getenv("CHORUS_CUDA_DISABLE");
  return v && std::string(v) == "1";
}

bool has(const std::string& s, const char* word) { return s.find(word) != std::string::npos; }

// The reason a GPU cannot be used, as the message must name it.
void expectCause(const std::string& msg) {
  if (!kCudaBuild)
    EXPECT_TRUE(has(msg, "no CUDA support")) << msg;
  else if (disabledByEnv())
    EXPECT_TRUE(has(msg, "CHORUS_CUDA_DISABLE=1")) << msg;
  else
    EXPECT_TRUE(has(msg, "cudaGetDeviceCount")) << msg;
}

class NoGpu : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(chorusCommInitAll(&comm_, 1, nullptr), chorusSuccess); }
  void TearDown() override { EXPECT_EQ(chorusCommDestroy(comm_), chorusSuccess); }
  chorusComm_t comm_ = nullptr;
};

}  // namespace

TEST_F(NoGpu, StreamFromCudaIsRefused) {
  alignas(64) static unsigned char fakeCudaStream[256];
  for (void* cs : {static_cast<void*>(nullptr), static_cast<void*>(fakeCudaStream)}) {
    chorusStream_t s = reinterpret_cast<chorusStream_t>(0x10);
    EXPECT_EQ(chorusStreamFromCuda(cs, &s), chorusInvalidUsage);
    EXPECT_EQ(s, nullptr);
    const std::string msg = chorusGetLastError(nullptr);
    EXPECT_TRUE(has(msg, "no GPU can be used")) << msg;
    expectCause(msg);
  }
}

TEST_F(NoGpu, DisabledStreamFromCudaIsRefused) {
  ASSERT_TRUE(disabledByEnv()) << "run by meson with CHORUS_CUDA_DISABLE=1";
  chorusStream_t s = nullptr;
  EXPECT_EQ(chorusStreamFromCuda(nullptr, &s), chorusInvalidUsage);
  expectCause(chorusGetLastError(nullptr));
}

// What a device pointer looks like to a process without a GPU: an address it cannot read
// (reserved without access, as CUDA's unified address space is) or one not mapped at all.
TEST_F(NoGpu, DevicePointerIsRefused) {
  const size_t len = 4 * size_t(sysconf(_SC_PAGESIZE));
  void* reserved = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(reserved, MAP_FAILED);
  void* hole = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  munmap(hole, len);
  static float host[256];
  for (void* dev : {reserved, hole}) {
    EXPECT_EQ(chorusAllReduce(dev, host, 256, chorusFloat32, chorusSum, comm_, nullptr),
              chorusInvalidUsage);
    std::string msg = chorusGetLastError(comm_);
    EXPECT_TRUE(has(msg, "sendbuff")) << msg;
    EXPECT_TRUE(has(msg, "no GPU can be used")) << msg;
    expectCause(msg);
    EXPECT_EQ(chorusBroadcast(host, dev, 256, chorusFloat32, 0, comm_, nullptr),
              chorusInvalidUsage);
    msg = chorusGetLastError(comm_);
    EXPECT_TRUE(has(msg, "recvbuff")) << msg;
    expectCause(msg);
  }
  munmap(reserved, len);
  // The communicator is still fine.
  static float a[4] = {1, 2, 3, 4}, b[4];
  EXPECT_EQ(chorusAllReduce(a, b, 4, chorusFloat32, chorusSum, comm_, nullptr), chorusSuccess);
  EXPECT_EQ(b[3], 4.0f);
}

// Raw CUDA stream handles where a chorusStream_t belongs: cudaStreamLegacy (0x1),
// cudaStreamPerThread (0x2), and a cudaStream_t-like object: refused, never dereferenced
// as a Chorus stream.
TEST_F(NoGpu, RawCudaStreamIsRefused) {
  static float a[4], b[4];
  alignas(64) static unsigned char fake[256];
  for (uintptr_t h : {uintptr_t{1}, uintptr_t{2}, reinterpret_cast<uintptr_t>(fake)}) {
    const auto s = reinterpret_cast<chorusStream_t>(h);
    EXPECT_EQ(chorusAllReduce(a, b, 4, chorusFloat32, chorusSum, comm_, s), chorusInvalidUsage);
    EXPECT_TRUE(has(chorusGetLastError(comm_), "chorusStreamFromCuda"))
        << chorusGetLastError(comm_);
    EXPECT_EQ(chorusStreamSynchronize(s), chorusInvalidUsage);
    EXPECT_EQ(chorusStreamDestroy(s), chorusInvalidUsage);
  }
}

int main(int argc, char** argv) {
  chorusStream_t s = nullptr;
  if (chorusStreamFromCuda(nullptr, &s) == chorusSuccess) {  // a usable GPU: not our case
    chorusStreamDestroy(s);
    std::printf("SKIPPED: a usable GPU is present; this test is about processes without one\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
