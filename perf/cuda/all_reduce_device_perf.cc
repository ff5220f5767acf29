// all_reduce_device_perf.cc — float32 sum all-reduce on CUDA device buffers, the way
// nccl-tests' all_reduce_perf measures NCCL: buffers from cudaMalloc, every call on one
// cudaStream_t wrapped by chorusStreamFromCuda, time from the first call to the stream's
// synchronize. Built only with -Dcuda=enabled; BUILT, NOT RUN here (no GPU on our
// machines): it is the program to run, with `meson test --suite gpu`, where one exists.
//
//   chorusrun -np N all_reduce_device_perf [-b 8] [-e 64M] [-f 2] [-n 20] [-w 5] [-g DEV]
//
// Every size is checked once (after its warm-up): rank r contributes r+1 in every element,
// so each element of the result must be N(N+1)/2; #wrong counts the elements that are not.
// Ranks of one host share device DEV (default: local rank modulo the device count).
#include <chorus.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/cuda/size_arg.h"
#include "perf/launch_init.h"

namespace {

// Prints what failed and leaves with status 1 (the launcher stops the other ranks).
#define CUDA_OR_DIE(call)                                                             \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
#define CHORUS_OR_DIE(call)                                                                \
  do {                                                                                     \
    chorusResult_t r_ = (call);                                                            \
    if (r_ != chorusSuccess) {                                                             \
      std::fprintf(stderr, "rank %d: %s: %s: %s\n", rank, #call, chorusGetErrorString(r_), \
                   chorusGetLastError(comm));                                              \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  chorusComm_t comm = nullptr;
  const char* how = "";
  if (perf::launchInit(&comm, &argc, &argv, &how) != chorusSuccess) {
    std::fprintf(stderr, "all_reduce_device_perf: init failed: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  perf::Sweep sweep;
  int device = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "-g")
      device = std::atoi(argv[i + 1]);
    else if (!perf::takeSweepFlag(&sweep, a, argv[i + 1])) {
      std::fprintf(stderr,
                   "usage: all_reduce_device_perf [-b B] [-e B] [-f F] [-n N] [-w N] [-g DEV]\n");
      return 2;
    }
  }
  const size_t minBytes = sweep.minBytes, maxBytes = sweep.maxBytes;
  const int factor = sweep.factor, iters = sweep.iters, warmup = sweep.warmup;
  int n = 0;
  CHORUS_OR_DIE(chorusCommUserRank(comm, &rank));
  CHORUS_OR_DIE(chorusCommCount(comm, &n));
  int ndev = 0;
  CUDA_OR_DIE(cudaGetDeviceCount(&ndev));
  if (device < 0) {
    const char* local = std::getenv("CHORUS_LOCAL_RANK");
    device = (local ? std::atoi(local) : rank) % ndev;
  }
  CUDA_OR_DIE(cudaSetDevice(device));
  cudaStream_t cs;
  CUDA_OR_DIE(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  chorusStream_t stream = nullptr;
  CHORUS_OR_DIE(chorusStreamFromCuda(reinterpret_cast<void*>(cs), &stream));

  const size_t maxCount = maxBytes / sizeof(float);
  float *send = nullptr, *recv = nullptr;
  CUDA_OR_DIE(cudaMalloc(&send, maxCount * sizeof(float)));
  CUDA_OR_DIE(cudaMalloc(&recv, maxCount * sizeof(float)));
  std::vector<float> host(maxCount, static_cast<float>(rank + 1));
  CUDA_OR_DIE(cudaMemcpy(send, host.data(), maxCount * sizeof(float), cudaMemcpyHostToDevice));
  const float expect = static_cast<float>(n) * (n + 1) / 2;

  if (rank == 0) {
    std::printf(
        "# all_reduce_device_perf: %d ranks (%s), float32 sum, device buffers, GPU %d of %d\n", n,
        how, device, ndev);
    std::printf("# %12s %12s %10s %10s %10s %8s\n", "size(B)", "count", "time(us)", "algbw",
                "busbw", "#wrong");
  }
  int wrongTotal = 0;
  for (size_t bytes = minBytes; bytes <= maxBytes && bytes >= sizeof(float);
       bytes = bytes * static_cast<size_t>(factor > 1 ? factor : 2)) {
    const size_t count = bytes / sizeof(float);
    for (int i = 0; i < warmup; ++i)
      CHORUS_OR_DIE(chorusAllReduce(send, recv, count, chorusFloat32, chorusSum, comm, stream));
    CHORUS_OR_DIE(chorusStreamSynchronize(stream));
    // The check: the warm-up's last result, copied back and compared element by element.
    CUDA_OR_DIE(cudaMemcpy(host.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += host[i] != expect;
    wrongTotal += wrong;
    CHORUS_OR_DIE(chorusBarrier(comm, nullptr));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      CHORUS_OR_DIE(chorusAllReduce(send, recv, count, chorusFloat32, chorusSum, comm, stream));
    CHORUS_OR_DIE(chorusStreamSynchronize(stream));
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        iters;
    const double algbw = static_cast<double>(bytes) / us / 1e3;  // GB/s
    const double busbw = algbw * 2.0 * (n - 1) / n;
    if (rank == 0)
      std::printf("  %12zu %12zu %10.2f %10.2f %10.2f %8d\n", bytes, count, us, algbw, busbw,
                  wrong);
  }
  if (rank == 0)
    std::printf("# Out of bounds values : %d %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
  CHORUS_OR_DIE(chorusStreamDestroy(stream));
  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(cs);
  chorusCommDestroy(comm);
  perf::launchFinalize();
  return wrongTotal ? 1 : 0;
}
