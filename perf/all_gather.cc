// perf/all_gather.cc — all-gather: size = nranks * count (count = per-rank elements),
// busbw = algbw * (n-1)/n (nccl-tests' all_gather.cu).
#include "colls.h"

namespace perf {
namespace {

void getCounts(size_t bytes, size_t typeSize, int nranks, CollCounts* c) {
  const size_t per = bytes / typeSize / static_cast<size_t>(nranks);
  c->sendCount = per;
  c->recvCount = per * static_cast<size_t>(nranks);
  c->paramCount = per;
  c->sendInplaceOffset = per;  // in place: sendbuf = recvbuf + rank*count
  c->recvInplaceOffset = 0;
}

// Rank r contributes its own pattern; block r of the result must be exactly that.
void initData(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace) {
  const size_t per = a.counts.paramCount;
  poison(recvbuf, a.counts.recvCount, a.type);
  void* in = inPlace ? elemPtr(recvbuf, static_cast<size_t>(a.rank) * per, a.type) : sendbuf;
  fillPattern(in, per, a.type, a.op, a.rank, a.nranks, 0);
}

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->allGather(sendbuf, recvbuf, a.counts.paramCount, a.type);
}

size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t per = a.counts.paramCount;
  size_t wrong = countWrongBlocks(recvbuf, per, a.type, a.op, a.nranks, 0);
  if (!inPlace) wrong += countWrongPattern(sendbuf, per, a.type, a.op, a.rank, a.nranks, 0);
  return wrong;
}

void getBw(size_t count, size_t typeSize, double sec, int nranks, double* algBw, double* busBw) {
  setBw(static_cast<double>(count * typeSize) * nranks, sec,
        static_cast<double>(nranks - 1) / nranks, algBw, busBw);
}

}  // namespace

const CollDesc kAllGatherColl = {"all_gather_perf", /*usesOp=*/false, /*usesRoot=*/false,
                                 getCounts, initData, run, check, getBw,
    /*noData=*/false, /*inPlaceUnchecked=*/false};

}  // namespace perf
