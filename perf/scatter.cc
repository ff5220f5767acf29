// perf/scatter.cc — scatter from -r root: size = nranks * count (count = elements per
// rank), busbw = algbw * (n-1)/n (nccl-tests' scatter.cu).
#include "perf/colls.h"

namespace perf {
namespace {

void getCounts(size_t bytes, size_t typeSize, int nranks, CollCounts* c) {
  const size_t per = bytes / typeSize / static_cast<size_t>(nranks);
  c->sendCount = per * static_cast<size_t>(nranks);
  c->recvCount = per;
  c->paramCount = per;
  c->sendInplaceOffset = 0;
  c->recvInplaceOffset = per;  // in place on root: recvbuf = sendbuf + root*count
}

// The root's input is its pattern over nranks*count elements; rank r must receive
// pattern indices [r*count, (r+1)*count).
void initData(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace) {
  const size_t per = a.counts.paramCount;
  if (inPlace && a.rank == a.root) {
    fillPattern(recvbuf, a.counts.sendCount, a.type, a.op, a.root, a.nranks, 0);
    return;
  }
  poison(inPlace ? elemPtr(recvbuf, static_cast<size_t>(a.rank) * per, a.type) : recvbuf, per,
         a.type);
  if (a.rank == a.root) fillPattern(sendbuf, a.counts.sendCount, a.type, a.op, a.root, a.nranks, 0);
}

int run(const CollArgs& a, const void* sendbuf, void* recvbuf) {
  return a.backend->scatter(sendbuf, recvbuf, a.counts.paramCount, a.type, a.root);
}

size_t check(const CollArgs& a, const void* sendbuf, const void* recvbuf, bool inPlace) {
  const size_t per = a.counts.paramCount;
  const size_t mine = static_cast<size_t>(a.rank) * per;
  if (a.rank == a.root) {
    // In place the whole input (our block included) must be intact; out of place the
    // input must be untouched and our block copied.
    const void* in = inPlace ? recvbuf : sendbuf;
    size_t wrong = countWrongPattern(in, a.counts.sendCount, a.type, a.op, a.root, a.nranks, 0);
    if (!inPlace) wrong += countWrongPattern(recvbuf, per, a.type, a.op, a.root, a.nranks, mine);
    return wrong;
  }
  const void* out = inPlace ? elemPtr(recvbuf, mine, a.type) : recvbuf;
  return countWrongPattern(out, per, a.type, a.op, a.root, a.nranks, mine);
}

}  // namespace

const CollDesc kScatterColl = {"scatter_perf",
                               /*usesOp=*/false,
                               /*usesRoot=*/true,
                               getCounts,
                               initData,
                               run,
                               check,
                               getBwPerRankBlocks,
                               /*noData=*/false,
                               /*inPlaceUnchecked=*/false};

}  // namespace perf
