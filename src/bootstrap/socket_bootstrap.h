// socket_bootstrap.h — the Bootstrap behind Bootstrap::init: a listener, a socket ring
// and lazily made point-to-point sockets, all driven by the calling thread.
//
// No background thread. Every wait goes through pollOnce(), which polls the abort
// eventfd, the rank's listener and every accepted connection together with whatever the
// call itself waits on. So while a rank waits for anything, it also accepts and vets new
// connections (secret first, within kHandshakeTimeoutNs) and drains messages that peers
// sent it early into a stash keyed by (peer, tag). That keeps senders of large messages
// moving (two ranks sending to each other cannot deadlock while either is inside any
// bootstrap call), and nothing runs behind the caller's back: no locks, no thread to
// stop on destruction, abort is one eventfd write. Outgoing p2p connections are made on
// the first send to a peer and reused; messages from one peer arrive in order.
#pragma once

#include <poll.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/net/socket.h"
#include "src/bootstrap/wire.h"

namespace chorus {

class SocketBootstrap final : public Bootstrap {
 public:
  SocketBootstrap(int rank, int nranks);
  ~SocketBootstrap() override;

  /// Makes the abort eventfd (the one fallible part of construction).
  chorusResult_t open();
  /// The body of init: listen, check in with the root, build the ring.
  chorusResult_t connect(const chorusUniqueId& id, int64_t deadlineNs) override;

  chorusResult_t allGather(void* data, size_t bytes) override;
  chorusResult_t barrier() override;
  chorusResult_t send(int peer, int tag, const void* data, size_t bytes) override;
  chorusResult_t recv(int peer, int tag, void* data, size_t bytes) override;
  void setDeadline(int64_t deadlineNs) override { deadline_.store(deadlineNs); }
  void abort() override;
  chorusResult_t probe(int peer, int64_t deadlineNs) const override;

  /// This rank's listener (for tests and logs).
  const SockAddr& listenAddr() const { return listenAddr_; }
  const SockAddr& peerAddr(int r) const { return peers_[static_cast<size_t>(r)]; }

 private:
  // An accepted connection: first its handshake, then (p2p) a stream of messages.
  struct InConn {
    Fd fd;
    SockAddr from;
    HandshakeReader hs;
    int peer = -1;  // set once the handshake is accepted
    bool dead = false;
    MsgHeader hdr{};
    size_t hdrGot = 0;
    std::vector<uint8_t> payload;
    size_t payGot = 0;
    InConn(Fd f, const SockAddr& a, const uint8_t* secret, int64_t deadline)
        : fd(std::move(f)), from(a), hs(secret, deadline) {}
  };
  enum class PeerIn : uint8_t { None, Open, Closed, Broken };

  int64_t callDeadline() const;
  chorusResult_t checkUsable(const char* op) const;
  chorusResult_t setup(const SockAddr& root, int64_t deadlineNs);
  /// Waits once for any of: abort, the listener, incoming connections and `extra` (whose
  /// revents are filled in); then accepts, vets and drains what is ready. Fails with
  /// chorusAborted, or chorusTimeout naming `what` once the deadline has passed.
  /// `wantPeer` is always drained even when the stash is full.
  chorusResult_t pollOnce(pollfd* extra, int nExtra, int64_t deadlineNs, int wantPeer,
                          const char* what);
  void acceptPending();
  void progressConn(InConn& c);
  void vetHello(InConn& c);
  void markPeer(int peer, PeerIn state, const std::string& why);
  /// One ring step: sends `sendBuf` to the next rank while receiving `recvBuf` from the
  /// previous one, both framed with `tag`.
  chorusResult_t ringExchange(const void* sendBuf, void* recvBuf, size_t bytes, uint32_t tag,
                              int64_t deadlineNs, const char* what);
  chorusResult_t ringCollective(void* data, size_t bytes, bool isBarrier);
  chorusResult_t connectPeer(int peer, int64_t deadlineNs);

  uint8_t secret_[kSecretBytes];
  Fd abortFd_;
  std::atomic<bool> aborted_{false};
  std::atomic<int64_t> deadline_{0};
  int64_t callTimeoutNs_ = 0;  // per-call wait when no deadline is set: init's span
  Fd listen_;
  SockAddr listenAddr_;
  std::vector<SockAddr> peers_;

  Fd ringSend_;            // to (rank+1) % nranks
  Fd ringRecv_;            // from (rank-1) % nranks
  std::string ringError_;  // set once the ring is unusable
  int connectState_ = 0;   // 0 not yet, 1 in progress or failed, 2 connected
  uint32_t collSeq_ = 0;

  std::vector<Fd> sendFds_;  // outgoing p2p, per peer, made on first send
  std::vector<std::unique_ptr<InConn>> conns_;
  std::vector<PeerIn> peerIn_;
  std::vector<std::string> peerWhy_;
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> stash_;
  uint64_t stashBytes_ = 0;
};

}  // namespace chorus
