// coll_latency.h — the shared half of coll_latency (Chorus) and coll_latency_mpi (Open MPI):
// per-call times of one collective, their percentiles, and one checked call.
//
//   chorusrun -np N coll_latency COLL BYTES [ITERS]
//   mpirun -np N coll_latency_mpi COLL BYTES [ITERS]
//
// COLL: all_gather, alltoall, reduce_scatter or broadcast (root 0); BYTES: the larger of a
// rank's send and receive buffers, as the nccl-tests-style sweeps count it (all-gather: the
// whole output; all-to-all and reduce-scatter: the whole input; broadcast: the message);
// ITERS timed calls (default 5000) after ITERS/10 + 5 warm-up calls, float32, out of place.
// Each call is timed on its own (CLOCK_MONOTONIC) on every rank; rank 0 prints min, p5, p25,
// p50, p90, p99, max and mean in microseconds. The sweeps print the mean of a timed loop,
// which one descheduled rank can move by milliseconds; the median and the low percentiles
// say what a call costs when both ranks run, the tail and the mean what the machine added.
// After the timed calls one call on fresh data is checked against values computed here
// (every rank checks its own output; "wrong" sums the bad elements; status 1 if any;
// CHORUS_PERF_INJECT_ERROR=1 spoils one element first, to show the check can fail).
#pragma once

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace perf {

enum class LatColl { AllGather, AllToAll, ReduceScatter, Broadcast, Unknown };

inline LatColl latColl(const char* s) {
  if (!std::strcmp(s, "all_gather")) return LatColl::AllGather;
  if (!std::strcmp(s, "alltoall")) return LatColl::AllToAll;
  if (!std::strcmp(s, "reduce_scatter")) return LatColl::ReduceScatter;
  if (!std::strcmp(s, "broadcast")) return LatColl::Broadcast;
  return LatColl::Unknown;
}

inline double latNowUs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

/// Element counts: `count` is what the call takes (per block where blocks apply).
struct LatShape {
  size_t count, sendElems, recvElems;
};

inline LatShape latShape(LatColl c, size_t bytes, int nranks) {
  const size_t n = static_cast<size_t>(nranks), total = bytes / sizeof(float);
  switch (c) {
    case LatColl::AllGather: return {total / n, total / n, total / n * n};
    case LatColl::AllToAll: return {total / n, total / n * n, total / n * n};
    case LatColl::ReduceScatter: return {total / n, total / n * n, total / n};
    default: return {total, total, total};
  }
}

/// Small integers, exact in float sums: element i of rank r's input.
inline float latInput(int rank, size_t i) { return static_cast<float>((rank * 7 + i) % 61); }

/// Fills rank's input for the checked call.
inline void latFill(std::vector<float>& send, int rank) {
  for (size_t i = 0; i < send.size(); ++i) send[i] = latInput(rank, i);
}

/// Bad elements of rank's output after the checked call.
inline size_t latWrong(LatColl c, const LatShape& s, const std::vector<float>& recv, int rank,
                       int nranks) {
  size_t bad = 0;
  for (size_t i = 0; i < s.recvElems; ++i) {
    float want = 0;
    switch (c) {
      case LatColl::AllGather: want = latInput(static_cast<int>(i / s.count), i % s.count); break;
      case LatColl::AllToAll:
        want = latInput(static_cast<int>(i / s.count),
                        static_cast<size_t>(rank) * s.count + i % s.count);
        break;
      case LatColl::ReduceScatter:
        for (int r = 0; r < nranks; ++r)
          want += latInput(r, static_cast<size_t>(rank) * s.count + i);
        break;
      default: want = latInput(0, i); break;
    }
    if (recv[i] != want) ++bad;
  }
  return bad;
}

/// Test hook, as the sweeps' (CHORUS_PERF_INJECT_ERROR=1): the last rank's first output
/// element is made wrong before the check, which must then report it.
inline void latInject(std::vector<float>& recv, int rank, int nranks) {
  const char* e = std::getenv("CHORUS_PERF_INJECT_ERROR");
  if (e && !std::strcmp(e, "1") && rank == nranks - 1 && !recv.empty()) recv[0] += 1.0f;
}

/// Sorted per-call times -> one line on stdout.
inline void latPrint(const char* lib, const char* coll, size_t bytes, std::vector<double>& t) {
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  double sum = 0;
  for (double x : t) sum += x;
  std::printf(
      "%s %s %zu B, %zu calls (us): min %.2f p5 %.2f p25 %.2f p50 %.2f p90 %.2f p99 %.2f "
      "max %.2f mean %.2f\n",
      lib, coll, bytes, n, t[0], t[n / 20], t[n / 4], t[n / 2], t[n * 9 / 10], t[n * 99 / 100],
      t[n - 1], sum / static_cast<double>(n));
}

}  // namespace perf
