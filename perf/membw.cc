// chorus_membw — the machine's copy and reduce rates, for the "floor" in docs/PERF.md.
//
// For each size S prints, in GB/s (1e9 B/s, best of several repetitions):
//   copy     memcpy of S bytes on one core                      (bytes per second)
//   reduce   c[i] = a[i] + b[i] over S bytes of float, one core (output bytes per second)
//            (both: the better of ordinary and streaming stores; streaming stores skip
//            the read-for-ownership and win once S is well beyond the caches)
//   xcopy    as copy, but the source was just written by a thread on another core
//   xreduce  as reduce, with a[] just written by a thread on another core
// The x columns are what a rank pays for data a peer produced: the lines must move
// between the cores' caches (or come back from memory) before they can be used.
// All in GB/s. Usage: chorus_membw [size ...]   (K/M/G suffixes; default 8K .. 256M, factor 2)
//
// chorus_membw --floor [size ...] prints the all-reduce floor for two ranks instead, with its
// inputs (docs/PERF.md "the floor"):
//   copy reduce xcopy xreduce   the rates above
//   formula   busbw of (S/2 reduced + S/2 copied) at the slower of the one-core and
//             cross-core rates: the harmonic mean of min(reduce, xreduce) and
//             min(copy, xcopy). It assumes one core alone on S-byte buffers, with the
//             whole cache and memory bandwidth to itself.
//   ideal     busbw of the ideal single-copy all-reduce actually run on two threads pinned
//             to the two CPUs at once: each owns an input and an output of S bytes; thread
//             q reduces share q from both inputs into its output, then copies the other
//             share from the peer's output (no staging, no library), piece by piece with a
//             flag per piece so the copy follows the peer's reduce; the best over pieces
//             (64 KiB, 256 KiB, 1 MiB, whole share) and store kinds (ordinary, streaming).
//             It counts what the formula leaves out: both cores at work at once on 4 S
//             bytes of buffers (sharing the L3 and the memory bandwidth) and a barrier per
//             call.
//   floor     the lower of the two: the busbw no design can beat on this machine.
//
// chorus_membw --cma [size ...] prints memcpy against the kernel's cross-process copy
// (process_vm_readv, CMA), with 4 KiB pages and with transparent huge pages (membw_cma.cc).
//
// chorus_membw --pingpong prints instead the round trip of one cache line between two
// threads on the first two CPUs this process may run on (median of 15 batches, ns): on a
// VM it tells how far apart the host placed the vCPUs, which moves every shared-memory
// figure (docs/PERF.md "Slow and fast windows"); tools/perf-rounds records it every round.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "perf/membw_cma.h"

namespace {

double now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Compiled for each ISA level; the loader picks the best one this CPU runs.
__attribute__((target_clones("avx512f", "avx2", "default"), noinline)) void addFloats(
    float* __restrict c, const float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

// Streaming-store variants (SSE, every x86-64). c must be 16-byte aligned.
void copyFloatsNT(float* __restrict c, const float* __restrict a, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128 x0 = _mm_loadu_ps(a + i), x1 = _mm_loadu_ps(a + i + 4);
    __m128 x2 = _mm_loadu_ps(a + i + 8), x3 = _mm_loadu_ps(a + i + 12);
    _mm_stream_ps(c + i, x0);
    _mm_stream_ps(c + i + 4, x1);
    _mm_stream_ps(c + i + 8, x2);
    _mm_stream_ps(c + i + 12, x3);
  }
  for (; i < n; ++i) c[i] = a[i];
  _mm_sfence();
}

void addFloatsNT(float* __restrict c, const float* __restrict a, const float* __restrict b,
                 size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_stream_ps(c + i, _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
    _mm_stream_ps(c + i + 4, _mm_add_ps(_mm_loadu_ps(a + i + 4), _mm_loadu_ps(b + i + 4)));
  }
  for (; i < n; ++i) c[i] = a[i] + b[i];
  _mm_sfence();
}

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = strtod(s, &end);
  switch (*end) {
    case 'G':
    case 'g': v *= 1024.0 * 1024 * 1024; break;
    case 'M':
    case 'm': v *= 1024.0 * 1024; break;
    case 'K':
    case 'k': v *= 1024.0; break;
    default: break;
  }
  return static_cast<size_t>(v);
}

// Best rate over repetitions sized to ~0.1 s of work in total.
template <typename F>
double bestRate(size_t bytes, F&& fn) {
  fn();  // first touch / warm
  int reps = static_cast<int>(std::min<size_t>(2000, std::max<size_t>(3, (200u << 20) / bytes)));
  double best = 1e30;
  for (int rr = 0; rr < 5; ++rr) {
    double t0 = now();
    for (int i = 0; i < reps; ++i) fn();
    best = std::min(best, (now() - t0) / reps);
  }
  return static_cast<double>(bytes) / best / 1e9;
}

void pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// Best time of `fn` (run on this thread, pinned to cpu b) right after a thread pinned to
// cpu a rewrote src: the cross-core cost of consuming a peer's fresh data.
template <typename F>
double crossRate(size_t bytes, float* src, int a, int b, F&& fn) {
  int reps = static_cast<int>(std::min<size_t>(400, std::max<size_t>(5, (400u << 20) / bytes)));
  std::atomic<int> turn{0};  // even: writer's turn, odd: reader's turn
  std::atomic<bool> stop{false};
  const size_t n = bytes / sizeof(float);
  std::thread writer([&] {
    pinTo(a);
    float v = 1.0f;
    for (int r = 0;; ++r) {
      while (turn.load(std::memory_order_acquire) != 2 * r)
        if (stop.load(std::memory_order_relaxed)) return;
      for (size_t i = 0; i < n; ++i) src[i] = v;
      v += 1.0f;
      turn.store(2 * r + 1, std::memory_order_release);
    }
  });
  pinTo(b);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    while (turn.load(std::memory_order_acquire) != 2 * r + 1) {
    }
    double t0 = now();
    fn();
    best = std::min(best, now() - t0);
    turn.store(2 * r + 2, std::memory_order_release);
  }
  while (turn.load(std::memory_order_acquire) != 2 * reps) {
  }
  stop.store(true);
  writer.join();
  return static_cast<double>(bytes) / best / 1e9;
}

// One cache line bounced between a thread on cpu a and this thread on cpu b: the median of
// 15 batches of 20000 round trips, in ns.
double pingPongNs(int a, int b) {
  alignas(64) static std::atomic<long> ping{0};
  alignas(64) static std::atomic<long> pong{0};
  constexpr long kTrips = 20000;
  constexpr int kBatches = 15;
  ping.store(0);
  pong.store(0);
  std::thread other([&] {
    pinTo(a);
    for (long i = 1; i <= kTrips * kBatches; ++i) {
      while (ping.load(std::memory_order_acquire) != i) {
      }
      pong.store(i, std::memory_order_release);
    }
  });
  pinTo(b);
  std::vector<double> ns;
  long i = 0;
  for (int k = 0; k < kBatches; ++k) {
    const double t0 = now();
    for (long j = 0; j < kTrips; ++j) {
      ++i;
      ping.store(i, std::memory_order_release);
      while (pong.load(std::memory_order_acquire) != i) {
      }
    }
    ns.push_back((now() - t0) * 1e9 / kTrips);
  }
  other.join();
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

std::vector<int> twoCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// The ideal two-rank all-reduce of `bytes` on two threads pinned to cpus a and b; busbw in
// GB/s (S / t for two ranks), best of several batches. See the file comment ("ideal").
struct IdealRun {
  size_t bytes, piece;
  bool stream;
};

double idealAllReduce(const IdealRun& run, float* in[2], float* out[2], int cpus[2]) {
  const size_t n = run.bytes / sizeof(float), half = n / 2;
  const size_t pieceN = std::max<size_t>(16, std::min(half, run.piece / sizeof(float)));
  const size_t npieces = (half + pieceN - 1) / pieceN;
  const int reps =
      static_cast<int>(std::min<size_t>(2000, std::max<size_t>(5, (200u << 20) / run.bytes)));
  constexpr int kBatches = 9;
  // done[q]: pieces of share q reduced in this call (64-byte lines of their own); the call
  // number is in the high bits so no reset is needed between calls.
  struct alignas(64) Flag {
    std::atomic<uint64_t> v{0};
  };
  Flag done[2];
  Flag arrive[2];
  std::vector<double> best(1, 1e30);
  auto body = [&](int q) {
    pinTo(cpus[q]);
    const size_t mine = static_cast<size_t>(q) * half, other = static_cast<size_t>(1 - q) * half;
    const size_t shareN[2] = {half, n - half};
    uint64_t call = 0;
    for (int bt = 0; bt < kBatches; ++bt) {
      double t0 = 0;
      for (int r = 0; r < reps + 1; ++r) {  // the first call of each batch warms, untimed
        ++call;
        // Barrier: both threads start a call together (the peer has finished reading our
        // output of the call before).
        arrive[q].v.store(call, std::memory_order_release);
        while (arrive[1 - q].v.load(std::memory_order_acquire) < call) {
        }
        if (r == 1 && q == 0) t0 = now();
        const uint64_t base = (call << 20);
        const size_t myN = shareN[q], peerN = shareN[1 - q];
        for (size_t k = 0; k < npieces; ++k) {
          const size_t o = k * pieceN;
          if (o < myN) {
            const size_t c = std::min(pieceN, myN - o);
            if (run.stream)
              addFloatsNT(out[q] + mine + o, in[0] + mine + o, in[1] + mine + o, c);
            else
              addFloats(out[q] + mine + o, in[0] + mine + o, in[1] + mine + o, c);
          }
          done[q].v.store(base + k + 1, std::memory_order_release);
          if (o < peerN) {
            const size_t c = std::min(pieceN, peerN - o);
            while (done[1 - q].v.load(std::memory_order_acquire) < base + k + 1) {
            }
            if (run.stream)
              copyFloatsNT(out[q] + other + o, out[1 - q] + other + o, c);
            else
              memcpy(out[q] + other + o, out[1 - q] + other + o, c * sizeof(float));
          }
        }
      }
      // Both finished the batch's last call: meet once more, then thread 0 reads the clock.
      ++call;
      arrive[q].v.store(call, std::memory_order_release);
      while (arrive[1 - q].v.load(std::memory_order_acquire) < call) {
      }
      if (q == 0) best[0] = std::min(best[0], (now() - t0) / reps);
    }
  };
  std::thread peer(body, 1);
  body(0);
  peer.join();
  return static_cast<double>(run.bytes) / best[0] / 1e9;
}

int floorMain(std::vector<size_t> sizes) {
  const std::vector<int> cpus = twoCpus();
  if (cpus.size() < 2) {
    fprintf(stderr, "chorus_membw --floor: needs two CPUs\n");
    return 2;
  }
  if (sizes.empty())
    for (size_t s = 1u << 20; s <= (128u << 20); s *= 2) sizes.push_back(s);
  const size_t maxBytes = *std::max_element(sizes.begin(), sizes.end());
  const size_t n = (maxBytes + sizeof(float) - 1) / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f), peerBuf(n, 3.0f);
  // The ideal run's buffers, each first touched by the thread that owns it.
  float* in[2] = {nullptr, nullptr};
  float* out[2] = {nullptr, nullptr};
  int pin[2] = {cpus[0], cpus[1]};
  for (int q = 0; q < 2; ++q) {
    std::thread t([&, q] {
      pinTo(pin[q]);
      in[q] = static_cast<float*>(aligned_alloc(4096, (n * sizeof(float) + 4095) & ~4095ul));
      out[q] = static_cast<float*>(aligned_alloc(4096, (n * sizeof(float) + 4095) & ~4095ul));
      for (size_t i = 0; i < n; ++i) in[q][i] = static_cast<float>(q + 1), out[q][i] = 0.0f;
    });
    t.join();
  }
  printf("# two ranks on cpus %d and %d; GB/s; floor = min(formula, ideal) as busbw\n", cpus[0],
         cpus[1]);
  printf("# %12s  %8s  %8s  %8s  %8s  %8s  %8s  %8s  %s\n", "size(B)", "copy", "reduce", "xcopy",
         "xreduce", "formula", "ideal", "floor", "ideal's best piece/stores");
  for (size_t s : sizes) {
    const size_t cnt = s / sizeof(float);
    if (cnt < 64) continue;
    const size_t bytes = cnt * sizeof(float);
    const double copy = std::max(bestRate(bytes, [&] { memcpy(c.data(), a.data(), bytes); }),
                                 bestRate(bytes, [&] { copyFloatsNT(c.data(), a.data(), cnt); }));
    const double red =
        std::max(bestRate(bytes, [&] { addFloats(c.data(), a.data(), b.data(), cnt); }),
                 bestRate(bytes, [&] { addFloatsNT(c.data(), a.data(), b.data(), cnt); }));
    const double xcopy = crossRate(bytes, peerBuf.data(), cpus[0], cpus[1],
                                   [&] { memcpy(c.data(), peerBuf.data(), bytes); });
    const double xred = crossRate(bytes, peerBuf.data(), cpus[0], cpus[1],
                                  [&] { addFloats(c.data(), peerBuf.data(), b.data(), cnt); });
    const double r = std::min(red, xred), cp = std::min(copy, xcopy);
    const double formula = 2.0 / (1.0 / r + 1.0 / cp);
    double ideal = 0;
    char how[64] = "";
    for (size_t piece : {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20, bytes / 2}) {
      if (piece > bytes / 2) continue;
      for (bool stream : {false, true}) {
        const double bw = idealAllReduce(IdealRun{bytes, piece, stream}, in, out, pin);
        if (bw > ideal) {
          ideal = bw;
          snprintf(how, sizeof how, "%zu KiB %s", piece >> 10, stream ? "streaming" : "ordinary");
        }
      }
    }
    printf("  %12zu  %8.2f  %8.2f  %8.2f  %8.2f  %8.2f  %8.2f  %8.2f  %s\n", bytes, copy, red,
           xcopy, xred, formula, ideal, std::min(formula, ideal), how);
    fflush(stdout);
  }
  for (int q = 0; q < 2; ++q) free(in[q]), free(out[q]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "--floor") == 0) {
    std::vector<size_t> sizes;
    for (int i = 2; i < argc; ++i) sizes.push_back(parseSize(argv[i]));
    return floorMain(sizes);
  }
  if (argc >= 2 && strcmp(argv[1], "--cma") == 0) {
    std::vector<size_t> sizes;
    for (int i = 2; i < argc; ++i) sizes.push_back(parseSize(argv[i]));
    return cmaMain(sizes);
  }
  if (argc == 2 && strcmp(argv[1], "--pingpong") == 0) {
    const std::vector<int> cpus = twoCpus();
    if (cpus.size() < 2) {
      fprintf(stderr, "chorus_membw --pingpong: needs two CPUs\n");
      return 2;
    }
    printf("cpu %d <-> cpu %d cache-line round trip: %.0f ns\n", cpus[0], cpus[1],
           pingPongNs(cpus[0], cpus[1]));
    return 0;
  }
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(parseSize(argv[i]));
  if (sizes.empty())
    for (size_t s = 8u << 10; s <= (256u << 20); s *= 2) sizes.push_back(s);
  size_t maxBytes = *std::max_element(sizes.begin(), sizes.end());
  size_t n = (maxBytes + sizeof(float) - 1) / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  // Two CPUs this process may run on, for the cross-core columns.
  const std::vector<int> cpus = twoCpus();
  const bool cross = cpus.size() >= 2;
  std::vector<float> peer(cross ? n : 0, 3.0f);
  printf("# %12s  %10s  %10s  %10s  %10s\n", "size(B)", "copy", "reduce", "xcopy", "xreduce");
  for (size_t s : sizes) {
    size_t cnt = s / sizeof(float);
    if (cnt == 0) continue;
    const size_t bytes = cnt * sizeof(float);
    double copy = std::max(bestRate(bytes, [&] { memcpy(c.data(), a.data(), bytes); }),
                           bestRate(bytes, [&] { copyFloatsNT(c.data(), a.data(), cnt); }));
    double red = std::max(bestRate(bytes, [&] { addFloats(c.data(), a.data(), b.data(), cnt); }),
                          bestRate(bytes, [&] { addFloatsNT(c.data(), a.data(), b.data(), cnt); }));
    double xcopy = 0, xred = 0;
    if (cross) {
      xcopy = crossRate(cnt * sizeof(float), peer.data(), cpus[0], cpus[1],
                        [&] { memcpy(c.data(), peer.data(), cnt * sizeof(float)); });
      xred = crossRate(cnt * sizeof(float), peer.data(), cpus[0], cpus[1],
                       [&] { addFloats(c.data(), peer.data(), b.data(), cnt); });
    }
    printf("  %12zu  %10.2f  %10.2f  %10.2f  %10.2f\n", cnt * sizeof(float), copy, red, xcopy,
           xred);
    fflush(stdout);
  }
  return 0;
}
