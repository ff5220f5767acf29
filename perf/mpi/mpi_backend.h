/*
 * perf/mpi/mpi_backend.h — the perf driver's Backend on top of MPI (Open MPI here).
 *
 * Exists so that every Chorus perf binary has a peer that runs the same sweep through
 * the same driver with MPI's collectives: same sizes, same timing loop, same columns.
 * Types: the integer types, float and double (MPI has no half/bfloat16). Ops: sum, prod,
 * min, max; avg is MPI_SUM followed by a division on the host (what an MPI user writes).
 */
#ifndef CHORUS_PERF_MPI_BACKEND_H_
#define CHORUS_PERF_MPI_BACKEND_H_

#include "perf/common.h"

namespace perf {

Backend* makeMpiBackend();

}  // namespace perf

#endif  // CHORUS_PERF_MPI_BACKEND_H_
