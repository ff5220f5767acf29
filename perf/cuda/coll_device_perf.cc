// coll_device_perf.cc — one collective on CUDA device buffers, swept over sizes, for the
// staging path against the same-host device path (CHORUS_CUDA_PATH=staging|device, read
// by the library; this program only prints it). Built only with -Dcuda=enabled; BUILT, NOT
// RUN here (no GPU on our machines): tools/gpu-check runs it where one is lent.
//
//   chorusrun -np N coll_device_perf -c all_reduce [-b 8] [-e 64M] [-f 2] [-n 20] [-w 5]
//   collectives: all_reduce reduce reduce_scatter all_gather broadcast gather scatter
//                all_to_all
//
// Sizes are bytes per block (count = bytes / 4 float32 elements). Every size is checked
// once after its warm-up: rank r contributes r+1 everywhere, so every output element is
// known (#wrong counts the others). Rank 0 also prints the GPU's device-to-device
// cudaMemcpy rate at the largest size (the copy engine, measured by this same program).
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

int rank = -1;
chorusComm_t comm = nullptr;

void die(const char* what, const char* why) {
  std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, why);
  std::exit(1);
}
#define CUDA_OR_DIE(call)                                      \
  do {                                                         \
    cudaError_t e_ = (call);                                   \
    if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_)); \
  } while (0)
#define CHORUS_OR_DIE(call)                                        \
  do {                                                             \
    chorusResult_t r_ = (call);                                    \
    if (r_ != chorusSuccess) die(#call, chorusGetLastError(comm)); \
  } while (0)

struct Coll {
  const char* name;
  int sendBlocks, recvBlocks;  // -1: n
  double busFactor;            // times (n - 1) / n, or 1 when negative
};
const Coll kColls[] = {
    {"all_reduce", 1, 1, 2.0},  {"reduce", 1, 1, -1},        {"reduce_scatter", -1, 1, 1.0},
    {"all_gather", 1, -1, 1.0}, {"broadcast", 1, 1, -1},     {"gather", 1, -1, 1.0},
    {"scatter", -1, 1, 1.0},    {"all_to_all", -1, -1, 1.0},
};

chorusResult_t call(const std::string& c, float* s, float* r, size_t count, chorusStream_t st) {
  if (c == "all_reduce") return chorusAllReduce(s, r, count, chorusFloat32, chorusSum, comm, st);
  if (c == "reduce") return chorusReduce(s, r, count, chorusFloat32, chorusSum, 0, comm, st);
  if (c == "reduce_scatter")
    return chorusReduceScatter(s, r, count, chorusFloat32, chorusSum, comm, st);
  if (c == "all_gather") return chorusAllGather(s, r, count, chorusFloat32, comm, st);
  if (c == "broadcast") return chorusBroadcast(s, r, count, chorusFloat32, 0, comm, st);
  if (c == "gather") return chorusGather(s, r, count, chorusFloat32, 0, comm, st);
  if (c == "scatter") return chorusScatter(s, r, count, chorusFloat32, 0, comm, st);
  return chorusAllToAll(s, r, count, chorusFloat32, comm, st);
}

// The expected value of output block b, or a negative number where nothing is defined.
float expected(const std::string& c, int n, int b) {
  const float sum = static_cast<float>(n) * (n + 1) / 2;
  if (c == "all_reduce" || c == "reduce_scatter") return sum;
  if (c == "reduce") return rank == 0 ? sum : -1;
  if (c == "broadcast" || c == "scatter") return 1.0f;
  if (c == "gather") return rank == 0 ? static_cast<float>(b + 1) : -1;
  return static_cast<float>(b + 1);  // all_gather, all_to_all
}

}  // namespace

int main(int argc, char** argv) {
  const char* how = "";
  if (perf::launchInit(&comm, &argc, &argv, &how) != chorusSuccess) {
    std::fprintf(stderr, "coll_device_perf: init failed: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  std::string coll = "all_reduce";
  perf::Sweep sweep;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "-c")
      coll = argv[i + 1];
    else if (!perf::takeSweepFlag(&sweep, a, argv[i + 1])) {
      std::fprintf(stderr, "usage: coll_device_perf -c COLL [-b B] [-e B] [-f F] [-n N] [-w N]\n");
      return 2;
    }
  }
  const size_t minBytes = sweep.minBytes, maxBytes = sweep.maxBytes;
  const int factor = sweep.factor, iters = sweep.iters, warmup = sweep.warmup;
  const Coll* desc = nullptr;
  for (const Coll& c : kColls)
    if (coll == c.name) desc = &c;
  if (!desc) die("-c", "unknown collective");
  int n = 0;
  CHORUS_OR_DIE(chorusCommUserRank(comm, &rank));
  CHORUS_OR_DIE(chorusCommCount(comm, &n));
  int ndev = 0;
  CUDA_OR_DIE(cudaGetDeviceCount(&ndev));
  const char* local = std::getenv("CHORUS_LOCAL_RANK");
  const int device = (local ? std::atoi(local) : rank) % ndev;
  CUDA_OR_DIE(cudaSetDevice(device));
  cudaStream_t cs;
  CUDA_OR_DIE(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  chorusStream_t stream = nullptr;
  CHORUS_OR_DIE(chorusStreamFromCuda(reinterpret_cast<void*>(cs), &stream));

  const int sb = desc->sendBlocks < 0 ? n : desc->sendBlocks;
  const int rb = desc->recvBlocks < 0 ? n : desc->recvBlocks;
  const size_t maxCount = maxBytes / sizeof(float);
  float *send = nullptr, *recv = nullptr;
  CUDA_OR_DIE(cudaMalloc(&send, maxCount * sb * sizeof(float)));
  CUDA_OR_DIE(cudaMalloc(&recv, maxCount * rb * sizeof(float)));
  std::vector<float> host(maxCount * (sb > rb ? sb : rb), static_cast<float>(rank + 1));
  CUDA_OR_DIE(cudaMemcpy(send, host.data(), maxCount * sb * sizeof(float), cudaMemcpyHostToDevice));
  const char* path = std::getenv("CHORUS_CUDA_PATH");
  if (rank == 0) {
    std::printf("# coll_device_perf: %s, %d ranks (%s), float32, device buffers, path %s\n",
                coll.c_str(), n, how, path ? path : "auto");
    std::printf("# %12s %12s %10s %10s %10s %8s\n", "size(B)", "count", "time(us)", "algbw",
                "busbw", "#wrong");
  }
  int wrongTotal = 0;
  for (size_t bytes = minBytes; bytes <= maxBytes && bytes >= sizeof(float);
       bytes *= static_cast<size_t>(factor > 1 ? factor : 2)) {
    const size_t count = bytes / sizeof(float);
    for (int i = 0; i < warmup; ++i) CHORUS_OR_DIE(call(coll, send, recv, count, stream));
    CHORUS_OR_DIE(chorusStreamSynchronize(stream));
    CUDA_OR_DIE(cudaMemcpy(host.data(), recv, count * rb * sizeof(float), cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int b = 0; b < rb; ++b) {
      const float want = expected(coll, n, b);
      if (want < 0) continue;
      for (size_t i = 0; i < count; ++i) wrong += host[b * count + i] != want;
    }
    wrongTotal += wrong;
    CHORUS_OR_DIE(chorusBarrier(comm, nullptr));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) CHORUS_OR_DIE(call(coll, send, recv, count, stream));
    CHORUS_OR_DIE(chorusStreamSynchronize(stream));
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        iters;
    const double algbw = static_cast<double>(bytes) / us / 1e3;  // GB/s
    const double busbw = desc->busFactor < 0 ? algbw : algbw * desc->busFactor * (n - 1) / n;
    if (rank == 0)
      std::printf("  %12zu %12zu %10.2f %10.2f %10.2f %8d\n", bytes, count, us, algbw, busbw,
                  wrong);
  }
  if (rank == 0) {
    // The copy engine's device-to-device rate at the largest size, for comparison.
    cudaEvent_t a, b;
    CUDA_OR_DIE(cudaEventCreate(&a));
    CUDA_OR_DIE(cudaEventCreate(&b));
    CUDA_OR_DIE(cudaEventRecord(a, cs));
    for (int i = 0; i < iters; ++i)
      CUDA_OR_DIE(
          cudaMemcpyAsync(recv, send, maxCount * sizeof(float), cudaMemcpyDeviceToDevice, cs));
    CUDA_OR_DIE(cudaEventRecord(b, cs));
    CUDA_OR_DIE(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_OR_DIE(cudaEventElapsedTime(&ms, a, b));
    std::printf("# copy engine: cudaMemcpy device-to-device %zu B: %.2f GB/s\n",
                maxCount * sizeof(float), maxCount * sizeof(float) * iters / (ms * 1e6));
    std::printf("# Out of bounds values : %d %s\n", wrongTotal, wrongTotal ? "FAILED" : "OK");
  }
  CHORUS_OR_DIE(chorusStreamDestroy(stream));
  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(cs);
  chorusCommDestroy(comm);
  perf::launchFinalize();
  return wrongTotal ? 1 : 0;
}
