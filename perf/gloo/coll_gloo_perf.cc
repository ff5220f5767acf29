// coll_gloo_perf.cc — main() of the Gloo peers of the sweep binaries. meson builds it once
// per collective with -DPERF_COLL=kAllReduceColl -DPERF_NAME="all_reduce_gloo_perf" (and
// so on); same driver, same columns as the Chorus binary:
//   chorusrun -np 4 all_reduce_gloo_perf -b 8 -e 256M -f 2
// (or mpirun -np 4 ...: the rank comes from CHORUS_RANK or OMPI_COMM_WORLD_RANK; see
// gloo_backend.h for the rendezvous directory).
#include <memory>

#include "perf/colls.h"
#include "perf/gloo/gloo_backend.h"

int main(int argc, char** argv) {
  perf::CollDesc coll = perf::PERF_COLL;
  coll.name = PERF_NAME;
  std::unique_ptr<perf::Backend> backend(perf::makeGlooBackend());
  return perf::perfMain(argc, argv, coll, backend.get());
}
