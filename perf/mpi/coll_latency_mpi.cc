// coll_latency_mpi.cc — per-call times of one Open MPI collective: perf/coll_latency.cc's
// twin, same arguments, same output (perf/coll_latency.h).
#include <mpi.h>

#include "perf/coll_latency.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const perf::LatColl coll = argc > 1 ? perf::latColl(argv[1]) : perf::LatColl::Unknown;
  const size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 0;
  const int iters = argc > 3 ? std::atoi(argv[3]) : 5000;
  const perf::LatShape s = perf::latShape(coll, bytes, nranks);
  if (coll == perf::LatColl::Unknown || s.count == 0 || iters < 1) {
    if (rank == 0)
      std::fprintf(stderr,
                   "usage: coll_latency_mpi all_gather|alltoall|reduce_scatter|broadcast BYTES "
                   "[ITERS]; BYTES at least 4 x nranks, ITERS at least 1\n");
    MPI_Finalize();
    return 2;
  }
  std::vector<float> send(s.sendElems), recv(s.recvElems);
  perf::latFill(send, rank);
  const int cnt = static_cast<int>(s.count);
  auto run = [&] {
    switch (coll) {
      case perf::LatColl::AllGather:
        return MPI_Allgather(send.data(), cnt, MPI_FLOAT, recv.data(), cnt, MPI_FLOAT,
                             MPI_COMM_WORLD);
      case perf::LatColl::AllToAll:
        return MPI_Alltoall(send.data(), cnt, MPI_FLOAT, recv.data(), cnt, MPI_FLOAT,
                            MPI_COMM_WORLD);
      case perf::LatColl::ReduceScatter:
        return MPI_Reduce_scatter_block(send.data(), recv.data(), cnt, MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD);
      default: {
        // Out of place, as chorusBroadcast: the root copies its input, then broadcasts.
        if (rank == 0) std::memcpy(recv.data(), send.data(), s.count * sizeof(float));
        return MPI_Bcast(recv.data(), cnt, MPI_FLOAT, 0, MPI_COMM_WORLD);
      }
    }
  };
  std::vector<double> t(static_cast<size_t>(iters));
  for (int i = 0; i < iters / 10 + 5; ++i) run();
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < iters; ++i) {
    const double t0 = perf::latNowUs();
    run();
    t[static_cast<size_t>(i)] = perf::latNowUs() - t0;
  }
  std::fill(recv.begin(), recv.end(), -1.0f);
  perf::latFill(send, rank);
  run();
  perf::latInject(recv, rank, nranks);
  double wrong = static_cast<double>(perf::latWrong(coll, s, recv, rank, nranks));
  MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    perf::latPrint("mpi", argv[1], bytes, t);
    std::printf("wrong %.0f\n", wrong);
    std::fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
