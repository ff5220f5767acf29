// fuzz_tcp_wire.cc — the tcp transport's wire records from the network: the hello on a
// new socket (checkHello) and a stream of stripe headers (checkStripeHeader), run against
// a model of a receive channel: per socket the next sequence number it may carry, the
// channel's completed head, and a slot buffer of slotBytes that every accepted stripe is
// written into (AddressSanitizer catches a write outside it).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transports/tcp/wire.h"

using namespace chorus::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(Hello) + 2) return 0;
  Hello h;
  std::memcpy(&h, data, sizeof(h));
  const uint64_t token = 0x1122334455667788ull;
  const int nranks = 1 + data[sizeof(h)] % 9;
  const int self = data[sizeof(h)] / 9 % nranks;
  if (const char* bad = checkHello(h, token, self, nranks)) {
    if (!*bad) __builtin_trap();
  } else if (h.rank < 0 || h.rank >= nranks || h.rank == self || h.index < 0 ||
             h.index >= kMaxSocks || h.token != token) {
    __builtin_trap();
  }
  // Headers, each prefixed by one byte choosing the socket it arrives on.
  const size_t slotBytes = 1 + (data[sizeof(h) + 1] % 16) * 512;
  std::vector<char> slot(slotBytes);
  uint64_t minSeq[kMaxSocks + 1] = {};
  uint64_t head = 0;
  size_t p = sizeof(h) + 2;
  while (size - p >= 1 + sizeof(StripeHeader)) {
    const int sock = data[p] % (kMaxSocks + 1);  // kPairLane too
    StripeHeader s;
    std::memcpy(&s, data + p + 1, sizeof(s));
    p += 1 + sizeof(s);
    if (checkStripeHeader(s, sock, slotBytes, minSeq[sock], head) != nullptr) continue;
    // Accepted: the receiver writes [offset, offset + len) of the slot.
    std::memset(slot.data() + s.offset, 0x5a, s.len);
    minSeq[sock] = s.seq + 1;
    if (s.seq == head && s.nstripes == 1) ++head;
  }
  // The sender's side of the same arithmetic: stripes cover a message exactly.
  const size_t bytes = size;
  const int k = stripeCount(bytes, 1 + data[0] % kMaxSocks, 1 + data[1]);
  size_t covered = 0;
  for (int j = 0; j < k; ++j) {
    size_t a = stripeOffset(bytes, j, k), b = stripeOffset(bytes, j + 1, k);
    if (b < a || a != covered) __builtin_trap();
    covered = b;
  }
  if (covered != bytes) __builtin_trap();
  return 0;
}
