// peer_exit.cc — what the survivors see when a rank's process exits in the middle of a job.
//
//   chorusrun -np N peer_exit [--victim R] [--bytes B] [--within S] [--p2p]
//
// Every rank initializes from the environment and runs one checked all-reduce. Then the
// victim rank (default: the last) leaves with _exit(0) — a clean exit status, so the
// launcher has no reason to stop anyone and only the library can notice — while the others
// start another all-reduce of B bytes (default 16 MiB). Each survivor must get an error
// (not success, not a hang) within S seconds (default 20, far below CHORUS_TIMEOUT_S,
// which the test sets higher), and the error text must name a rank. Survivors exit 0 when
// that holds and 1 otherwise. Same host: the shm transport notices that the process is
// gone; another host: the tcp connection closes; a survivor whose neighbour failed sees
// that neighbour leave in turn. --p2p: the second call is a ring exchange of B bytes
// (send to rank+1, receive from rank-1 in one group) instead, for the polling send/recv
// path, which has no waiting call to see the failure.
#include <chorus.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/launch_init.h"

int main(int argc, char** argv) {
  int victim = -1;
  size_t bytes = 16u << 20;
  double within = 20;
  bool p2p = false;
  for (int i = 1; i < argc; i += 2) {
    if (!std::strcmp(argv[i], "--p2p")) {
      p2p = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "peer_exit: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!std::strcmp(argv[i], "--victim"))
      victim = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--bytes"))
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--within"))
      within = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: peer_exit [--victim R] [--bytes B] [--within S] [--p2p]\n");
      return 2;
    }
  }
  chorusComm_t comm = nullptr;
  const char* how = "";
  if (perf::launchInit(&comm, &argc, &argv, &how) != chorusSuccess) {
    std::fprintf(stderr, "peer_exit: init failed: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  if (victim < 0) victim = n - 1;

  // A first all-reduce that must succeed: everyone is connected and alive.
  const size_t count = bytes / sizeof(float);
  std::vector<float> buf(count, 1.0f);
  if (chorusAllReduce(buf.data(), buf.data(), count, chorusFloat32, chorusSum, comm, nullptr) !=
          chorusSuccess ||
      buf[0] != static_cast<float>(n) || buf[count - 1] != static_cast<float>(n)) {
    std::fprintf(stderr, "rank %d: the first all-reduce failed: %s\n", rank,
                 chorusGetLastError(comm));
    return 1;
  }
  if (rank == victim) {
    // Leave while the others are inside the next call. Not at once: a finished call means
    // this rank's last pieces are handed to its transport, not yet delivered (over tcp
    // the progress thread may still be writing them), as with NCCL's proxy; dying in that
    // instant would fail the survivors' *first* call, which is not what this test checks.
    std::fflush(stdout);
    usleep(500000);
    _exit(0);  // no destroy, no goodbye: as if the host lost the process
  }
  const auto start = std::chrono::steady_clock::now();
  chorusResult_t r = chorusSuccess;
  // Keep calling until one fails: a survivor far from the victim may complete a call or two
  // before the failure reaches it.
  std::vector<float> in(p2p ? count : 0);
  auto exchange = [&] {
    chorusGroupStart();
    chorusSend(buf.data(), count, chorusFloat32, (rank + 1) % n, comm, nullptr);
    chorusRecv(in.data(), count, chorusFloat32, (rank + n - 1) % n, comm, nullptr);
    return chorusGroupEnd();
  };
  for (int i = 0; i < 1000 && r == chorusSuccess; ++i)
    r = p2p ? exchange()
            : chorusAllReduce(buf.data(), buf.data(), count, chorusFloat32, chorusSum, comm,
                              nullptr);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string why = chorusGetLastError(comm);
  std::printf("rank %d: %s after %.2f s: %s\n", rank, chorusGetErrorString(r), took, why.c_str());
  chorusCommAbort(comm);
  const bool ok = r != chorusSuccess && took < within && why.find("rank") != std::string::npos;
  if (!ok)
    std::fprintf(stderr, "rank %d: expected an error naming a rank within %.0f s\n", rank, within);
  perf::launchFinalize();
  return ok ? 0 : 1;
}
