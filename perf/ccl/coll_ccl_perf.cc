// coll_ccl_perf.cc — main() of the oneCCL peers of the sweep binaries. meson builds it once
// per collective oneCCL has, with -DPERF_COLL=kAllReduceColl -DPERF_NAME="all_reduce_ccl_perf"
// (and so on); same driver, same columns as the Chorus binary:
//   V=~/.cache/chorus/venv-intel; I_MPI_FABRICS=shm $V/bin/mpirun -np 2 all_reduce_ccl_perf
#include <memory>

#include "perf/ccl/ccl_backend.h"
#include "perf/colls.h"

int main(int argc, char** argv) {
  perf::CollDesc coll = perf::PERF_COLL;
  coll.name = PERF_NAME;
  std::unique_ptr<perf::Backend> backend(perf::makeCclBackend());
  return perf::perfMain(argc, argv, coll, backend.get());
}
