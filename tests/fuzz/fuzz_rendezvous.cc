// fuzz_rendezvous.cc — the rendezvous strings of chorusCommInitFromEnv: the host:port of
// CHORUS_INIT=tcp://..., MASTER_ADDR/MASTER_PORT, and CHORUS_SECRET's 32 hex digits.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/bootstrap/secret.h"
#include "src/comm/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  std::string host;
  int port = -1;
  const char* why = nullptr;
  if (chorus::parseHostPort(s, &host, &port, &why)) {
    if (port < 1 || port > 65535 || host.size() >= s.size()) __builtin_trap();
  } else if (why == nullptr || *why == '\0') {
    __builtin_trap();
  }
  uint8_t secret[16];
  if (chorus::parseSecretHex(s, secret) && s.size() != 32) __builtin_trap();
  return 0;
}
