/*
 * perf/chorus_backend.h — the perf driver's Backend on top of the public Chorus API.
 *
 * Uses only include/chorus.h: the perf binaries measure what a user of the library sees.
 * Joins the job with chorusCommInitFromEnv (chorusrun, torchrun, Open MPI and Slurm
 * environments); a process started with none of those runs as a single rank.
 */
#ifndef CHORUS_PERF_CHORUS_BACKEND_H_
#define CHORUS_PERF_CHORUS_BACKEND_H_

#include "perf/common.h"

namespace perf {

/// Creates the Chorus backend. Set CHORUS_PERF_STREAM=host to issue every measured call
/// on a host stream (chorusStreamCreate) instead of the blocking NULL stream.
Backend* makeChorusBackend();

}  // namespace perf

#endif  // CHORUS_PERF_CHORUS_BACKEND_H_
