// kill_worker.cc — one rank of the "SIGKILL a rank mid all-reduce" test (kill_rank.py).
//
//   CHORUS_RANK=r CHORUS_WORLD_SIZE=n CHORUS_INIT=tcp://host:port kill_worker [--bytes B]
//       [--iters N] [--sleep-ms M] [--registered 1] [--coll gather|scatter|broadcast]
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
// --registered 1: an all-gather loop instead, between chorusMemAlloc buffers registered on
// the communicator (B bytes of output; the same-host single-copy path).
// --coll gather | scatter: a loop of gathers or scatters to rank 0 of B bytes of result
// (small ones run on the LL path, each block in one message: the test that a dead sender or
// receiver there fails the call, not hangs it), every block checked. --coll broadcast: a
// loop of B-byte broadcasts from rank 0 (on the shared boards where 4 ranks crowd 2 CPUs).
#include <chorus.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int failed(chorusComm_t comm, int rank, chorusResult_t r,
           std::chrono::steady_clock::time_point start) {
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d: ERROR %s after %.2f s: %s\n", rank, chorusGetErrorString(r), took,
              chorusGetLastError(comm));
  std::fflush(stdout);
  chorusCommAbort(comm);
  return 3;
}

// One iteration checked: say so (the test counts these lines), then the pause asked for.
void iterationOk(int rank, long it, long sleepMs) {
  std::printf("rank %d: iter %ld ok\n", rank, it);
  std::fflush(stdout);
  if (sleepMs > 0) usleep(static_cast<useconds_t>(sleepMs) * 1000);
}

// Every iteration ran: destroy the communicator and say so.
int done(chorusComm_t comm, int rank) {
  chorusCommDestroy(comm);
  std::printf("rank %d: DONE\n", rank);
  return 0;
}

// --registered 1: every rank's block is rank + 1 everywhere; the output is checked at each
// block's first and last element.
int allGatherLoop(chorusComm_t comm, int rank, int n, size_t bytes, long iters, long sleepMs) {
  const size_t count = bytes / sizeof(float) / static_cast<size_t>(n);
  void *in = nullptr, *out = nullptr, *hin = nullptr, *hout = nullptr;
  if (chorusMemAlloc(&in, count * sizeof(float)) != chorusSuccess ||
      chorusMemAlloc(&out, count * n * sizeof(float)) != chorusSuccess ||
      chorusCommRegister(comm, in, count * sizeof(float), &hin) != chorusSuccess ||
      chorusCommRegister(comm, out, count * n * sizeof(float), &hout) != chorusSuccess) {
    std::printf("rank %d: REGISTER-FAILED: %s\n", rank, chorusGetLastError(comm));
    return 1;
  }
  float* fin = static_cast<float*>(in);
  float* fout = static_cast<float*>(out);
  for (size_t i = 0; i < count; ++i) fin[i] = static_cast<float>(rank + 1);
  for (long it = 0; it < iters; ++it) {
    fout[0] = fout[count * n - 1] = -1;
    const auto start = std::chrono::steady_clock::now();
    chorusResult_t r = chorusAllGather(in, out, count, chorusFloat32, comm, nullptr);
    if (r != chorusSuccess) return failed(comm, rank, r, start);
    for (int b = 0; b < n; ++b)
      if (fout[b * count] != b + 1 || fout[(b + 1) * count - 1] != b + 1) {
        std::printf("rank %d: WRONG at iter %ld in block %d\n", rank, it, b);
        return 1;
      }
    iterationOk(rank, it, sleepMs);
  }
  chorusCommDeregister(comm, hin);
  chorusCommDeregister(comm, hout);
  chorusMemFree(in);
  chorusMemFree(out);
  return done(comm, rank);
}

// --coll gather | scatter: rank 0 is the root; block b holds b + 1 + iteration.
int rootedLoop(chorusComm_t comm, int rank, int n, size_t bytes, long iters, long sleepMs,
               bool gather) {
  const size_t count = std::max<size_t>(1, bytes / sizeof(float) / static_cast<size_t>(n));
  std::vector<float> all(count * static_cast<size_t>(n)), mine(count);
  for (long it = 0; it < iters; ++it) {
    const float base = static_cast<float>(it % 1000);
    std::fill(mine.begin(), mine.end(), gather ? base + static_cast<float>(rank + 1) : -1.0f);
    for (int b = 0; b < n; ++b)
      std::fill(all.begin() + static_cast<long>(b * count),
                all.begin() + static_cast<long>((b + 1) * count),
                gather ? -1.0f : base + static_cast<float>(b + 1));
    const auto start = std::chrono::steady_clock::now();
    chorusResult_t r =
        gather ? chorusGather(mine.data(), all.data(), count, chorusFloat32, 0, comm, nullptr)
               : chorusScatter(all.data(), mine.data(), count, chorusFloat32, 0, comm, nullptr);
    if (r != chorusSuccess) return failed(comm, rank, r, start);
    bool ok = true;
    if (!gather)
      ok = mine.front() == base + static_cast<float>(rank + 1) && mine.back() == mine.front();
    else if (rank == 0)
      for (int b = 0; b < n; ++b)
        ok = ok && all[b * count] == base + static_cast<float>(b + 1) &&
             all[(b + 1) * count - 1] == base + static_cast<float>(b + 1);
    if (!ok) {
      std::printf("rank %d: WRONG at iter %ld\n", rank, it);
      return 1;
    }
    iterationOk(rank, it, sleepMs);
  }
  return done(comm, rank);
}

// --coll broadcast: rank 0 is the root; every element holds 1 + iteration.
int broadcastLoop(chorusComm_t comm, int rank, size_t bytes, long iters, long sleepMs) {
  std::vector<float> buf(std::max<size_t>(1, bytes / sizeof(float)));
  for (long it = 0; it < iters; ++it) {
    const float want = static_cast<float>(1 + it % 1000);
    std::fill(buf.begin(), buf.end(), rank == 0 ? want : -1.0f);
    const auto start = std::chrono::steady_clock::now();
    chorusResult_t r =
        chorusBroadcast(buf.data(), buf.data(), buf.size(), chorusFloat32, 0, comm, nullptr);
    if (r != chorusSuccess) return failed(comm, rank, r, start);
    if (buf.front() != want || buf.back() != want || buf[buf.size() / 2] != want) {
      std::printf("rank %d: WRONG at iter %ld\n", rank, it);
      return 1;
    }
    iterationOk(rank, it, sleepMs);
  }
  return done(comm, rank);
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 64u << 20;
  long iters = 100000;
  long sleepMs = 0;
  bool registered = false;
  std::string coll;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--bytes"))
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--iters"))
      iters = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--sleep-ms"))
      sleepMs = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--registered"))
      registered = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--coll") &&
             (!std::strcmp(argv[i + 1], "gather") || !std::strcmp(argv[i + 1], "scatter") ||
              !std::strcmp(argv[i + 1], "broadcast")))
      coll = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: kill_worker [--bytes B] [--iters N] [--sleep-ms M] [--registered 1] "
                   "[--coll gather|scatter|broadcast]\n");
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
  if (registered) return allGatherLoop(comm, rank, n, bytes, iters, sleepMs);
  if (coll == "broadcast") return broadcastLoop(comm, rank, bytes, iters, sleepMs);
  if (!coll.empty()) return rootedLoop(comm, rank, n, bytes, iters, sleepMs, coll == "gather");
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
    iterationOk(rank, it, sleepMs);
  }
  if (chorusCommDestroy(comm) != chorusSuccess) {
    std::printf("rank %d: DESTROY-FAILED: %s\n", rank, chorusGetLastError(nullptr));
    return 1;
  }
  std::printf("rank %d: DONE\n", rank);
  return 0;
}
