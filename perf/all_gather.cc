// perf/all_gather.cc — all-gather: size = nranks * count (count = per-rank elements),
// busbw = algbw * (n-1)/n (nccl-tests' all_gather.cu).
#include "perf/colls.h"

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

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->allGather(sendbuf, recvbuf, a.counts.paramCount, a.type);
}

size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t per = a.counts.paramCount;
  size_t wrong = countWrongBlocks(recvbuf, per, a.type, a.op, a.nranks, 0);
  if (!inPlace) wrong += countWrongPattern(sendbuf, per, a.type, a.op, a.rank, a.nranks, 0);
  return wrong;
}

}  // namespace

const CollDesc kAllGatherColl = {
    "all_gather_perf",
    /*usesOp=*/false,
    /*usesRoot=*/false,         getCounts, initOwnBlock, run, check, getBwPerRankBlocks,
    /*noData=*/false,
    /*inPlaceUnchecked=*/false,
};

}  // namespace perf
