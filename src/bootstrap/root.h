// root.h — the bootstrap root: a detached thread that collects every rank's listen
// address and hands the table back, then exits.
#pragma once

#include <cstdint>

#include "chorus.h"

namespace chorus {

/// Starts a root and fills `id`. host: nullptr = the interface chosen by
/// CHORUS_SOCKET_IFNAME; "" = every interface (the id names the chosen interface);
/// otherwise a name or address to bind. port 0 picks a free port; a given port gets
/// SO_REUSEADDR. secret: nullptr = a fresh random one. The root thread ends once it has
/// served one communicator, or at `deadlineNs` (absolute CLOCK_MONOTONIC ns), closing
/// everything it opened.
chorusResult_t bootstrapStartRoot(const char* host, int port, const uint8_t* secret,
                                  int64_t deadlineNs, chorusUniqueId* id);

}  // namespace chorus
