// timeout_cut.cc — a communicator's own timeout bounds the transports' deadlines too.
//
//   timeout_cut --timeout-s S --marker PATH [--bytes B]
//
// One rank of an even-sized job (CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_INIT):
// chorusCommInitFromEnv with chorusConfig_t::timeoutSeconds = S (CHORUS_TIMEOUT_S left at
// its 300 s default), ten checked all-reduces, "rank R: ready"; then it waits for the file
// PATH (the test makes it once it has cut the link between the two halves of the job).
// Rank r of the first half sends B bytes (default 1 MiB) to rank r + n/2: the send returns
// once the message is in its slots ("rank R: sent"), and chorusCommDestroy then lets the
// tcp connection drain it, which it cannot across the cut: the drain's deadline is the
// communicator's timeout. Rank r + n/2 receives: "rank R: ERROR ..." after S s. Each rank
// prints "rank R: destroyed in X s" and exits 0 (sender) or 3 (receiver, an error); wrong
// data or a failed set-up exits 1. The multinode case link_down_timeout wants every rank
// gone within S + 5 s of the cut; while the transports kept the 300 s default, the senders
// sat in the drain for 300 s.
#include <chorus.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}
}  // namespace

int main(int argc, char** argv) {
  int timeoutS = 0;
  std::string marker;
  size_t bytes = 1u << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--timeout-s"))
      timeoutS = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--marker"))
      marker = argv[i + 1];
    else if (!std::strcmp(argv[i], "--bytes"))
      bytes = std::strtoull(argv[i + 1], nullptr, 0);
    else {
      std::fprintf(stderr, "timeout_cut: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (timeoutS <= 0 || marker.empty() || bytes == 0) {
    std::fprintf(stderr, "usage: timeout_cut --timeout-s S --marker PATH [--bytes B]\n");
    return 2;
  }
  chorusConfig_t config = CHORUS_CONFIG_INITIALIZER;
  config.timeoutSeconds = timeoutS;
  chorusComm_t comm = nullptr;
  if (chorusCommInitFromEnv(&comm, &config) != chorusSuccess) {
    std::printf("INIT-FAILED: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  if (n % 2 != 0) {
    std::printf("rank %d: wants an even number of ranks, got %d\n", rank, n);
    return 1;
  }
  for (int i = 0; i < 10; ++i) {
    float x = 1.0f, y = 0.0f;
    if (chorusAllReduce(&x, &y, 1, chorusFloat32, chorusSum, comm, nullptr) != chorusSuccess ||
        y != static_cast<float>(n)) {
      std::printf("rank %d: all-reduce %d failed or wrong (%g): %s\n", rank, i,
                  static_cast<double>(y), chorusGetLastError(comm));
      return 1;
    }
  }
  std::printf("rank %d: ready\n", rank);
  std::fflush(stdout);
  const double waitStart = now();
  while (!exists(marker)) {
    if (now() - waitStart > 120) {
      std::printf("rank %d: no marker %s in 120 s\n", rank, marker.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const bool sender = rank < n / 2;
  const int peer = sender ? rank + n / 2 : rank - n / 2;
  std::vector<unsigned char> buf(bytes, static_cast<unsigned char>(rank));
  const double t0 = now();
  const chorusResult_t r = sender ? chorusSend(buf.data(), bytes, chorusUint8, peer, comm, nullptr)
                                  : chorusRecv(buf.data(), bytes, chorusUint8, peer, comm, nullptr);
  if (r == chorusSuccess)
    std::printf("rank %d: %s %zu B in %.2f s\n", rank, sender ? "sent" : "received", bytes,
                now() - t0);
  else
    std::printf("rank %d: ERROR after %.2f s: %s\n", rank, now() - t0, chorusGetLastError(comm));
  std::fflush(stdout);
  const double d0 = now();
  chorusCommDestroy(comm);
  std::printf("rank %d: destroyed in %.2f s\n", rank, now() - d0);
  std::fflush(stdout);
  return r == chorusSuccess ? 0 : 3;
}
