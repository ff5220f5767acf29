// perf/reduce_scatter.cc — reduce-scatter: size = nranks * count (count = per-rank result
// elements), busbw = algbw * (n-1)/n (nccl-tests' reduce_scatter.cu).
#include "perf/colls.h"

namespace perf {
namespace {

void getCounts(size_t bytes, size_t typeSize, int nranks, CollCounts* c) {
  const size_t per = bytes / typeSize / static_cast<size_t>(nranks);
  c->sendCount = per * static_cast<size_t>(nranks);
  c->recvCount = per;
  c->paramCount = per;
  c->sendInplaceOffset = 0;
  c->recvInplaceOffset = per;  // in place: recvbuf = sendbuf + rank*recvcount
}

// Every rank's input is its pattern over nranks*count elements; rank r's result is the
// reduction of block r, i.e. pattern indices [r*count, (r+1)*count).
void initData(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace) {
  const size_t total = a.counts.sendCount;
  if (!inPlace) poison(recvbuf, a.counts.recvCount, a.type);
  fillPattern(inPlace ? recvbuf : sendbuf, total, a.type, a.op, a.rank, a.nranks, 0);
}

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->reduceScatter(sendbuf, recvbuf, a.counts.paramCount, a.type, a.op);
}

size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t per = a.counts.paramCount;
  const size_t mine = static_cast<size_t>(a.rank) * per;
  const void* out = inPlace ? elemPtr(recvbuf, mine, a.type) : recvbuf;
  size_t wrong = countWrongReduced(out, per, a.type, a.op, a.nranks, mine);
  if (!inPlace)
    wrong += countWrongPattern(sendbuf, a.counts.sendCount, a.type, a.op, a.rank, a.nranks, 0);
  return wrong;
}

}  // namespace

const CollDesc kReduceScatterColl = {
    "reduce_scatter_perf",
    /*usesOp=*/true,
    /*usesRoot=*/false,
    getCounts,
    initData,
    run,
    check,
    getBwPerRankBlocks,
    /*noData=*/false,
    /*inPlaceUnchecked=*/false,
};

}  // namespace perf
