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

#include "common.h"

namespace perf {

/// All-reduce: count elements in and out, busbw = algbw * 2(n-1)/n, root unused.
/// Peer binaries copy it and change name (e.g. "all_reduce_mpi_perf").
extern const CollDesc kAllReduceColl;

}  // namespace perf

#endif  // CHORUS_PERF_COLLS_H_
