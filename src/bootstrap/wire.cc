#include "src/bootstrap/wire.h"

#include <cstring>

#include "src/core/checks.h"

namespace chorus {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the bootstrap wire format assumes little-endian hosts");

const char* rootStatusString(uint32_t status) {
  switch (status) {
    case kRootOk: return "ok";
    case kRootBadRank: return "rank out of range";
    case kRootNranksMismatch: return "nranks differs from the ranks already checked in";
    case kRootDuplicateRank: return "another process already checked in with this rank";
    case kRootBadHello: return "malformed check-in";
    default: return "unknown status";
  }
}

WireAddr toWire(const SockAddr& a) {
  WireAddr w;
  memset(&w, 0, sizeof(w));
  if (a.validFamily()) {
    w.len = a.len;
    memcpy(w.bytes, &a.ss, a.len);
  }
  return w;
}

bool fromWire(const WireAddr& w, SockAddr* out) {
  if (w.len > sizeof(w.bytes)) return false;
  return out->assign(w.bytes, w.len);
}

bool secretEqual(const uint8_t* a, const uint8_t* b) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < kSecretBytes; ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

HandshakeReader::HandshakeReader(const uint8_t* secret, int64_t deadlineNs)
    : deadline_(deadlineNs) {
  memcpy(secret_, secret, kSecretBytes);
  memset(gotSecret_, 0, sizeof(gotSecret_));
  memset(&hello_, 0, sizeof(hello_));
}

HandshakeReader::State HandshakeReader::progress(int fd) {
  for (;;) {
    IoStatus st;
    size_t before = got_;
    if (got_ < kSecretBytes) {
      st = recvSome(fd, gotSecret_, kSecretBytes, &got_);
      if (got_ == kSecretBytes && !secretEqual(gotSecret_, secret_)) {
        why_ = "wrong secret";
        return State::Failed;
      }
    } else {
      size_t h = got_ - kSecretBytes;
      st = recvSome(fd, &hello_, sizeof(hello_), &h);
      got_ = kSecretBytes + h;
      if (h == sizeof(hello_)) {
        if (hello_.magic != kHelloMagic) {
          why_ = "bad hello magic";
          return State::Failed;
        }
        if (hello_.version != kProtocolVersion) {
          why_ = "protocol version mismatch";
          return State::Failed;
        }
        return State::Done;
      }
    }
    if (st == IoStatus::Closed) {
      why_ = got_ < kSecretBytes ? "closed before sending the secret"
                                 : "closed before finishing the hello";
      return State::Failed;
    }
    if (st == IoStatus::Error) {
      why_ = "read error";
      return State::Failed;
    }
    if (st == IoStatus::WouldBlock || got_ == before) return State::Reading;
  }
}

uint32_t vetRootHello(const Hello& h, int knownNranks, SockAddr* listenAddr, const char** detail) {
  *detail = "";
  if (h.kind != static_cast<uint16_t>(ConnKind::RootCheckIn)) {
    *detail = " (not a root check-in)";
    return kRootBadHello;
  }
  if (h.nranks < 1 || h.nranks > kMaxRanks) {
    *detail = " (bad nranks)";
    return kRootBadHello;
  }
  if (!fromWire(h.addr, listenAddr)) {
    *detail = " (bad listen address)";
    return kRootBadHello;
  }
  if (knownNranks >= 0 && h.nranks != knownNranks) return kRootNranksMismatch;
  if (h.rank < 0 || h.rank >= h.nranks) return kRootBadRank;
  return kRootOk;
}

chorusResult_t sendHandshake(int fd, const uint8_t* secret, const Hello& hello, int64_t deadlineNs,
                             int abortFd, const char* what) {
  uint8_t buf[kSecretBytes + sizeof(Hello)];
  memcpy(buf, secret, kSecretBytes);
  memcpy(buf + kSecretBytes, &hello, sizeof(hello));
  CHORUS_CHECK(sendAll(fd, buf, sizeof(buf), deadlineNs, abortFd, what));
  return chorusSuccess;
}

Hello makeHello(ConnKind kind, int rank, int nranks) {
  Hello h;
  memset(&h, 0, sizeof(h));
  h.magic = kHelloMagic;
  h.version = kProtocolVersion;
  h.kind = static_cast<uint16_t>(kind);
  h.rank = rank;
  h.nranks = nranks;
  return h;
}

}  // namespace chorus
