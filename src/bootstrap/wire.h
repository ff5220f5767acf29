// wire.h — the bootstrap wire protocol: what travels on every bootstrap socket, the caps
// on every length read from the network, and the reader that vets a new connection.
//
// Every connection starts with the 16-byte secret, then a fixed-size Hello saying who is
// calling and why (root check-in, ring, point-to-point). Nothing else is read from a
// connection until both have been checked. Afterwards ring and p2p traffic is a stream
// of MsgHeader + payload. Integers are in host byte order (all ranks of a communicator
// run the same build on the same architecture; the magic words catch a mismatch).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/net/socket.h"

namespace chorus {

constexpr size_t kSecretBytes = 16;
/// Largest nranks accepted from a hello (bounds the root's table).
constexpr int kMaxRanks = 1 << 16;
/// Largest p2p / ring payload accepted from a header.
constexpr uint64_t kMaxMessageBytes = 1ull << 30;
/// Unexpected p2p messages are stashed up to this many bytes; beyond it the rank stops
/// reading from other peers until the stash drains (backpressure, not an error).
constexpr uint64_t kMaxStashBytes = 256ull << 20;
/// A new connection must deliver its secret and hello within this time once accepted.
constexpr int64_t kHandshakeTimeoutNs = 2000000000ll;

constexpr uint32_t kHelloMagic = 0x4f4c4843;  // "CHLO"
constexpr uint32_t kMsgMagic = 0x47534d43;    // "CMSG"
constexpr uint32_t kReplyMagic = 0x50455243;  // "CREP"
constexpr uint16_t kProtocolVersion = 1;

enum class ConnKind : uint16_t { RootCheckIn = 1, Ring = 2, P2p = 3, Probe = 4 };

/// A sockaddr_in / sockaddr_in6 as sent on the wire.
struct WireAddr {
  uint32_t len;
  uint8_t bytes[28];
};
static_assert(sizeof(sockaddr_in6) <= sizeof(WireAddr::bytes), "WireAddr too small");

struct Hello {
  uint32_t magic;    // kHelloMagic
  uint16_t version;  // kProtocolVersion
  uint16_t kind;     // ConnKind
  int32_t rank;      // the caller's rank
  int32_t nranks;    // the caller's communicator size
  WireAddr addr;     // RootCheckIn: the caller's listen address; otherwise unused
};

struct MsgHeader {
  uint32_t magic;  // kMsgMagic
  int32_t tag;     // p2p: the user's tag; ring: the collective's sequence number
  uint64_t size;   // payload bytes that follow (<= kMaxMessageBytes)
};

/// The root's answer to a check-in; on kRootOk, nranks WireAddr entries follow.
/// It repeats the secret (sent only to a caller that presented it) so a rank knows it
/// reached the real root and not whatever else listens at that address.
struct RootReply {
  uint32_t magic;   // kReplyMagic
  uint32_t status;  // RootStatus
  int32_t nranks;
  uint32_t entryBytes;  // sizeof(WireAddr)
  uint8_t secret[kSecretBytes];
};
enum RootStatus : uint32_t {
  kRootOk = 0,
  kRootBadRank = 1,
  kRootNranksMismatch = 2,
  kRootDuplicateRank = 3,
  kRootBadHello = 4,
};
const char* rootStatusString(uint32_t status);

WireAddr toWire(const SockAddr& a);
bool fromWire(const WireAddr& w, SockAddr* out);

/// Compares two secrets in time independent of where they differ.
bool secretEqual(const uint8_t* a, const uint8_t* b);

/// Vets a freshly accepted connection without blocking: reads exactly the 16-byte secret
/// (checked in constant time before anything else is read), then exactly one Hello
/// (magic and version checked). Call progress() whenever the fd is readable.
class HandshakeReader {
 public:
  enum class State { Reading, Done, Failed };
  HandshakeReader(const uint8_t* secret, int64_t deadlineNs);

  State progress(int fd);
  const Hello& hello() const { return hello_; }
  /// Why the handshake failed (valid after Failed).
  const char* failure() const { return why_; }
  int64_t deadline() const { return deadline_; }

 private:
  uint8_t secret_[kSecretBytes];
  uint8_t gotSecret_[kSecretBytes];
  Hello hello_;
  size_t got_ = 0;  // bytes of secret + hello read so far
  int64_t deadline_;
  const char* why_ = "";
};

/// The root's checks of a vetted check-in hello that do not depend on other ranks:
/// returns kRootOk and the caller's listen address, or a RootStatus with `*detail` saying
/// why. `knownNranks` is the nranks of the ranks already checked in (-1: none yet).
uint32_t vetRootHello(const Hello& h, int knownNranks, SockAddr* listenAddr, const char** detail);

/// True when a p2p/ring message header read from a vetted peer may be followed: the magic
/// is right and the payload no larger than kMaxMessageBytes.
inline bool checkMsgHeader(const MsgHeader& h) {
  return h.magic == kMsgMagic && h.size <= kMaxMessageBytes;
}

/// Sends the secret and a hello on a new connection.
chorusResult_t sendHandshake(int fd, const uint8_t* secret, const Hello& hello, int64_t deadlineNs,
                             int abortFd, const char* what);

Hello makeHello(ConnKind kind, int rank, int nranks);

}  // namespace chorus
