// secret.h — the job secret every bootstrap connection presents: made here from the
// kernel's randomness, and written and read as CHORUS_SECRET spells it (32 hex digits).
// The one place for both, used by the root, the environment's rendezvous and chorusrun
// (through src/bootstrap/launcher.h). Pure apart from getrandom(), so the parser can be
// fuzzed (tests/fuzz rendezvous).
#pragma once

#include <cstdint>
#include <string>

#include "chorus.h"

namespace chorus {

/// 16 bytes from getrandom().
chorusResult_t randomSecret(uint8_t* secret);

/// The 16 bytes as 32 lowercase hexadecimal digits (what CHORUS_SECRET holds).
std::string secretToHex(const uint8_t secret[16]);

/// Parses exactly 32 hexadecimal digits (either case) into 16 bytes.
bool parseSecretHex(const std::string& hex, uint8_t out[16]);

}  // namespace chorus
