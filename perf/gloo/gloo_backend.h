/*
 * perf/gloo/gloo_backend.h — the perf driver's Backend on top of Gloo (Debian's libgloo-dev).
 *
 * Exists so that the Chorus perf binaries have a second peer besides Open MPI: the same
 * sweep, the same driver, the same columns, through Gloo's collectives over its TCP
 * transport (loopback by default). Built only when Meson finds Gloo (-Dgloo=auto).
 *
 * Joining: the rank and size come from CHORUS_RANK/CHORUS_WORLD_SIZE (chorusrun) or
 * OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (mpirun); without either the process runs as
 * a single rank. The ranks meet through a gloo::rendezvous::FileStore in a directory:
 *   CHORUS_GLOO_STORE=DIR   use DIR (created if missing, must be fresh for every job,
 *                           left in place afterwards);
 *   otherwise               ${TMPDIR:-/tmp}/chorus-gloo-<job>, <job> being chorusrun's
 *                           CHORUS_SECRET or Open MPI's PMIX_NAMESPACE; rank 0 removes it
 *                           at the end.
 *   CHORUS_GLOO_HOSTNAME    the address the TCP device binds to (default 127.0.0.1; the
 *                           hook for multi-host runs), CHORUS_GLOO_TIMEOUT seconds per
 *                           operation (default 300).
 *
 * Types: the integer types, half (gloo::float16), float, double; no bfloat16 (Gloo has
 * none). Ops: sum, prod, min, max; avg is sum followed by a division on the host (what a
 * Gloo user writes, as for MPI). Collectives: Gloo's new-style functions (allreduce,
 * allgather, broadcast, reduce, alltoall, scatter, gather, barrier); sendrecv through
 * unbound-buffer send/recv. Gloo has no reduce-scatter function, only the algorithm class
 * ReduceScatterHalvingDoubling, which races with its own sends (see reduceScatter()): by
 * default reduce-scatter is gloo::allreduce of the whole input, keeping this rank's block;
 * CHORUS_GLOO_REDUCE_SCATTER=halving_doubling runs the class instead. Both work in place
 * on the whole input, so out of place costs a copy into a scratch buffer; in-place
 * alltoall too (Gloo sends from the input while receiving into the output).
 */
#ifndef CHORUS_PERF_GLOO_BACKEND_H_
#define CHORUS_PERF_GLOO_BACKEND_H_

#include "perf/common.h"

namespace perf {

Backend* makeGlooBackend();

}  // namespace perf

#endif  // CHORUS_PERF_GLOO_BACKEND_H_
