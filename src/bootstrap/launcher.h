// launcher.h — the bootstrap as a launcher sees it: the one internal header tools/chorusrun
// includes, backed by the small chorus_launcher archive (src/meson.build: this file's
// launcher.cc, the bootstrap root and what the root needs). Everything else a launcher
// does is process management and stays in the launcher.
//
// A launcher makes the job's secret (CHORUS_SECRET, handed to every rank) and, for jobs
// whose rank 0 may sit on any host, serves the bootstrap root itself: the ranks then dial
// it through CHORUS_INIT=tcp://host:port with CHORUS_INIT_SERVED=1 (src/comm/env_init.cc).
#pragma once

#include <string>

#include "chorus.h"

namespace chorus {

/// A fresh job secret: 16 bytes from getrandom(), spelled as CHORUS_SECRET wants them
/// (32 lowercase hex digits). On failure the warning already says why.
chorusResult_t launcherNewSecret(std::string* hex);

/// Whether `hex` is a job secret as CHORUS_SECRET spells it (32 hex digits, either case):
/// what the ranks and launcherServeRoot will accept.
bool launcherSecretValid(const std::string& hex);

/// Serves the bootstrap root of one job from this process: a detached thread listening on
/// `bindHost` (an address; the kernel picks the port) that admits only connections
/// presenting `secretHex` (CHORUS_SECRET's 32 hex digits) and ends once it has served the
/// job's ranks. It has no deadline of its own: it lives as long as the launcher does (the
/// job is bounded by the launcher's timeout and the ranks' own deadlines). On success
/// `*port` is the port it listens on; on failure the warning already says why.
chorusResult_t launcherServeRoot(const std::string& bindHost, const std::string& secretHex,
                                 int* port);

}  // namespace chorus
