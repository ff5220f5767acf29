// perf/broadcast.cc — broadcast from -r root: size = count, busbw = algbw (nccl-tests'
// broadcast.cu).
#include "perf/colls.h"

namespace perf {
namespace {

// The root's pattern goes everywhere; other ranks start from a poisoned output.
void initData(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace) {
  const size_t count = a.counts.paramCount;
  if (!inPlace || a.rank != a.root) poison(recvbuf, count, a.type);
  if (a.rank == a.root)
    fillPattern(inPlace ? recvbuf : sendbuf, count, a.type, a.op, a.root, a.nranks, 0);
}

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->broadcast(sendbuf, recvbuf, a.counts.paramCount, a.type, a.root);
}

size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t count = a.counts.paramCount;
  size_t wrong = countWrongPattern(recvbuf, count, a.type, a.op, a.root, a.nranks, 0);
  if (!inPlace && a.rank == a.root)
    wrong += countWrongPattern(sendbuf, count, a.type, a.op, a.root, a.nranks, 0);
  return wrong;
}

void getBw(size_t count, size_t typeSize, double sec, int, double* algBw, double* busBw) {
  setBw(static_cast<double>(count * typeSize), sec, 1.0, algBw, busBw);
}

}  // namespace

const CollDesc kBroadcastColl = {
    "broadcast_perf",
    /*usesOp=*/false,
    /*usesRoot=*/true,          getSameCounts, initData, run, check, getBw,
    /*noData=*/false,
    /*inPlaceUnchecked=*/false,
};

}  // namespace perf
