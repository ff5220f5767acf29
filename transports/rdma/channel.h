// rdma/channel.h — one peer pair: a reliable-connected queue pair carrying both
// directions, the send staging slots and the receive FIFO the peer writes into.
//
// As in tcp/channel.h, the application thread and the progress thread share a channel
// through counters, each written by one side on its own cache line:
//   send: the application posts (sendHead); the progress thread writes each message into
//     the peer's FIFO and publishes sendFree = min(messages the peer has freed (credits),
//     messages whose writes completed locally). Slot s may be reused once sendFree > s.
//   receive: the progress thread publishes recvHead when a write with immediate arrives;
//     the application reads the slot in place and releases it (recvReleased); the progress
//     thread returns those slots to the peer as credits.
// A failure (error completion, failed post) is recorded once and ends both directions:
// an RC queue pair in the error state carries nothing any more.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "src/core/wait.h"
#include "transports/proxied/progress_thread.h"
#include "transports/proxied/slot_ring.h"
#include "transports/rdma/verbs.h"

namespace chorus {
namespace rdma {

class Proxy;

using proxied::SlotRing;

constexpr uint8_t kMsgLL = 1;  // the message is (part of) a low-latency message

// Failure, the peer's name ("rank 3 (mlx5_0:1 qp 0x1a2)") and the kick flag:
// proxied::ProxiedChannel.
struct Channel : proxied::ProxiedChannel {
  Channel(Proxy* p, Doorbell* b, int peerRank) : ProxiedChannel(b, peerRank), proxy(p) {}
  Proxy* const proxy;

  SlotRing sendRing;  // staging: the application writes here, the HCA reads
  SlotRing recvRing;  // FIFO: the peer's HCA writes here, the application reads
  MemRegion recvMr;   // registered for remote writes for the channel's whole life

  alignas(64) std::atomic<uint64_t> sendHead{0};      // application: messages posted
  alignas(64) std::atomic<uint64_t> sendFree{0};      // progress: see above
  alignas(64) std::atomic<uint64_t> recvHead{0};      // progress: messages arrived
  alignas(64) std::atomic<uint64_t> recvReleased{0};  // application: messages given back

  // Progress thread only.
  uint64_t qp = 0;
  uint64_t remoteFifo = 0;
  uint32_t remoteRkey = 0;
  uint64_t issued = 0;     // messages whose writes are posted
  uint64_t completed = 0;  // messages whose last write completed
  uint64_t credits = 0;    // messages the peer has freed (cumulative)
  uint64_t credited = 0;   // released messages already returned as credits
  uint64_t arrived = 0;    // messages received (== recvHead)
  int sendWrs = 0;         // writes posted, not completed
  int maxSendWrs = 0;
  bool stagingHeld = false;  // holds a registration-cache use while writes are in flight
  uint32_t stagingLkey = 0;
};

}  // namespace rdma
}  // namespace chorus
