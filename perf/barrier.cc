// perf/barrier.cc — time per barrier: one row, size and count 0, bandwidths 0.
#include "perf/colls.h"

namespace perf {
namespace {

void getCounts(size_t, size_t, int, CollCounts* c) { *c = CollCounts{0, 0, 0, 0, 0}; }
void initData(const CollArgs&, void*, void*, bool) {}
int run(const CollArgs& a, const void*, void*) { return a.backend->barrierColl(); }
size_t check(const CollArgs&, const void*, const void*, bool) { return 0; }  // no data
void getBw(size_t, size_t, double, int, double* algBw, double* busBw) { *algBw = *busBw = 0; }

}  // namespace

const CollDesc kBarrierColl = {"barrier_perf",
                               /*usesOp=*/false,
                               /*usesRoot=*/false,
                               getCounts,
                               initData,
                               run,
                               check,
                               getBw,
                               /*noData=*/true,
                               /*inPlaceUnchecked=*/false};

}  // namespace perf
