// skip_call.cc — one rank breaks the collective sequence; the others must say so.
//
//   chorusrun -np N skip_call [--mode skip|other] [--victim R] [--calls K] [--count C]
//                             [--expect timeout|mismatch] [--linger S]
//
// Every rank runs K all-reduces of C floats (defaults 5 and 1024). The victim (default
// rank 2, or the last rank when there are fewer) breaks the last one:
//   --mode skip   it does not call it (K-1 all-reduces), as a program with a rank-dependent
//                 branch would;
//   --mode other  it calls a broadcast (root 0, same count) instead.
// --expect timeout (default): the other ranks must get chorusTimeout (CHORUS_TIMEOUT_S,
// set low by the test) in the last call; the victim stays alive meanwhile, so the others
// time out rather than notice a dead process: until every other rank's flight-recorder
// dump is in CHORUS_FLIGHT_RECORDER_DIR (they write it when they time out), at most
// --linger S seconds (default CHORUS_TIMEOUT_S + 30; without a dump folder it sleeps
// CHORUS_TIMEOUT_S + 3). Every rank then ends its communicator (abort after a failure, destroy
// otherwise), which writes its flight recorder when CHORUS_FLIGHT_RECORDER_DIR is set; the
// test driver then runs tools/chorus-hang-report on the dumps.
// --expect mismatch (with CHORUS_CHECK_MODE=1 and --mode other): every rank, the victim
// included, must get chorusInvalidUsage from the last call, at once, with a message that
// names both calls.
// Exit status 0 when the expectation holds on this rank, 1 otherwise.
#include <chorus.h>
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/launch_init.h"

// Whether every rank but `self` has written a flight-recorder dump into `dir`.
bool othersDumped(const char* dir, int self, int n) {
  std::vector<bool> seen(static_cast<size_t>(n), false);
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) {
      const char* p = std::strstr(e->d_name, "-rank");
      int r = -1;
      if (std::strncmp(e->d_name, "chorus-fr-", 10) == 0 && p &&
          std::sscanf(p, "-rank%d.json", &r) == 1 && r >= 0 && r < n &&
          std::strstr(p, ".tmp") == nullptr)
        seen[static_cast<size_t>(r)] = true;
    }
    closedir(d);
  }
  for (int r = 0; r < n; ++r)
    if (r != self && !seen[static_cast<size_t>(r)]) return false;
  return true;
}

int main(int argc, char** argv) {
  std::string mode = "skip", expect = "timeout";
  int victim = -1, calls = 5;
  size_t count = 1024;
  double linger = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mode"))
      mode = argv[i + 1];
    else if (!std::strcmp(argv[i], "--victim"))
      victim = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--calls"))
      calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--count"))
      count = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--expect"))
      expect = argv[i + 1];
    else if (!std::strcmp(argv[i], "--linger"))
      linger = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "usage: skip_call [--mode skip|other] [--victim R] [--calls K] "
                   "[--count C] [--expect timeout|mismatch] [--linger S]\n");
      return 2;
    }
  }
  if ((mode != "skip" && mode != "other") || (expect != "timeout" && expect != "mismatch") ||
      calls < 1) {
    std::fprintf(stderr, "skip_call: bad --mode, --expect or --calls\n");
    return 2;
  }
  const char* frDir = std::getenv("CHORUS_FLIGHT_RECORDER_DIR");
  if (frDir && !*frDir) frDir = nullptr;
  if (linger < 0) {
    const char* t = std::getenv("CHORUS_TIMEOUT_S");
    linger = (t ? std::atof(t) : 300) + (frDir ? 30 : 3);
  }
  chorusComm_t comm = nullptr;
  const char* how = "";
  if (perf::launchInit(&comm, &argc, &argv, &how) != chorusSuccess) {
    std::fprintf(stderr, "skip_call: init failed: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  if (victim < 0) victim = n > 2 ? 2 : n - 1;
  const bool isVictim = rank == victim;

  std::vector<float> buf(count, 1.0f);
  for (int i = 1; i < calls; ++i) {
    chorusResult_t r =
        chorusAllReduce(buf.data(), buf.data(), count, chorusFloat32, chorusSum, comm, nullptr);
    if (r != chorusSuccess) {
      std::fprintf(stderr, "rank %d: all-reduce %d of %d failed: %s\n", rank, i, calls,
                   chorusGetLastError(comm));
      return 1;
    }
  }

  // The last call: the one the victim breaks.
  const auto start = std::chrono::steady_clock::now();
  chorusResult_t r = chorusSuccess;
  bool called = true;
  if (!isVictim)
    r = chorusAllReduce(buf.data(), buf.data(), count, chorusFloat32, chorusSum, comm, nullptr);
  else if (mode == "other")
    r = chorusBroadcast(buf.data(), buf.data(), count, chorusFloat32, 0, comm, nullptr);
  else
    called = false;
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string why = chorusGetLastError(comm);
  if (called)
    std::printf("rank %d: last call: %s after %.2f s%s%s\n", rank, chorusGetErrorString(r), took,
                why.empty() ? "" : ": ", why.c_str());
  else
    std::printf("rank %d: skipped the last all-reduce\n", rank);
  std::fflush(stdout);

  bool ok = true;
  if (expect == "mismatch") {
    const std::string seq = "#" + std::to_string(calls);
    const std::string want1 = "rank 0 called all_reduce(count=" + std::to_string(count);
    const std::string want2 =
        "rank " + std::to_string(victim) + " called broadcast(count=" + std::to_string(count);
    ok = r == chorusInvalidUsage && why.find(want1) != std::string::npos &&
         why.find(want2) != std::string::npos && why.find(seq) != std::string::npos;
    if (!ok)
      std::fprintf(stderr, "rank %d: expected chorusInvalidUsage naming \"%s\" and \"%s\" as %s\n",
                   rank, want1.c_str(), want2.c_str(), seq.c_str());
  } else if (isVictim) {
    // Stay alive while the others run into their deadline.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(linger);
    while (std::chrono::steady_clock::now() < until && !(frDir && othersDumped(frDir, rank, n)))
      usleep(100000);
  } else {
    ok = r == chorusTimeout && why.find("rank") != std::string::npos;
    if (!ok) std::fprintf(stderr, "rank %d: expected chorusTimeout naming a rank\n", rank);
  }
  if (r == chorusSuccess)
    chorusCommDestroy(comm);
  else
    chorusCommAbort(comm);
  perf::launchFinalize();
  return ok ? 0 : 1;
}
