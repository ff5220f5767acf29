// all_reduce_mpi_perf — the all_reduce_perf sweep through Open MPI's MPI_Allreduce, with
// the same driver and columns, for side-by-side comparison with Chorus:
//   mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np 4
//     all_reduce_mpi_perf -b 8 -e 256M -f 2  (same line)
#include <memory>

#include "perf/colls.h"
#include "perf/mpi/mpi_backend.h"

int main(int argc, char** argv) {
  perf::CollDesc coll = perf::kAllReduceColl;
  coll.name = "all_reduce_mpi_perf";
  std::unique_ptr<perf::Backend> backend(perf::makeMpiBackend());
  return perf::perfMain(argc, argv, coll, backend.get());
}
