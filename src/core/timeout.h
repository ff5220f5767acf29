// core/timeout.h — the one default deadline, and the one rule that picks a deadline.
//
// Every wait, connect and drain of a communicator ends at its timeout: its
// chorusConfig_t::timeoutSeconds, else CHORUS_TIMEOUT_S, else this default. The
// communicator hands its value to each transport (fillTransportOptions); the bootstrap
// and the launcher rendezvous, which run before a communicator exists, use the rest of
// the rule.
#pragma once

#include <cstdint>

// A macro only so that params.cc's table, which holds text, spells the same number.
#define CHORUS_DEFAULT_TIMEOUT_S 300

namespace chorus {

constexpr int64_t kDefaultTimeoutS = CHORUS_DEFAULT_TIMEOUT_S;
constexpr int64_t kDefaultTimeoutNs = kDefaultTimeoutS * 1000000000ll;

/// configSeconds when > 0, else CHORUS_TIMEOUT_S when > 0, else kDefaultTimeoutS.
int64_t effectiveTimeoutS(int64_t configSeconds = 0);

}  // namespace chorus
