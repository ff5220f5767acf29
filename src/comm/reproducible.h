// reproducible.h — whether a communicator's reductions add in rank order (CHORUS_REPRODUCIBLE,
// chorusConfig_t::reproducible; docs/REPRODUCIBLE.md), and the check at init that every rank
// asked for the same.
#pragma once

#include "chorus.h"

struct chorusComm;

namespace chorus {

/// config->reproducible where the caller's struct has the field (it was appended: an older
/// caller's `size` stops before it), else CHORUS_CONFIG_UNDEF_INT.
int configReproducible(const chorusConfig_t* config);

/// The value this rank asks for: config->reproducible where the caller's struct has the
/// field and sets it (0 or 1; checkConfig rejected anything else), else CHORUS_REPRODUCIBLE.
bool reproducibleRequested(const chorusConfig_t* config);

/// Sets comm->tuning.reproducible from `wanted` after every rank has said what it wants (one
/// bootstrap all-gather): ranks that disagree fail init alike, with chorusInvalidUsage naming
/// the ranks on each side, rather than mixing orders in one reduction.
chorusResult_t commAgreeReproducible(chorusComm* comm, bool wanted);

}  // namespace chorus
