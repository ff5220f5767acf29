// rdma/connection.h — the application's ends of an RDMA connection: the FIFO ends every
// proxied transport shares (proxied/fifo_ends.h) over an rdma channel's counters. LL
// messages ride the slot FIFO with their flag in the write's immediate.
#pragma once

#include "transports/proxied/fifo_ends.h"
#include "transports/rdma/channel.h"
#include "transports/rdma/proxy.h"

namespace chorus {
namespace rdma {

static_assert(kMsgLL == proxied::kMsgLL, "the immediate carries the FIFO's LL flag as is");

struct SendSide {
  using Channel = rdma::Channel;
  static SlotRing& ring(Channel* c) { return c->sendRing; }
  /// min(credits from the peer, writes completed locally): a full FIFO here is credit
  /// exhaustion or a staging slot whose write is still in flight.
  static uint64_t freed(Channel* c) { return c->sendFree.load(std::memory_order_acquire); }
  static void posted(Channel* c, uint64_t head) {
    c->sendHead.store(head, std::memory_order_release);
    c->proxy->kick(c);
  }
  /// The NIC writes from registered slots only: postFrom copies.
  static bool sendsFromUser(Channel*) { return false; }
  static void abandon(Channel*, const char*, chorusResult_t) {}
};

struct RecvSide {
  using Channel = rdma::Channel;
  static SlotRing& ring(Channel* c) { return c->recvRing; }
  static uint64_t arrived(Channel* c) { return c->recvHead.load(std::memory_order_acquire); }
  static void released(Channel* c, uint64_t tail) {
    c->recvReleased.store(tail, std::memory_order_release);
    c->proxy->kick(c);  // the progress thread returns the slot to the peer as a credit
  }
};

using RdmaSendConn = proxied::SendEnd<SendSide>;
using RdmaRecvConn = proxied::RecvEnd<RecvSide>;

}  // namespace rdma
}  // namespace chorus
