// tcp/connection.h — the application's ends of a TCP connection: the FIFO ends every
// proxied transport shares (proxied/fifo_ends.h) over a tcp channel's counters.
#pragma once

#include "transports/proxied/fifo_ends.h"
#include "transports/tcp/channel.h"
#include "transports/tcp/proxy.h"

namespace chorus {
namespace tcp {

static_assert(kMsgLL == proxied::kMsgLL, "stripe headers carry the FIFO's LL flag as is");

struct SendSide {
  using Channel = SendChannel;
  static SlotRing& ring(SendChannel* c) { return c->ring; }
  /// Slots whose bytes the kernel has taken: free again.
  static uint64_t freed(SendChannel* c) { return c->tail.load(std::memory_order_acquire); }
  static void posted(SendChannel* c, uint64_t head) {
    c->head.store(head, std::memory_order_release);
    c->proxy->kick(c);
  }
};

struct RecvSide {
  using Channel = RecvChannel;
  static SlotRing& ring(RecvChannel* c) { return c->ring; }
  static uint64_t arrived(RecvChannel* c) { return c->head.load(std::memory_order_acquire); }
  static void released(RecvChannel* c, uint64_t tail) {
    c->released.store(tail, std::memory_order_seq_cst);
    // The progress thread stopped reading for want of a free slot: this is the one.
    if (c->stalled.load(std::memory_order_seq_cst)) {
      c->stalled.store(false, std::memory_order_relaxed);
      c->proxy->kick(c);
    }
  }
};

using TcpSendConn = proxied::SendEnd<SendSide>;
using TcpRecvConn = proxied::RecvEnd<RecvSide>;

}  // namespace tcp
}  // namespace chorus
