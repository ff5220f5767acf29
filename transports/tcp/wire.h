// tcp/wire.h — every byte the TCP transport puts on the network, in one place.
//
// Three records: the connect info a rank publishes through the bootstrap (where its
// listener is, and the token a connecting peer must present), the hello that opens every
// socket (so the listener can tell its peers from strangers and knows which FIFO a socket
// feeds), and the stripe header that precedes each piece of a message. All are plain
// structs in host byte order: both ends run the same build on the same architecture, and
// the magic values catch anything else.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transports/transport.h"  // the interface; a bare "transport.h" is tcp/transport.h

namespace chorus {
namespace tcp {

constexpr int kMaxSocks = 16;  // CHORUS_NSOCKS upper bound
/// Where a receive channel keeps the pair lane: the lower rank of a pair reads, on its own
/// socket 0 to the higher rank, the higher rank's messages that fit one segment (so that
/// small messages of both directions share a socket and each one's ACK rides on the other
/// direction's next message). Such a message is one stripe, stripe 0 of 1.
constexpr int kPairLane = kMaxSocks;
constexpr uint64_t kInfoMagic = 0x43484f5254435031ull;   // "CHORTCP1"
constexpr uint64_t kHelloMagic = 0x43484f5248454c4full;  // "CHORHELO"
constexpr uint8_t kStripeCheck = 0xc7;                   // catches a desynchronized stream

/// Published through the bootstrap allgather (kConnectInfoBytes).
struct ConnectInfo {
  uint64_t magic;
  uint64_t token;  // random per communicator and rank: the password of its listener
  int32_t rank;
  int32_t nsocks;      // sockets this rank opens per peer (what its peers must accept)
  uint64_t slotBytes;  // must agree on both ends: a message never spans slots
  int32_t depth;       // must agree too: the receiver's window is the sender's
  uint32_t addrLen;
  uint8_t addr[32];       // sockaddr_in / sockaddr_in6 of the listener
  int32_t readsPairLane;  // 1: this rank reads its higher peers' small messages on its socket 0
};
static_assert(sizeof(ConnectInfo) <= kConnectInfoBytes, "connect info too large");

/// First bytes on every socket, from the connecting (sending) side.
struct Hello {
  uint64_t magic;
  uint64_t token;  // the listener's token, from its ConnectInfo
  int32_t rank;    // the sender
  int32_t index;   // which of the sender's sockets to this peer, 0..nsocks-1
};
static_assert(sizeof(Hello) == 24, "hello layout");

/// Flags of a message (one slot).
constexpr uint8_t kMsgLL = 1;  // carries (part of) a low-latency message

/// Precedes each stripe. A message of `total` bytes is cut into `nstripes` stripes; stripe
/// j travels on socket j, so every socket carries its stripes in message order and the
/// receiver can place each one by (seq, offset) without any cross-socket ordering.
struct StripeHeader {
  uint64_t seq;     // message number on this connection, from 0
  uint32_t total;   // message bytes
  uint32_t offset;  // of this stripe within the message
  uint32_t len;     // of this stripe
  uint16_t nstripes;
  uint8_t flags;
  uint8_t check;  // kStripeCheck
};
static_assert(sizeof(StripeHeader) == 24, "stripe header layout");

/// Why a hello read from a new socket is refused, or nullptr when it may be attached: it
/// must carry the listener's magic and token, name another rank of the communicator
/// (0 <= rank < nranks, not `self`) and a socket index below kMaxSocks. (The proxy then
/// also refuses a rank it has no channel for and a socket index already taken.)
inline const char* checkHello(const Hello& h, uint64_t token, int self, int nranks) {
  if (h.magic != kHelloMagic || h.token != token)
    return "not a Chorus peer of this communicator (wrong magic or token)";
  if (h.rank < 0 || h.rank >= nranks || h.rank == self) return "unknown rank";
  if (h.index < 0 || h.index >= kMaxSocks) return "bad socket index";
  return nullptr;
}

/// Why a stripe header read on socket `sock` of a receive channel is refused, or nullptr:
/// the check byte, 1..kMaxSocks stripes with `sock` among them (on the pair lane,
/// kPairLane: exactly one), the stripe inside a message
/// that fits a slot of `slotBytes`, and a sequence number not behind what this socket
/// (`minSeq`) or the channel (`headLocal`) has already completed. An accepted header can
/// never make the receiver write outside the slot.
inline const char* checkStripeHeader(const StripeHeader& h, int sock, size_t slotBytes,
                                     uint64_t minSeq, uint64_t headLocal) {
  if (h.check != kStripeCheck) return "bad check byte";
  if (sock == kPairLane
          ? h.nstripes != 1
          : (h.nstripes < 1 || h.nstripes > kMaxSocks || sock < 0 || sock >= h.nstripes))
    return "bad stripe count";
  if (h.total > slotBytes || h.offset > h.total || h.len > h.total - h.offset)
    return "stripe outside the slot";
  if (h.seq < minSeq || h.seq < headLocal) return "message out of order";
  return nullptr;
}

/// How many sockets a message of `bytes` is spread over: small messages stay on one socket
/// (one header, one syscall each way), large ones use all of them, never a stripe shorter
/// than `minStripe`.
inline int stripeCount(size_t bytes, int nsocks, size_t minStripe) {
  if (minStripe == 0) minStripe = 1;
  size_t k = (bytes + minStripe - 1) / minStripe;
  if (k < 1) k = 1;
  if (k > static_cast<size_t>(nsocks)) k = static_cast<size_t>(nsocks);
  return static_cast<int>(k);
}

/// Byte range of stripe j of k: [bytes*j/k, bytes*(j+1)/k), never empty when bytes >= k.
inline size_t stripeOffset(size_t bytes, int j, int k) {
  return bytes * static_cast<size_t>(j) / static_cast<size_t>(k);
}

}  // namespace tcp
}  // namespace chorus
