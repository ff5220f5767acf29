// perf/reduce.cc — reduce to -r root: size = count, busbw = algbw (nccl-tests' reduce.cu).
#include "perf/colls.h"

namespace perf {
namespace {

void initData(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace) {
  const size_t count = a.counts.paramCount;
  if (!inPlace) poison(recvbuf, count, a.type);
  fillPattern(inPlace ? recvbuf : sendbuf, count, a.type, a.op, a.rank, a.nranks, 0);
}

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->reduce(sendbuf, recvbuf, a.counts.paramCount, a.type, a.op, a.root);
}

// Only the root has a result; out of place, every rank's input must come back untouched.
size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t count = a.counts.paramCount;
  size_t wrong = 0;
  if (a.rank == a.root) wrong += countWrongReduced(recvbuf, count, a.type, a.op, a.nranks, 0);
  if (!inPlace) wrong += countWrongPattern(sendbuf, count, a.type, a.op, a.rank, a.nranks, 0);
  return wrong;
}

void getBw(size_t count, size_t typeSize, double sec, int, double* algBw, double* busBw) {
  setBw(static_cast<double>(count * typeSize), sec, 1.0, algBw, busBw);
}

}  // namespace

const CollDesc kReduceColl = {"reduce_perf",
                              /*usesOp=*/true,
                              /*usesRoot=*/true,
                              getSameCounts,
                              initData,
                              run,
                              check,
                              getBw,
                              /*noData=*/false,
                              /*inPlaceUnchecked=*/false};

}  // namespace perf
