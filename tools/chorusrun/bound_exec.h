// bound_exec.h — the remote half of chorusrun --bind-to.
//
// A remote rank's launch agent runs `chorusrun --bound-exec MODE LOCAL_RANK LOCAL_SIZE --
// PROGRAM ARGS...` on its host (remote.h puts it in the agent's command): it plans the
// binding of that host's LOCAL_SIZE ranks with the host's own cores (planBinding), binds
// itself to LOCAL_RANK's set, and execs PROGRAM in place, so the rank keeps the pid, the
// process group and the streams the agent gave it. mpirun's daemons do the same on each
// node; without it only the ranks of chorusrun's own host were bound.
#pragma once

#include <string>
#include <vector>

#include "tools/chorusrun/binding.h"

namespace chorusrun {

/// The first argument that selects this mode (argv[1]).
constexpr const char* kBoundExecFlag = "--bound-exec";

/// The words that run PROGRAM under it on a remote host, before PROGRAM: `self` (the path of
/// chorusrun there), the flag, mode, local rank, local size and "--".
std::vector<std::string> boundExecWords(const std::string& self, BindMode mode, int localRank,
                                        int localSize);

/// argv after the flag: MODE LOCAL_RANK LOCAL_SIZE -- PROGRAM ARGS... Execs PROGRAM (found
/// through PATH) and returns only on failure: 2 for bad arguments, 127 when PROGRAM is not
/// found, 126 when it cannot run, each with a message on stderr.
int boundExecMain(int argc, char** argv);

/// chorusrun's own executable (/proc/self/exe), or "" where it cannot be read.
std::string selfExecutable();

}  // namespace chorusrun
