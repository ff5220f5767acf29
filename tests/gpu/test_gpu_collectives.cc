// test_gpu_collectives.cc — suite 'gpu': every collective x type x op on real device
// buffers (cudaMalloc) with 1..4 ranks on GPU 0, each rank with its own CUDA stream,
// checked against the independent reference (tests/unit/cuda/coll_matrix.*). Also a
// 64 MiB all-reduce split into many pieces. Without a usable GPU, or in a build without
// CUDA, it reports SKIPPED (exit 77) with the reason; it never passes without running.
#include <cstdio>
#include <string>
#include <vector>

#include "chorus.h"
#include "tests/unit/cuda/coll_matrix.h"

#if CHORUS_TEST_CUDA_BUILD
#include <cuda_runtime.h>

namespace {

class CudaEnv final : public collmatrix::DeviceEnv {
 public:
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
  }
  void free(void* p) override { cudaFree(p); }
  void* newStream() override {
    cudaSetDevice(0);
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }
  void deleteStream(void* s) override { cudaStreamDestroy(static_cast<cudaStream_t>(s)); }
  void upload(void* dev, const void* host, size_t bytes, void* s) override {
    cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(s));
  }
  void download(void* host, const void* dev, size_t bytes, void* s) override {
    cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(s));
  }
  chorusResult_t wrap(void* stream, chorusStream_t* out) override {
    return chorusStreamFromCuda(stream, out);
  }
};

}  // namespace

int main() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIPPED: no usable GPU (cudaGetDeviceCount: %s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  CudaEnv env;
  int failures = 0;
  for (size_t count : {size_t{1000}, size_t{1} << 20}) {  // 1 piece / many pieces of 4 MiB
    collmatrix::Options opt;
    opt.count = count;
    opt.allTypesAndOps = count < 10000;  // the large run: float32 and int8, sum and avg
    const auto errs = collmatrix::run(env, opt);
    for (const auto& l : errs) std::printf("WRONG: %s\n", l.c_str());
    failures += static_cast<int>(errs.size());
    std::printf("count %zu: %s\n", count, errs.empty() ? "all collectives correct" : "FAILED");
  }
  return failures == 0 ? 0 : 1;
}

#else

int main() {
  std::printf("SKIPPED: this build has no CUDA (configure with -Dcuda=enabled and a GPU)\n");
  return 77;
}

#endif
