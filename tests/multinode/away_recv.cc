// away_recv.cc — a rank that stops calling the library must not stall a peer sending to it.
//
//   chorusrun -H h0:1,h1:1 away_recv --marker PATH [--bytes B] [--within S]
//
// Both ranks run a few 8 B all-reduces (rank 0's waits read its tcp sockets itself, so it
// leaves the last one holding them). Then rank 1 sends B bytes (default 6 MiB) to rank 0
// and, once chorusSend has returned, creates the file PATH; rank 0 meanwhile makes no
// library call at all: it waits up to S seconds (default 20) for PATH to appear (the
// namespaced hosts share the file system). The sender's slots and the sockets hold only
// part of the message (the multinode case runs it with one socket, small kernel buffers
// and 4 MiB of slots per side); the send completes only if rank 0's progress thread moves
// the rest into rank 0's receive slots while its caller is away. Then rank 0 receives the
// message and compares every byte. Exit 0 when the marker came in time and the bytes are
// right, 1 otherwise (both ranks always finish: rank 0 receives after its deadline too).
// Negative control: with the build before the progress thread took back sockets a caller
// left (issue 17, second pass) the sender stays blocked until rank 0 receives.
#include <chorus.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "perf/launch_init.h"

namespace {
uint32_t pattern(size_t i) { return static_cast<uint32_t>(i * 2654435761u + 12345u); }
bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}
}  // namespace

int main(int argc, char** argv) {
  std::string marker;
  size_t bytes = 6u << 20;
  double within = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--marker"))
      marker = argv[i + 1];
    else if (!std::strcmp(argv[i], "--bytes"))
      bytes = std::strtoull(argv[i + 1], nullptr, 0);
    else if (!std::strcmp(argv[i], "--within"))
      within = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "away_recv: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (marker.empty() || bytes < 4) {
    std::fprintf(stderr, "away_recv: --marker PATH is required (and --bytes >= 4)\n");
    return 2;
  }
  chorusComm_t comm = nullptr;
  const char* how = "";
  if (perf::launchInit(&comm, &argc, &argv, &how) != chorusSuccess) {
    std::fprintf(stderr, "away_recv: init failed: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  if (n != 2) {
    std::fprintf(stderr, "away_recv: wants 2 ranks, got %d\n", n);
    return 2;
  }
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, chorusGetLastError(comm));
    return 1;
  };
  float x = 1.0f, y = 0.0f;
  for (int i = 0; i < 10; ++i)
    if (chorusAllReduce(&x, &y, 1, chorusFloat32, chorusSum, comm, nullptr) != chorusSuccess ||
        y != 2.0f)
      return fail("8 B all-reduce");
  const size_t count = bytes / 4;
  std::vector<uint32_t> buf(count);
  int rc = 0;
  if (rank == 1) {
    for (size_t i = 0; i < count; ++i) buf[i] = pattern(i);
    if (chorusSend(buf.data(), count, chorusUint32, 0, comm, nullptr) != chorusSuccess)
      return fail("send");
    FILE* f = std::fopen(marker.c_str(), "w");
    if (!f) {
      std::perror(marker.c_str());
      return 1;
    }
    std::fclose(f);
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    double waited = 0;
    while (!exists(marker) && waited < within) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const bool came = exists(marker);
    if (chorusRecv(buf.data(), count, chorusUint32, 1, comm, nullptr) != chorusSuccess)
      return fail("recv");
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += buf[i] != pattern(i);
    std::printf("rank 0: sender %s after %.2f s; %zu of %zu words wrong\n",
                came ? "finished" : "still blocked", waited, wrong, count);
    if (!came || wrong) rc = 1;
  }
  if (chorusCommDestroy(comm) != chorusSuccess) rc = 1;
  perf::launchFinalize();
  return rc;
}
