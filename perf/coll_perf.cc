// coll_perf.cc — main() of the Chorus sweep binaries other than all_reduce_perf.
// meson builds it once per collective with -DPERF_COLL=kAllGatherColl (and so on):
//   chorusrun -np 4 all_gather_perf -b 8 -e 256M -f 2
#include <memory>

#include "perf/chorus_backend.h"
#include "perf/colls.h"

int main(int argc, char** argv) {
  std::unique_ptr<perf::Backend> backend(perf::makeChorusBackend());
  return perf::perfMain(argc, argv, perf::PERF_COLL, backend.get());
}
