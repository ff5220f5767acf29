// coll_mpi_perf.cc — main() of the Open MPI peers of the sweep binaries other than
// all_reduce_mpi_perf. meson builds it once per collective with -DPERF_COLL=kAllGatherColl
// -DPERF_NAME="all_gather_mpi_perf"; same driver, same columns as the Chorus binary:
//   mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 4
//     all_gather_mpi_perf -b 8 -e 256M -f 2
#include <memory>

#include "perf/colls.h"
#include "perf/mpi/mpi_backend.h"

int main(int argc, char** argv) {
  perf::CollDesc coll = perf::PERF_COLL;
  coll.name = PERF_NAME;
  std::unique_ptr<perf::Backend> backend(perf::makeMpiBackend());
  return perf::perfMain(argc, argv, coll, backend.get());
}
