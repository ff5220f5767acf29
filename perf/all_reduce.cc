// perf/all_reduce.cc — how the driver sizes, fills, runs and checks an all-reduce.
// Shared by all_reduce_perf (Chorus) and mpi/all_reduce_mpi_perf (Open MPI).
#include "perf/colls.h"

#include <string.h>

namespace perf {
namespace {

void initData(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace) {
  const size_t count = a.counts.paramCount;
  if (inPlace) {
    fillPattern(recvbuf, count, a.type, a.op, a.rank, a.nranks, 0);
  } else {
    fillPattern(sendbuf, count, a.type, a.op, a.rank, a.nranks, 0);
    memset(recvbuf, 0xa5, count * typeSize(a.type));  // an untouched output shows up
  }
}

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->allReduce(sendbuf, recvbuf, a.counts.paramCount, a.type, a.op);
}

size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t count = a.counts.paramCount;
  size_t wrong = countWrongReduced(recvbuf, count, a.type, a.op, a.nranks, 0);
  // Out of place, the input must come back untouched.
  if (!inPlace) wrong += countWrongPattern(sendbuf, count, a.type, a.op, a.rank, a.nranks, 0);
  return wrong;
}

void getBw(size_t count, size_t typeSize, double sec, int nranks, double* algBw, double* busBw) {
  *algBw = sec > 0 ? static_cast<double>(count * typeSize) / 1.0e9 / sec : 0.0;
  // Each rank sends and receives 2(n-1)/n of the data in a bandwidth-optimal all-reduce.
  const double factor = nranks > 0 ? 2.0 * (nranks - 1) / nranks : 0.0;
  *busBw = *algBw * factor;
}

}  // namespace

const CollDesc kAllReduceColl = {
    /*name=*/"all_reduce_perf",
    /*usesOp=*/true,
    /*usesRoot=*/false,
    getSameCounts,
    initData,
    run,
    check,
    getBw,
    /*noData=*/false,
    /*inPlaceUnchecked=*/false,
};

}  // namespace perf
