#include "perf/launch_init.h"

#include <cstdlib>
#include <cstring>

#ifdef CHORUS_LAUNCH_WITH_MPI
#include <mpi.h>
#endif

namespace perf {
namespace {

#ifdef CHORUS_LAUNCH_WITH_MPI
bool envSet(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

bool startedMpi = false;  // process-wide by nature: MPI itself is per process

chorusResult_t mpiInit(chorusComm_t* comm, int* argc, char*** argv) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return chorusSystemError;
    startedMpi = true;
  }
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  chorusUniqueId id{};
  int ok = 1;
  if (rank == 0 && chorusGetUniqueId(&id) != chorusSuccess) ok = 0;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) return chorusSystemError;
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  return chorusCommInitRank(comm, size, id, rank);
}
#endif

}  // namespace

chorusResult_t launchInit(chorusComm_t* comm, int* argc, char*** argv, const char** how) {
  (void)argc;
  (void)argv;
  // Which launcher started us comes from the library (the table chorusCommInitFromEnv reads).
  const char* launcher = nullptr;
  chorusResult_t r = chorusGetLaunchInfo(&launcher, nullptr, nullptr);
  if (r != chorusSuccess) return r;
#ifdef CHORUS_LAUNCH_WITH_MPI
  // mpirun gives ranks but no meeting point; unless one is given, MPI itself is it.
  if (launcher && std::strcmp(launcher, "Open MPI") == 0 && !envSet("CHORUS_INIT") &&
      !envSet("MASTER_ADDR")) {
    *how = "mpi";
    return mpiInit(comm, argc, argv);
  }
#endif
  if (launcher) {
    *how = "env";
    return chorusCommInitFromEnv(comm, nullptr);
  }
  // No launcher: run alone (like nccl-tests on one GPU).
  *how = "single";
  chorusUniqueId id;
  r = chorusGetUniqueId(&id);
  if (r != chorusSuccess) return r;
  return chorusCommInitRank(comm, 1, id, 0);
}

void launchFinalize() {
#ifdef CHORUS_LAUNCH_WITH_MPI
  if (startedMpi) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
#endif
}

}  // namespace perf
