// fuzz_boot_ids.cc — addresses and ids that come from the network or another process: a
// chorusUniqueId (broadcast by the application, read from a rendezvous file), the WireAddr
// entries of the root's address table, and the root's reply header.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/net/socket.h"
#include "src/bootstrap/uniqueid.h"
#include "src/bootstrap/wire.h"

using namespace chorus;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  chorusUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(&id, data, size < sizeof(id) ? size : sizeof(id));
  SockAddr root;
  uint8_t secret[kSecretBytes];
  if (decodeUniqueId(id, &root, secret) == chorusSuccess) {
    if (!root.validFamily()) __builtin_trap();
    (void)root.str();
    chorusUniqueId again;
    if (encodeUniqueId(root, secret, &again) != chorusSuccess) __builtin_trap();
  }
  // A table of WireAddr entries, as the root sends it.
  for (size_t off = 0; size - off >= sizeof(WireAddr); off += sizeof(WireAddr)) {
    WireAddr w;
    std::memcpy(&w, data + off, sizeof(w));
    SockAddr a;
    if (fromWire(w, &a)) {
      if (!a.validFamily() || a.len > sizeof(a.ss)) __builtin_trap();
      (void)a.str();
      (void)a.port();
      WireAddr back = toWire(a);
      if (back.len != a.len) __builtin_trap();
    }
  }
  if (size >= sizeof(RootReply)) {
    RootReply r;
    std::memcpy(&r, data, sizeof(r));
    (void)rootStatusString(r.status);
    (void)secretEqual(r.secret, secret);
  }
  return 0;
}
