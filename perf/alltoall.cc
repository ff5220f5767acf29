// perf/alltoall.cc — all-to-all: size = nranks * count (count = elements per peer),
// busbw = algbw * (n-1)/n (nccl-tests' alltoall.cu).
#include "perf/colls.h"

namespace perf {
namespace {

void getCounts(size_t bytes, size_t typeSize, int nranks, CollCounts* c) {
  const size_t per = bytes / typeSize / static_cast<size_t>(nranks);
  c->sendCount = per * static_cast<size_t>(nranks);
  c->recvCount = per * static_cast<size_t>(nranks);
  c->paramCount = per;
  c->sendInplaceOffset = 0;  // in place: sendbuf == recvbuf
  c->recvInplaceOffset = 0;
}

// Rank r's input is its pattern over nranks*count elements, so the block it sends to rank
// j is pattern indices [j*count, (j+1)*count); rank j's block i must be rank i's block j.
void initData(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace) {
  if (!inPlace) poison(recvbuf, a.counts.recvCount, a.type);
  fillPattern(inPlace ? recvbuf : sendbuf, a.counts.sendCount, a.type, a.op, a.rank, a.nranks, 0);
}

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->allToAll(sendbuf, recvbuf, a.counts.paramCount, a.type);
}

size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t per = a.counts.paramCount;
  size_t wrong =
      countWrongBlocks(recvbuf, per, a.type, a.op, a.nranks, static_cast<size_t>(a.rank) * per);
  if (!inPlace)
    wrong += countWrongPattern(sendbuf, a.counts.sendCount, a.type, a.op, a.rank, a.nranks, 0);
  return wrong;
}

}  // namespace

const CollDesc kAllToAllColl = {
    "alltoall_perf",
    /*usesOp=*/false,
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
