/*
 * perf/colls.h — the collective descriptions the perf binaries share.
 *
 * Each CollDesc says how one collective sizes, fills, runs and checks its buffers (like a
 * test file in nccl-tests); the binary picks a backend and hands both to perfMain. The
 * same descriptor drives the Chorus binary and its Open MPI peer, so both print the same
 * columns computed the same way.
 */
#ifndef CHORUS_PERF_COLLS_H_
#define CHORUS_PERF_COLLS_H_

#include "perf/common.h"

namespace perf {

/// All-reduce: count elements in and out, busbw = algbw * 2(n-1)/n, root unused.
/// Peer binaries copy it and change name (e.g. "all_reduce_mpi_perf").
extern const CollDesc kAllReduceColl;

// One file each (all_gather.cc, ...), sized, placed and scored like nccl-tests' *.cu:
// the size column is max(send, recv) bytes per rank, the count column the count passed.
extern const CollDesc kAllGatherColl;      ///< size n*count, busbw factor (n-1)/n
extern const CollDesc kReduceScatterColl;  ///< size n*count, busbw factor (n-1)/n
extern const CollDesc kBroadcastColl;      ///< size count, factor 1, root -r
extern const CollDesc kReduceColl;         ///< size count, factor 1, root -r
extern const CollDesc kAllToAllColl;       ///< size n*count, factor (n-1)/n
extern const CollDesc kScatterColl;        ///< size n*count, factor (n-1)/n, root -r
extern const CollDesc kGatherColl;         ///< size n*count, factor (n-1)/n, root -r
extern const CollDesc kSendRecvColl;       ///< to rank+1, from rank-1: size count, factor 1
extern const CollDesc kBarrierColl;        ///< one row, size 0, time per barrier

/// getCounts of the collectives whose send, receive and call counts are all bytes/typeSize
/// (all-reduce, broadcast, reduce, sendrecv); no in-place offsets.
void getSameCounts(size_t bytes, size_t typeSize, int nranks, CollCounts* counts);

}  // namespace perf

#endif  // CHORUS_PERF_COLLS_H_
