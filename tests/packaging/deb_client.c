/* deb_client.c — the packaged library as a C user meets it (tests/packaging/deb_check.sh):
 * compiled with only `pkg-config --cflags --libs chorus`, run under chorusrun from PATH.
 * Each rank all-reduces rank+1 (sum) and all-gathers its rank; both results are checked, and
 * chorusGetVersion must equal the CHORUS_VERSION_CODE the installed header says. */
#include <chorus.h>
#include <stdio.h>
#include <stdlib.h>

#define N 4096

static int check(chorusResult_t r, const char* what) {
  if (r != chorusSuccess) {
    fprintf(stderr, "%s: %s\n", what, chorusGetErrorString(r));
    exit(1);
  }
  return 0;
}

int main(void) {
  int version = 0;
  check(chorusGetVersion(&version), "chorusGetVersion");
  if (version != CHORUS_VERSION_CODE) {
    fprintf(stderr, "library version %d, header %d\n", version, CHORUS_VERSION_CODE);
    return 1;
  }
  chorusComm_t comm;
  check(chorusCommInitFromEnv(&comm, NULL), "chorusCommInitFromEnv");
  int rank = 0, n = 0;
  check(chorusCommUserRank(comm, &rank), "chorusCommUserRank");
  check(chorusCommCount(comm, &n), "chorusCommCount");
  float* buf = malloc(N * sizeof(float));
  int* ranks = malloc((size_t)n * sizeof(int));
  for (int i = 0; i < N; i++) buf[i] = (float)(rank + 1) * (float)(i % 7);
  check(chorusAllReduce(buf, buf, N, chorusFloat32, chorusSum, comm, NULL), "chorusAllReduce");
  check(chorusAllGather(&rank, ranks, 1, chorusInt32, comm, NULL), "chorusAllGather");
  const float sum = (float)(n * (n + 1) / 2);
  for (int i = 0; i < N; i++) {
    if (buf[i] != sum * (float)(i % 7)) {
      fprintf(stderr, "rank %d: all-reduce [%d] = %g, expected %g\n", rank, i, buf[i],
              sum * (float)(i % 7));
      return 1;
    }
  }
  for (int r = 0; r < n; r++) {
    if (ranks[r] != r) {
      fprintf(stderr, "rank %d: all-gather [%d] = %d\n", rank, r, ranks[r]);
      return 1;
    }
  }
  check(chorusCommDestroy(comm), "chorusCommDestroy");
  free(buf);
  free(ranks);
  printf("rank %d of %d: version %d, all-reduce and all-gather correct\n", rank, n, version);
  return 0;
}
