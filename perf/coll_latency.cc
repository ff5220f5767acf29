// coll_latency.cc — per-call times of one Chorus collective (perf/coll_latency.h says what
// it measures and prints; perf/mpi/coll_latency_mpi.cc is its Open MPI twin).
#include <chorus.h>

#include "perf/coll_latency.h"
#include "perf/launch_init.h"

int main(int argc, char** argv) {
  chorusComm_t comm = nullptr;
  const char* how = "";
  if (perf::launchInit(&comm, &argc, &argv, &how) != chorusSuccess) {
    std::fprintf(stderr, "coll_latency: init failed: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  const perf::LatColl coll = argc > 1 ? perf::latColl(argv[1]) : perf::LatColl::Unknown;
  const size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 0;
  const int iters = argc > 3 ? std::atoi(argv[3]) : 5000;
  int rank = 0, nranks = 1;
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &nranks);
  const perf::LatShape s = perf::latShape(coll, bytes, nranks);
  if (coll == perf::LatColl::Unknown || s.count == 0 || iters < 1) {
    std::fprintf(stderr,
                 "usage: coll_latency all_gather|alltoall|reduce_scatter|broadcast BYTES "
                 "[ITERS]; BYTES at least 4 x nranks, ITERS at least 1\n");
    return 2;
  }
  std::vector<float> send(s.sendElems), recv(s.recvElems);
  perf::latFill(send, rank);
  auto run = [&] {
    switch (coll) {
      case perf::LatColl::AllGather:
        return chorusAllGather(send.data(), recv.data(), s.count, chorusFloat32, comm, nullptr);
      case perf::LatColl::AllToAll:
        return chorusAllToAll(send.data(), recv.data(), s.count, chorusFloat32, comm, nullptr);
      case perf::LatColl::ReduceScatter:
        return chorusReduceScatter(send.data(), recv.data(), s.count, chorusFloat32, chorusSum,
                                   comm, nullptr);
      default:
        return chorusBroadcast(send.data(), recv.data(), s.count, chorusFloat32, 0, comm, nullptr);
    }
  };
  std::vector<double> t(static_cast<size_t>(iters));
  bool ok = true;
  for (int i = 0; i < iters / 10 + 5 && ok; ++i) ok = run() == chorusSuccess;
  ok = ok && chorusBarrier(comm, nullptr) == chorusSuccess;
  for (int i = 0; i < iters && ok; ++i) {
    const double t0 = perf::latNowUs();
    ok = run() == chorusSuccess;
    t[static_cast<size_t>(i)] = perf::latNowUs() - t0;
  }
  std::fill(recv.begin(), recv.end(), -1.0f);
  perf::latFill(send, rank);
  ok = ok && run() == chorusSuccess;
  if (!ok) {
    std::fprintf(stderr, "coll_latency: rank %d: %s\n", rank, chorusGetLastError(comm));
    return 1;
  }
  perf::latInject(recv, rank, nranks);
  double wrong = static_cast<double>(perf::latWrong(coll, s, recv, rank, nranks));
  if (chorusAllReduce(&wrong, &wrong, 1, chorusFloat64, chorusSum, comm, nullptr) != chorusSuccess)
    return 1;
  if (rank == 0) {
    perf::latPrint("chorus", argv[1], bytes, t);
    std::printf("wrong %.0f\n", wrong);
    std::fflush(stdout);
  }
  // No rank exits (and so has chorusrun end the others) before rank 0 has printed.
  chorusBarrier(comm, nullptr);
  chorusCommDestroy(comm);
  perf::launchFinalize();
  return wrong == 0 ? 0 : 1;
}
