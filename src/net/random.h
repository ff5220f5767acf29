// random.h — bytes from the kernel's random source, for what strangers must not guess:
// the job secret (src/bootstrap/secret.cc) and tcp's per-listener token.
#pragma once

#include <cstddef>

#include "chorus.h"

namespace chorus {

/// Fills `bytes` bytes at `dst` from getrandom(2); chorusSystemError (message set) if the
/// kernel refuses.
chorusResult_t randomBytes(void* dst, size_t bytes);

}  // namespace chorus
