// rendezvous_probe: a minimal Chorus rank for the chorusrun tests. Every rank
// joins through chorusCommInitFromEnv (whatever chorusrun put in CHORUS_INIT,
// CHORUS_INIT_SERVED, CHORUS_SECRET), all-reduces its rank + 1, and rank 0
// prints "probe ok N SUM" when the sum is right. Exit status 1 on any error.
#include <cstdio>

#include "chorus.h"

int main() {
  chorusComm_t comm = nullptr;
  chorusResult_t r = chorusCommInitFromEnv(&comm, nullptr);
  if (r != chorusSuccess) {
    std::fprintf(stderr, "probe: init failed: %s: %s\n", chorusGetErrorString(r),
                 chorusGetLastError(nullptr));
    return 1;
  }
  int n = 0, rank = -1;
  chorusCommCount(comm, &n);
  chorusCommUserRank(comm, &rank);
  int v = rank + 1, sum = 0;
  r = chorusAllReduce(&v, &sum, 1, chorusInt32, chorusSum, comm, nullptr);
  if (r != chorusSuccess) {
    std::fprintf(stderr, "probe: rank %d: all-reduce failed: %s\n", rank, chorusGetLastError(comm));
    return 1;
  }
  const bool ok = sum == n * (n + 1) / 2;
  if (rank == 0 || !ok) std::printf("probe %s %d %d\n", ok ? "ok" : "BAD", n, sum);
  chorusCommFinalize(comm);
  chorusCommDestroy(comm);
  return ok ? 0 : 1;
}
