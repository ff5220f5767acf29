// allreduce_latency.cc — the distribution of single all-reduce times, not just their mean.
//
//   chorusrun ... allreduce_latency [BYTES [ITERS]]      (defaults: 8 bytes, 1000 calls)
//
// 20 warm-up calls, then ITERS timed chorusAllReduce calls (float32 sum, out-of-place, NULL
// stream), each timed on its own with CLOCK_MONOTONIC. Rank 0 prints one line: mean,
// 10th/50th/90th/99th percentile and worst call in microseconds. A mean far above the
// median says some calls stalled (a sleep nobody woke, a thread waiting to be scheduled);
// perf/compare_tcp.sh's sweeps only show means. perf/tcp_breakdown.sh wraps it in perf stat.
#include <chorus.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "perf/launch_init.h"

namespace {
double nowUs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}
}  // namespace

int main(int argc, char** argv) {
  chorusComm_t comm = nullptr;
  const char* how = "";
  if (perf::launchInit(&comm, &argc, &argv, &how) != chorusSuccess) {
    std::fprintf(stderr, "allreduce_latency: init failed: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : 8;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 1000;
  if (bytes < 4 || iters < 1) {
    std::fprintf(stderr, "allreduce_latency: BYTES >= 4 and ITERS >= 1, please\n");
    return 2;
  }
  int rank = 0;
  chorusCommUserRank(comm, &rank);
  const size_t n = bytes / 4;
  std::vector<float> in(n, 1.0f), out(n);
  std::vector<double> t(static_cast<size_t>(iters));
  for (int i = -20; i < iters; ++i) {
    const double s = nowUs();
    if (chorusAllReduce(in.data(), out.data(), n, chorusFloat32, chorusSum, comm, nullptr) !=
        chorusSuccess) {
      std::fprintf(stderr, "rank %d: all-reduce failed: %s\n", rank, chorusGetLastError(comm));
      return 1;
    }
    if (i >= 0) t[static_cast<size_t>(i)] = nowUs() - s;
  }
  double sum = 0;
  for (double x : t) sum += x;
  std::sort(t.begin(), t.end());
  auto pct = [&](int p) { return t[static_cast<size_t>(iters) * static_cast<size_t>(p) / 100]; };
  if (rank == 0)
    std::printf("bytes %zu iters %d mean %.1f p10 %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f\n",
                bytes, iters, sum / iters, pct(10), pct(50), pct(90), pct(99), t.back());
  chorusCommDestroy(comm);
  perf::launchFinalize();
  return 0;
}
