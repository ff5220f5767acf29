/*
 * perf/ccl/ccl_backend.h — the perf driver's Backend on top of oneCCL (Intel's collective
 * library for CPUs, what PyTorch's CPU distributed training on Xeon uses).
 *
 * Exists so that the Chorus perf binaries have the CPU stack users pick at scale as a peer:
 * the same sweep, the same driver, the same columns, through oneCCL's C++ API
 * (ccl::allreduce, allgatherv, reduce_scatter, broadcast, reduce, alltoall, barrier).
 * Built only with -Dintel=<prefix> (the wheels' environment, tools/deps-peers).
 *
 * Joining: launched under Intel MPI's mpirun; the backend starts MPI (rank, size, and the
 * driver's helper barrier/all-gather/all-reduce of doubles), rank 0 creates oneCCL's main
 * KVS and MPI_Bcast's its address, the others attach to it, and every rank creates one
 * communicator of the world. oneCCL's own settings come from its environment
 * (CCL_ATL_TRANSPORT, CCL_WORKER_COUNT, CCL_WORKER_AFFINITY: docs/PERF.md "Intel MPI and
 * oneCCL").
 *
 * Types: the integer types oneCCL has, half, float, double, bfloat16. Ops: sum, prod, min,
 * max, avg (oneCCL's own). gather, scatter and sendrecv are not oneCCL collectives: those
 * twins are not built. all-gather is allgatherv with equal counts.
 */
#ifndef CHORUS_PERF_CCL_BACKEND_H_
#define CHORUS_PERF_CCL_BACKEND_H_

#include "perf/common.h"

namespace perf {

Backend* makeCclBackend();

}  // namespace perf

#endif  // CHORUS_PERF_CCL_BACKEND_H_
