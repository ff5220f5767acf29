// fuzz_boot_handshake.cc — what a stranger (or a garbled peer) can send a bootstrap
// listener: the bytes go through a socketpair into the real HandshakeReader (secret first,
// then one Hello), then, for a hello that passes, the root's vetting (vetRootHello) and the
// framing of the p2p/ring message stream that follows (checkMsgHeader: a header that passes
// may be followed by exactly `size` payload bytes; the first byte of the input picks how
// the data is split into writes, to reach the reader's partial-read paths).
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/net/socket.h"
#include "src/bootstrap/wire.h"

using namespace chorus;

namespace {
// A fixed secret; inputs that start with it reach the hello checks (the corpus seeds that).
const uint8_t kSecret[kSecretBytes] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  ++data;
  --size;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return 0;
  HandshakeReader reader(kSecret, INT64_MAX);
  HandshakeReader::State st = HandshakeReader::State::Reading;
  size_t off = 0;
  // Feed in chunks; the reader must never read past secret + hello.
  while (st == HandshakeReader::State::Reading) {
    if (off < size) {
      size_t n = size - off < chunk ? size - off : chunk;
      ssize_t w = write(sv[0], data + off, n);
      if (w > 0) off += static_cast<size_t>(w);
    } else {
      shutdown(sv[0], SHUT_WR);
    }
    st = reader.progress(sv[1]);
    if (off >= size && st == HandshakeReader::State::Reading) {
      shutdown(sv[0], SHUT_WR);
      st = reader.progress(sv[1]);
      if (st == HandshakeReader::State::Reading) __builtin_trap();  // closed yet still reading
    }
  }
  close(sv[0]);
  close(sv[1]);
  if (st == HandshakeReader::State::Failed) {
    if (reader.failure() == nullptr || reader.failure()[0] == '\0') __builtin_trap();
    return 0;
  }
  const size_t used = kSecretBytes + sizeof(Hello);
  if (off < used || std::memcmp(data, kSecret, kSecretBytes) != 0) __builtin_trap();
  const Hello& h = reader.hello();
  SockAddr listenAddr;
  const char* detail = nullptr;
  for (int known : {-1, 1, 4, kMaxRanks}) {
    uint32_t status = vetRootHello(h, known, &listenAddr, &detail);
    if (status == kRootOk) {
      if (!listenAddr.validFamily() || h.rank < 0 || h.rank >= h.nranks) __builtin_trap();
      (void)listenAddr.str();
    }
    if (detail == nullptr || rootStatusString(status) == nullptr) __builtin_trap();
  }
  // The message stream after the hello.
  size_t p = used;
  while (size - p >= sizeof(MsgHeader)) {
    MsgHeader m;
    std::memcpy(&m, data + p, sizeof(m));
    p += sizeof(m);
    if (!checkMsgHeader(m)) break;
    if (m.size > kMaxMessageBytes) __builtin_trap();
    if (m.size > size - p) break;
    p += static_cast<size_t>(m.size);
  }
  return 0;
}
