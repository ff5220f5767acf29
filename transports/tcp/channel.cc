// channel.cc — the progress thread's half of a connection: stripes out of send slots onto
// the sockets, stripes off the sockets into receive slots.
#include "transports/tcp/channel.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "src/core/checks.h"
#include "src/core/debug.h"

namespace chorus {
namespace tcp {

namespace {

// Classifies a failed send/recv: a peer that went away is the peer's problem (remote), any
// other errno is ours (system). `wholeComm` as in ChannelHealth::markFailed.
void socketFailed(Channel* c, int err, const char* doing, bool wholeComm = true) {
  char msg[256];
  if (err == 0 || err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ETIMEDOUT) {
    snprintf(msg, sizeof(msg), "%s closed the connection%s%s (while %s)", c->peerDesc.c_str(),
             err ? ": " : "", err ? strerror(err) : "", doing);
    c->markFailed(chorusRemoteError, msg, wholeComm);
  } else {
    snprintf(msg, sizeof(msg), "connection with %s failed while %s: %s", c->peerDesc.c_str(), doing,
             strerror(err));
    c->markFailed(chorusSystemError, msg);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Send side

void SendChannel::progress() {
  if (!active || !healthy()) return;
  const uint64_t h = head.load(std::memory_order_acquire);
  const int nsocks = static_cast<int>(socks.size());
  const int own = ownSocks();
  // Count the stripes of newly posted messages before any socket may finish one.
  for (; seen < h; ++seen) {
    const size_t bytes = ring.sizes[ring.index(seen)];
    stripesLeft[ring.index(seen)] =
        static_cast<uint8_t>(onLane(bytes) ? 1 : stripeCount(bytes, own, minStripe));
  }

  for (int s = 0; s < nsocks; ++s) {
    Sock& k = socks[static_cast<size_t>(s)];
    for (;;) {
      if (!k.busy) {
        // Skip messages with no stripe on this socket (too small, or on the pair lane).
        while (k.next < h && !carries(ring.sizes[ring.index(k.next)], s)) ++k.next;
        if (k.next >= h) break;
        const size_t i = ring.index(k.next);
        const size_t total = ring.sizes[i];
        const int n = s == lane ? 1 : stripeCount(total, own, minStripe);
        const int j = s == lane ? 0 : s;  // which stripe this socket carries
        const size_t off = stripeOffset(total, j, n), end = stripeOffset(total, j + 1, n);
        k.hdr = StripeHeader{k.next,
                             static_cast<uint32_t>(total),
                             static_cast<uint32_t>(off),
                             static_cast<uint32_t>(end - off),
                             static_cast<uint16_t>(n),
                             ring.flags[i],
                             kStripeCheck};
        k.hdrDone = k.dataDone = 0;
        k.busy = true;
      }
      iovec iov[2];
      int niov = 0;
      if (k.hdrDone < sizeof(k.hdr))
        iov[niov++] = {reinterpret_cast<char*>(&k.hdr) + k.hdrDone, sizeof(k.hdr) - k.hdrDone};
      if (k.dataDone < k.hdr.len)
        iov[niov++] = {const_cast<char*>(ring.data(k.hdr.seq)) + k.hdr.offset + k.dataDone,
                       k.hdr.len - k.dataDone};
      ssize_t w = 0;
      if (niov > 0) {
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = static_cast<size_t>(niov);
        w = ::sendmsg(k.fd.get(), &m, MSG_NOSIGNAL);
        if (w < 0) {
          if (errno == EINTR) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;  // EPOLLOUT resumes us
          socketFailed(this, errno, "sending");
          return;
        }
        size_t left = static_cast<size_t>(w);
        size_t hd = std::min(left, sizeof(k.hdr) - k.hdrDone);
        k.hdrDone += hd;
        k.dataDone += left - hd;
      }
      if (k.hdrDone == sizeof(k.hdr) && k.dataDone == k.hdr.len) {
        --stripesLeft[ring.index(k.hdr.seq)];
        k.busy = false;
        ++k.next;
      }
    }
  }
  // Free slots in order once all their stripes are in the kernel.
  const uint64_t before = tailLocal;
  while (tailLocal < seen && stripesLeft[ring.index(tailLocal)] == 0) ++tailLocal;
  if (tailLocal != before) {
    tail.store(tailLocal, std::memory_order_release);
    ringDoorbell(bell);
  }
}

void SendChannel::peerGone() {
  int err = 0;
  for (auto& k : socks) {
    socklen_t l = sizeof(err);
    if (getsockopt(k.fd.get(), SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err != 0) break;
    err = 0;
  }
  // A peer that finished and left hangs up too: nothing is lost unless this rank still
  // had messages for it, so only then does the whole communicator fail.
  socketFailed(this, err, "sending", !drained());
}

// ---------------------------------------------------------------------------------------
// Receive side

// A header has been read on socket s: checks it against everything we know, so that a
// confused or hostile peer can make a connection fail but never write outside a slot.
bool RecvChannel::acceptHeader(int s, Sock& k) {
  const StripeHeader& h = k.hdr;
  const char* bad = checkStripeHeader(h, s, ring.slotBytes, k.minSeq, headLocal);
  if (bad) {
    char msg[256];
    snprintf(msg, sizeof(msg),
             "%s sent a malformed stripe header (%s: seq %llu, %u+%u of %u bytes, %u stripes)",
             peerDesc.c_str(), bad, static_cast<unsigned long long>(h.seq), h.offset, h.len,
             h.total, h.nstripes);
    publishComplete();  // the whole messages before this header first (readSock)
    markFailed(chorusRemoteError, msg);
    return false;
  }
  return true;
}

namespace {

enum class Recv { kGot, kWouldBlock, kClosed, kError };

// One recv() into buf[*done, want): kGot advances *done; kClosed is an orderly end of the
// stream; kError leaves errno for the caller.
Recv recvSome(int fd, char* buf, size_t want, size_t* done) {
  for (;;) {
    const ssize_t r = ::recv(fd, buf + *done, want - *done, 0);
    if (r > 0) {
      *done += static_cast<size_t>(r);
      return Recv::kGot;
    }
    if (r == 0) return Recv::kClosed;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? Recv::kWouldBlock : Recv::kError;
  }
}

// One readv() into two buffers: kGot sets *got (bytes into a, then b), else as recvSome.
Recv recvTwo(int fd, char* a, size_t na, char* b, size_t nb, size_t* got) {
  iovec iov[2] = {{a, na}, {b, nb}};
  for (;;) {
    const ssize_t r = ::readv(fd, iov, 2);
    if (r > 0) {
      *got = static_cast<size_t>(r);
      return Recv::kGot;
    }
    if (r == 0) return Recv::kClosed;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? Recv::kWouldBlock : Recv::kError;
  }
}

}  // namespace

// Moves socket s forward as far as it can. Returns false when it stopped for good (the
// channel failed); true when it would block or must wait for a free slot.
//
// Headers and what the stage read ahead come out of the socket's stage; the rest of a
// payload is read straight into its slot, by a readv that reads ahead into the stage too
// (aheadAfter). A read that returned less than it asked for left the socket empty: the loop stops
// there instead of paying a recv to learn so (the next poll, or the level-triggered epoll watch,
// finds whatever comes later).
// Every failure here publishes the messages that arrived whole before it first: a waiter
// woken by the failure delivers what is published before it raises the error
// (RecvEnd::next), and the progress thread may fail the channel between two of its looks.
bool RecvChannel::readSock(int s, Sock& k) {
  k.waitingSlot = false;
  bool emptied = false;  // a recv of this pass returned less than it asked: the socket is empty
  if (!k.stage) k.stage.reset(new char[kStageBytes]);
  // Refills the empty stage: kGot with bytes in it, or what recv said.
  auto refill = [&]() {
    if (emptied) return Recv::kWouldBlock;
    size_t got = 0;
    const size_t ahead = aheadAfter(k.lastLen);
    const Recv r = recvSome(k.fd.get(), k.stage.get(), ahead, &got);
    k.stageBeg = 0;
    k.stageEnd = got;
    if (r == Recv::kGot) emptied = got < ahead;
    return r;
  };
  // A recv that failed or hit the stream's end where more was due: the whole messages
  // first (above), then the failure. errno is read before publishComplete's doorbell.
  auto socketEnded = [&](Recv got, bool wholeComm) {
    const int err = got == Recv::kClosed ? 0 : errno;
    publishComplete();
    socketFailed(this, err, "receiving", wholeComm);
    return false;
  };
  for (;;) {
    if (!k.haveHdr) {
      if (k.stageBeg == k.stageEnd) {
        const Recv got = refill();
        if (got == Recv::kWouldBlock) return true;
        if (got == Recv::kClosed && k.hdrDone == 0) {
          // A clean end between stripes: the other sockets may still hold whole messages
          // (a sender flushes, then closes them one by one). checkClosed decides.
          k.eof = true;
          return true;
        }
        if (got != Recv::kGot) {
          // An error or a close between stripes (hdrDone 0) may be a peer that left; a
          // header cut short lost a message.
          return socketEnded(got, k.hdrDone > 0);
        }
      }
      const size_t take = std::min(k.stageEnd - k.stageBeg, sizeof(k.hdr) - k.hdrDone);
      std::memcpy(reinterpret_cast<char*>(&k.hdr) + k.hdrDone, k.stage.get() + k.stageBeg, take);
      k.stageBeg += take;
      k.hdrDone += take;
      if (k.hdrDone < sizeof(k.hdr)) continue;
      if (!acceptHeader(s, k)) return false;
      k.haveHdr = true;
      k.dataDone = 0;
    }
    const uint64_t seq = k.hdr.seq;
    // The slot for seq is free once the application released seq - depth.
    const uint64_t depth = static_cast<uint64_t>(ring.depth);
    if (discard) publishComplete();  // we are the consumer now
    if (seq >= released.load(std::memory_order_acquire) + depth) {
      stalled.store(true, std::memory_order_seq_cst);
      if (seq >= released.load(std::memory_order_seq_cst) + depth) {
        k.waitingSlot = true;  // readable, but nowhere to put it: the release kicks us
        return true;
      }
      stalled.store(false, std::memory_order_relaxed);
    }
    SlotState& st = slotState[ring.index(seq)];
    const size_t i = ring.index(seq);
    if (st.seq != seq) {
      st.seq = seq;
      st.nstripes = k.hdr.nstripes;
      st.got = 0;
      st.mask = 0;
      ring.sizes[i] = k.hdr.total;
      ring.flags[i] = k.hdr.flags;
    } else if (st.nstripes != k.hdr.nstripes || ring.sizes[i] != k.hdr.total ||
               ring.flags[i] != k.hdr.flags) {
      publishComplete();
      markFailed(chorusRemoteError,
                 peerDesc + " sent stripes of one message that disagree on its size or kind");
      return false;
    }
    char* const dst = ring.slot(seq) + k.hdr.offset;
    while (k.dataDone < k.hdr.len) {
      if (k.stageBeg < k.stageEnd) {
        const size_t take = std::min(k.stageEnd - k.stageBeg, size_t{k.hdr.len} - k.dataDone);
        std::memcpy(dst + k.dataDone, k.stage.get() + k.stageBeg, take);
        k.stageBeg += take;
        k.dataDone += take;
        continue;
      }
      // The stage is empty: one readv puts the rest of this payload straight into its
      // slot and whatever follows it (the next headers, whole small messages) into the
      // stage, so a stream of messages costs a read per batch, not two per message.
      if (emptied) return true;
      const size_t rest = k.hdr.len - k.dataDone;
      const size_t ahead = aheadAfter(k.hdr.len);
      size_t n = 0;
      const Recv got = recvTwo(k.fd.get(), dst + k.dataDone, rest, k.stage.get(), ahead, &n);
      if (got == Recv::kGot) {
        const size_t toSlot = std::min(n, rest);
        k.dataDone += toSlot;
        k.stageBeg = 0;
        k.stageEnd = n - toSlot;
        emptied = n < rest + ahead;
      }
      if (got == Recv::kWouldBlock) return true;
      if (got != Recv::kGot) return socketEnded(got, true);
    }
    k.lastLen = k.hdr.len;
    ++st.got;
    st.mask |= 1u << s;
    if (st.got == st.nstripes) lastOnLane = s == kPairLane;
    k.haveHdr = false;
    k.hdrDone = 0;
    k.minSeq = seq + 1;
  }
}

void RecvChannel::publishComplete() {
  const uint64_t before = headLocal;
  for (;;) {
    const SlotState& st = slotState[ring.index(headLocal)];
    if (st.seq != headLocal || st.got != st.nstripes) break;
    ++headLocal;
  }
  if (headLocal != before) {
    head.store(headLocal, std::memory_order_release);
    ringDoorbell(bell);
  }
  if (discard) released.store(headLocal, std::memory_order_release);
}

// Some sockets ended cleanly: fail once the next message can no longer complete, i.e.
// one of its stripes was due on a closed socket. Every message has a stripe on socket 0,
// or is one stripe on the pair lane, so a message not seen at all can't come once both
// are closed.
void RecvChannel::checkClosed() {
  const SlotState& st = slotState[ring.index(headLocal)];
  const bool known = st.seq == headLocal;
  // A message not seen at all starts on socket 0, or, if small, on the pair lane.
  const Sock& lane = socks[kPairLane];
  const bool laneEnded = !lane.fd.valid() || lane.eof;
  for (int s = 0; s < kMaxSocks; ++s) {
    const Sock& k = socks[static_cast<size_t>(s)];
    if (!k.fd.valid() || !k.eof) continue;
    if ((!known && s == 0 && laneEnded) || (known && s < st.nstripes && !(st.mask & (1u << s)))) {
      // Closed between messages: a peer that finished and left (nothing lost). Only a
      // wait on this peer fails; a stripe cut short fails the communicator (readSock).
      socketFailed(this, 0, "receiving", false);
      return;
    }
  }
}

void RecvChannel::progress(Read which) {
  if (!active || !healthy()) return;
  bool anyEof = false;
  const int first = which == kLaneOnly ? kPairLane : 0;
  const int last = which == kOwnOnly ? kPairLane - 1 : kPairLane;
  for (int s = first; s <= last; ++s) {
    Sock& k = socks[static_cast<size_t>(s)];
    if (!k.fd.valid()) continue;
    bool ok = k.eof || readSock(s, k);
    // Publish what is complete even if this socket just failed: the application may
    // consume messages that arrived whole before the peer went away.
    publishComplete();
    if (!ok) return;
    anyEof = anyEof || k.eof;
  }
  if (anyEof) checkClosed();
}

}  // namespace tcp
}  // namespace chorus
