// env_init.h — rank, size and rendezvous from the launcher's environment: the one place
// that knows which variables each launcher sets (chorusCommInitFromEnv, chorusGetLaunchInfo).
#pragma once

#include <string>

#include "chorus.h"

namespace chorus {

struct EnvRendezvous {
  int rank = -1;
  int nranks = 0;
  chorusUniqueId id{};
  std::string fileToRemove;  // file:// rendezvous: rank 0 removes it once all joined
  std::string source;        // which launcher we recognised, for messages
};

/// Which launcher started this process (chorusGetLaunchInfo): the first of the launcher
/// table's rank variables (CHORUS_RANK, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)
/// that is set, with its size, validated as rendezvousFromEnv validates them. None set:
/// *launcher = nullptr, rank 0 of 1. Reads the environment only.
chorusResult_t launchFromEnv(const char** launcher, int* rank, int* nranks);

/// Reads CHORUS_RANK/CHORUS_WORLD_SIZE, RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_*; then
/// CHORUS_INIT (tcp:// or file://), MASTER_ADDR/MASTER_PORT, or a file named after the
/// launcher's job id. Rank 0 starts the bootstrap root where the address says.
chorusResult_t rendezvousFromEnv(EnvRendezvous* rv);

/// After a successful init: cleans up what the rendezvous left behind.
void rendezvousDone(const EnvRendezvous& rv);

}  // namespace chorus
