// all_reduce_perf — nccl-tests-style all-reduce sweep through Chorus.
//   chorusrun -np 4 all_reduce_perf -b 8 -e 256M -f 2
#include <memory>

#include "perf/chorus_backend.h"
#include "perf/colls.h"

int main(int argc, char** argv) {
  std::unique_ptr<perf::Backend> backend(perf::makeChorusBackend());
  return perf::perfMain(argc, argv, perf::kAllReduceColl, backend.get());
}
