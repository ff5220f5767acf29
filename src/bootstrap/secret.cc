#include "src/bootstrap/secret.h"

#include <errno.h>

#include <cstring>

#include "src/core/checks.h"
#include "src/net/random.h"

namespace chorus {
namespace {

constexpr size_t kBytes = 16;  // kSecretBytes (src/bootstrap/wire.h)

}  // namespace

chorusResult_t randomSecret(uint8_t* secret) { return randomBytes(secret, kBytes); }

std::string secretToHex(const uint8_t secret[16]) {
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * kBytes);
  for (size_t i = 0; i < kBytes; ++i) {
    hex.push_back(kHex[secret[i] >> 4]);
    hex.push_back(kHex[secret[i] & 15]);
  }
  return hex;
}

bool parseSecretHex(const std::string& hex, uint8_t out[16]) {
  if (hex.size() != 2 * kBytes) return false;
  for (size_t i = 0; i < kBytes; ++i) {
    int v = 0;
    for (size_t j = 0; j < 2; ++j) {
      const char c = hex[2 * i + j];
      int d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return false;
      v = v * 16 + d;
    }
    out[i] = static_cast<uint8_t>(v);
  }
  return true;
}

}  // namespace chorus
