// hostid.h — which ranks share a host (and so can share memory).
#pragma once

#include <cstddef>
#include <cstdint>

namespace chorus {

/// Hash of hostname + boot id, or of CHORUS_HOSTID when set (namespaced test hosts).
uint64_t hostHash();

/// 64-bit FNV-1a, for names and identities (not for security).
uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace chorus
