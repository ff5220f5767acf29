// perf/gather.cc — gather to -r root: size = nranks * count (count = elements per rank),
// busbw = algbw * (n-1)/n (nccl-tests' gather.cu).
#include "perf/colls.h"

namespace perf {
namespace {

void getCounts(size_t bytes, size_t typeSize, int nranks, CollCounts* c) {
  const size_t per = bytes / typeSize / static_cast<size_t>(nranks);
  c->sendCount = per;
  c->recvCount = per * static_cast<size_t>(nranks);
  c->paramCount = per;
  c->sendInplaceOffset = per;  // in place on root: sendbuf = recvbuf + root*count
  c->recvInplaceOffset = 0;
}

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->gather(sendbuf, recvbuf, a.counts.paramCount, a.type, a.root);
}

size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t per = a.counts.paramCount;
  size_t wrong = 0;
  if (a.rank == a.root) wrong += countWrongBlocks(recvbuf, per, a.type, a.op, a.nranks, 0);
  const void* in = inPlace ? elemPtr(recvbuf, static_cast<size_t>(a.rank) * per, a.type) : sendbuf;
  if (!inPlace || a.rank != a.root)  // the input comes back untouched
    wrong += countWrongPattern(in, per, a.type, a.op, a.rank, a.nranks, 0);
  return wrong;
}

}  // namespace

const CollDesc kGatherColl = {"gather_perf",
                              /*usesOp=*/false,
                              /*usesRoot=*/true,
                              getCounts,
                              initOwnBlock,
                              run,
                              check,
                              getBwPerRankBlocks,
                              /*noData=*/false,
                              /*inPlaceUnchecked=*/false};

}  // namespace perf
