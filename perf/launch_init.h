// launch_init.h — how a perf binary or multi-process test started by any launcher becomes
// one communicator.
//
// Whether and which launcher started the process is the library's answer
// (chorusGetLaunchInfo, the table chorusCommInitFromEnv reads: chorusrun, torchrun, Open MPI,
// PMI, Slurm); the environment route (chorusCommInitFromEnv) then joins the job, and with no
// launcher the process runs alone. What is perf's own: under Open MPI's mpirun with no
// CHORUS_INIT or MASTER_ADDR there is no address to meet at, so a build with the optional MPI
// dependency (-Dmpi, like nccl-tests' MPI=1) lets MPI carry the unique id: MPI_Init, rank 0
// makes the id, MPI_Bcast, chorusCommInitRank. Without MPI the environment route still works
// on one host (it meets in a file named after the job).
#pragma once

#include <chorus.h>

namespace perf {

/// Initializes `*comm` for this process. `how` receives a short description of the route
/// taken ("env", "mpi", "single") for logs. Returns the Chorus result; on failure the
/// caller prints chorusGetLastError(nullptr).
chorusResult_t launchInit(chorusComm_t* comm, int* argc, char*** argv, const char** how);

/// Ends what launchInit started besides the communicator (MPI_Finalize on the MPI route).
void launchFinalize();

}  // namespace perf
