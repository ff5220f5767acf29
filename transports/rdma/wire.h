// rdma/wire.h — every record the RDMA transport sends, and how it packs work request ids
// and immediates.
//
// Two records travel during connect: ConnectInfo (128 bytes, allgathered: which
// device and link a rank has, and the slot geometry), and PairInfo (point-to-point, one
// per peer pair and direction, through the PeerExchange: the queue pair to aim at and
// the receive FIFO to write into). Queue pair numbers are per pair, so they cannot fit in
// the allgathered record.
// On the queue pair itself every message is an RDMA WRITE into the peer's FIFO slot whose
// last piece carries a 32-bit immediate; credits travel back as zero-length writes whose
// immediate says how many slots the receiver freed. Plain structs in host byte order: both
// ends run the same build, and magic values catch anything else.
#pragma once

#include <cstdint>

#include "transports/transport.h"  // the interface; a bare "transport.h" is rdma/transport.h

namespace chorus {
namespace rdma {

constexpr uint64_t kInfoMagic = 0x43484f5252444d31ull;  // "CHORRDM1"
constexpr uint64_t kPairMagic = 0x43484f5252445032ull;  // "CHORRDP2"
constexpr int kPairTag = 0x52444d;                      // PeerExchange tag of PairInfo

/// Published through the bootstrap allgather (kConnectInfoBytes).
struct ConnectInfo {
  uint64_t magic;
  int32_t rank;
  int32_t hasDevice;   // 0: this rank found no usable device (its peers must not use rdma)
  uint64_t slotBytes;  // must agree on both ends
  int32_t depth;
  int32_t port;
  uint8_t link;  // LinkLayer
  uint8_t pad[7];
  char device[64];  // for diagnostics
};
static_assert(sizeof(ConnectInfo) <= kConnectInfoBytes, "connect info too large");

/// Sent to one peer during connect: what that peer's queue pair must aim at.
struct PairInfo {
  uint64_t magic;
  int32_t from, to;  // ranks
  uint32_t qpn, psn;
  uint16_t lid;
  uint8_t useGrh;
  uint8_t mtu;
  uint8_t gid[16];
  uint64_t fifoAddr;  // our receive FIFO for messages from `to`
  uint32_t fifoRkey;
  int32_t depth;
  uint64_t slotBytes;
};

// Immediate of a write: bit 31 set = credit (bits 0..30: slots freed); clear = the last
// piece of a message (bit 30: low-latency flag, bits 0..29: message bytes).
constexpr uint32_t kImmCredit = 1u << 31;
constexpr uint32_t kImmLL = 1u << 30;
constexpr uint32_t kImmBytesMask = kImmLL - 1;
constexpr uint64_t kMaxSlotBytes = kImmBytesMask;  // a slot's size must fit the immediate

inline uint32_t immData(uint32_t bytes, bool ll) { return bytes | (ll ? kImmLL : 0u); }
inline uint32_t immCredit(uint32_t slots) { return kImmCredit | slots; }

// Work request ids: kind (2 bits) | peer rank (22 bits) | message number (40 bits).
enum class WrKind : uint64_t { Recv = 0, Piece = 1, Last = 2, Credit = 3 };
inline uint64_t wrId(WrKind k, int peer, uint64_t seq) {
  return (static_cast<uint64_t>(k) << 62) | (static_cast<uint64_t>(peer & 0x3fffff) << 40) |
         (seq & ((1ull << 40) - 1));
}
inline WrKind wrKind(uint64_t id) { return static_cast<WrKind>(id >> 62); }
inline int wrPeer(uint64_t id) { return static_cast<int>((id >> 40) & 0x3fffff); }
inline uint64_t wrSeq(uint64_t id) { return id & ((1ull << 40) - 1); }

/// Pieces a message of `bytes` is written in: the device's largest write bounds each.
inline uint64_t pieceCount(uint64_t bytes, uint64_t maxWrite) {
  if (bytes == 0 || maxWrite == 0) return 1;
  return (bytes + maxWrite - 1) / maxWrite;
}

}  // namespace rdma
}  // namespace chorus
