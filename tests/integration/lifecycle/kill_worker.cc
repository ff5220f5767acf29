// kill_worker.cc — one rank of the "SIGKILL a rank mid all-reduce" test (kill_rank.py).
//
//   CHORUS_RANK=r CHORUS_WORLD_SIZE=n CHORUS_INIT=tcp://host:port kill_worker [--bytes B]
//       [--iters N] [--sleep-ms M]
//
// No launcher: the test starts every rank itself, so when it SIGKILLs one of them nothing
// but the library can tell the others. Each rank initializes from the environment and runs
// an all-reduce loop of B bytes of float32 (default 64 MiB), checking every result, and
// prints "rank R: iter I ok" after each call so the test knows when the loop is under way.
// When a call fails it prints one line
//   rank R: ERROR <result name> after <seconds since the failed call began> s: <last error>
// aborts the communicator and exits 3. It exits 0 after N clean iterations (default
// 100000: the test always kills someone first; hostile_peers.py runs a few, with a pause of
// M ms after each), then prints "rank R: DONE"; 1 on a wrong result or a failed init.
#include <chorus.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  size_t bytes = 64u << 20;
  long iters = 100000;
  long sleepMs = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--bytes"))
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--iters"))
      iters = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--sleep-ms"))
      sleepMs = std::atol(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: kill_worker [--bytes B] [--iters N] [--sleep-ms M]\n");
      return 2;
    }
  }
  chorusComm_t comm = nullptr;
  if (chorusCommInitFromEnv(&comm, nullptr) != chorusSuccess) {
    std::printf("INIT-FAILED: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  const size_t count = bytes / sizeof(float);
  std::vector<float> buf(count);
  for (long it = 0; it < iters; ++it) {
    for (size_t i = 0; i < count; i += 4096) buf[i] = static_cast<float>(rank + 1);
    buf[count - 1] = static_cast<float>(rank + 1);
    const auto start = std::chrono::steady_clock::now();
    chorusResult_t r =
        chorusAllReduce(buf.data(), buf.data(), count, chorusFloat32, chorusSum, comm, nullptr);
    if (r != chorusSuccess) {
      const double took =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("rank %d: ERROR %s after %.2f s: %s\n", rank, chorusGetErrorString(r), took,
                  chorusGetLastError(comm));
      std::fflush(stdout);
      chorusCommAbort(comm);
      return 3;
    }
    const float want = static_cast<float>(n * (n + 1) / 2);
    if (buf[0] != want || buf[count - 1] != want || buf[(count / 2) & ~size_t(4095)] != want) {
      std::printf("rank %d: WRONG at iter %ld: %g %g, want %g\n", rank, it, buf[0], buf[count - 1],
                  want);
      return 1;
    }
    std::printf("rank %d: iter %ld ok\n", rank, it);
    std::fflush(stdout);
    if (sleepMs > 0) usleep(static_cast<useconds_t>(sleepMs) * 1000);
  }
  if (chorusCommDestroy(comm) != chorusSuccess) {
    std::printf("rank %d: DESTROY-FAILED: %s\n", rank, chorusGetLastError(nullptr));
    return 1;
  }
  std::printf("rank %d: DONE\n", rank);
  return 0;
}
