// perf/sendrecv.cc — every rank sends count elements to rank+1 and receives count from
// rank-1 in one group: size = count, busbw = algbw (nccl-tests' sendrecv.cu).
// In place (sendbuf == recvbuf) is timed but not checked, as in nccl-tests ("We don't
// support in-place sendrecv"): the send may still be reading a part of the buffer that
// the receive has already overwritten, so the #wrong column shows N/A.
#include "perf/colls.h"

namespace perf {
namespace {

int prevRank(const CollArgs& a) { return (a.rank + a.nranks - 1) % a.nranks; }

void initData(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace) {
  const size_t count = a.counts.paramCount;
  if (!inPlace) poison(recvbuf, count, a.type);
  fillPattern(inPlace ? recvbuf : sendbuf, count, a.type, a.op, a.rank, a.nranks, 0);
}

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->sendRecv(sendbuf, (a.rank + 1) % a.nranks, recvbuf, prevRank(a),
                             a.counts.paramCount, a.type);
}

size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t count = a.counts.paramCount;
  size_t wrong = countWrongPattern(recvbuf, count, a.type, a.op, prevRank(a), a.nranks, 0);
  if (!inPlace) wrong += countWrongPattern(sendbuf, count, a.type, a.op, a.rank, a.nranks, 0);
  return wrong;
}

void getBw(size_t count, size_t typeSize, double sec, int, double* algBw, double* busBw) {
  setBw(static_cast<double>(count * typeSize), sec, 1.0, algBw, busBw);
}

}  // namespace

const CollDesc kSendRecvColl = {
    "sendrecv_perf",
    /*usesOp=*/false,
    /*usesRoot=*/false,        getSameCounts, initData, run, check, getBw,
    /*noData=*/false,
    /*inPlaceUnchecked=*/true,
};

}  // namespace perf
