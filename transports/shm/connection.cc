#include "transports/shm/connection.h"

#include <cstring>

#include "src/core/checks.h"

namespace chorus {
namespace shm {

chorusResult_t peerCheck(const ConnView& v, const char* what) {
  if (v.peerPid <= 0 || !processGone(v.peerPid)) return chorusSuccess;
  return fail(chorusRemoteError, __FILE__, __LINE__,
              "rank %d (pid %d, same host) is gone: its process exited or was killed during %s",
              v.peerRank, v.peerPid, what ? what : "a transfer");
}

namespace {

inline std::atomic<uint64_t>* flagAt(char* buf, size_t offset) {
  return reinterpret_cast<std::atomic<uint64_t>*>(buf + offset);
}

// Whether the first `lines` lines all carry `want`: every flag loaded, no early exit, so the
// loads are in flight together and the lines arrive in parallel.
inline bool linesReady(char* buf, size_t lines, uint64_t want) {
  uint64_t diff = 0;
  for (size_t i = 0; i < lines; ++i)
    diff |= flagAt(buf, llLineFlagOffset(i))->load(std::memory_order_acquire) ^ want;
  return diff == 0;
}

// A short message's bytes out of its lines (whose flags were seen).
inline void gatherLines(const char* buf, size_t bytes, char* out) {
  if (bytes == 0) return;
  size_t i = 0;
  for (; bytes - i * kLlLineData > kLlLineData; ++i)
    std::memcpy(out + i * kLlLineData, buf + i * kLlLineBytes, kLlLineData);
  std::memcpy(out + i * kLlLineData, buf + i * kLlLineBytes, bytes - i * kLlLineData);
}

}  // namespace

chorusResult_t ShmSendConn::acquire(void** slot, const WaitCtx& w) {
  const uint64_t depth = static_cast<uint64_t>(v_.geo.depth);
  if (head_ - tailCache_ >= depth) {
    ConnCtrl* c = v_.ctrl;
    uint64_t want = head_ - depth + 1;
    chorusResult_t r = waitUntil(
        [c, want, this] {
          tailCache_ = c->tail.tail.load(std::memory_order_acquire);
          return tailCache_ >= want;
        },
        w, v_.localBell, v_.peerPid, v_.remoteBell);
    if (r != chorusSuccess) return r;
  }
  *slot = v_.slots + (head_ % depth) * v_.geo.slotBytes;
  return chorusSuccess;
}

void* ShmSendConn::tryAcquire() {
  const uint64_t depth = static_cast<uint64_t>(v_.geo.depth);
  if (head_ - tailCache_ >= depth) {
    tailCache_ = v_.ctrl->tail.tail.load(std::memory_order_acquire);
    if (head_ - tailCache_ >= depth) return nullptr;
  }
  return v_.slots + (head_ % depth) * v_.geo.slotBytes;
}

void ShmSendConn::post(size_t bytes) {
  const uint64_t depth = static_cast<uint64_t>(v_.geo.depth);
  __atomic_store_n(&v_.ctrl->head.sizes[head_ % depth], static_cast<uint32_t>(bytes),
                   __ATOMIC_RELAXED);
  ++head_;
  v_.ctrl->head.head.store(head_, std::memory_order_release);
  ringPeer(v_);
}

chorusResult_t ShmSendConn::sendLL(const void* data, size_t bytes, const WaitCtx& w) {
  // A long LL buffer holds llMax bytes: a larger message would run into the next one.
  // Callers keep to CHORUS_LL_THRESHOLD (or cut pieces); this catches one that does not.
  if (bytes > v_.geo.llMax)
    return fail(chorusInternalError, __FILE__, __LINE__,
                "%s: a %zu-byte low-latency message on shared memory, whose LL buffers hold "
                "%zu (CHORUS_LL_THRESHOLD)",
                w.what ? w.what : "a transfer", bytes, v_.geo.llMax);
  const uint64_t seq = ++llSeq_;
  const bool isLong = bytes > kLlLineMax;
  // The buffer we are about to write was last used by seq - depth (or earlier): the
  // receiver must have consumed it.
  const uint64_t depth = isLong ? kLlDepth : kLlShortDepth;
  if (seq > depth && llAckCache_ < seq - depth) {
    ConnCtrl* c = v_.ctrl;
    uint64_t want = seq - depth;
    chorusResult_t r = waitUntil(
        [c, want, this] {
          llAckCache_ = c->llAck.consumed.load(std::memory_order_acquire);
          return llAckCache_ >= want;
        },
        w, v_.localBell, v_.peerPid, v_.remoteBell);
    if (r != chorusSuccess) return r;
  }
  const uint64_t flag = llFlagValue(seq);
  const char* src = static_cast<const char*>(data);
  if (isLong) {  // contiguous, then the one flag
    char* buf = v_.ll + v_.geo.llLongOffset(seq);
    std::memcpy(buf, src, bytes);
    flagAt(buf, llLongFlagOffset(v_.geo.llMax))->store(flag, std::memory_order_release);
    ringPeer(v_);
    return chorusSuccess;
  }
  char* buf = v_.ll + v_.geo.llShortOffset(seq);
  const size_t lines = llLines(bytes);
  size_t i = 0;
  for (; i + 1 < lines; ++i) {  // full lines: data, then the line's flag
    std::memcpy(buf + i * kLlLineBytes, src + i * kLlLineData, kLlLineData);
    flagAt(buf, llLineFlagOffset(i))->store(flag, std::memory_order_release);
  }
  const size_t rest = bytes - i * kLlLineData;
  if (rest) std::memcpy(buf + i * kLlLineBytes, src + i * kLlLineData, rest);
  flagAt(buf, llLineFlagOffset(i))->store(flag, std::memory_order_release);
  ringPeer(v_);
  return chorusSuccess;
}

chorusResult_t ShmRecvConn::wait(const void** slot, size_t* bytes, const WaitCtx& w) {
  if (headCache_ <= tail_) {
    ConnCtrl* c = v_.ctrl;
    chorusResult_t r = waitUntil(
        [c, this] {
          headCache_ = c->head.head.load(std::memory_order_acquire);
          return headCache_ > tail_;
        },
        w, v_.localBell, v_.peerPid, v_.remoteBell);
    if (r != chorusSuccess) return r;
  }
  const uint64_t i = tail_ % static_cast<uint64_t>(v_.geo.depth);
  *slot = v_.slots + i * v_.geo.slotBytes;
  *bytes = __atomic_load_n(&v_.ctrl->head.sizes[i], __ATOMIC_RELAXED);
  return chorusSuccess;
}

bool ShmRecvConn::test(const void** slot, size_t* bytes) {
  if (headCache_ <= tail_) {
    headCache_ = v_.ctrl->head.head.load(std::memory_order_acquire);
    if (headCache_ <= tail_) return false;
  }
  const uint64_t i = tail_ % static_cast<uint64_t>(v_.geo.depth);
  *slot = v_.slots + i * v_.geo.slotBytes;
  *bytes = __atomic_load_n(&v_.ctrl->head.sizes[i], __ATOMIC_RELAXED);
  return true;
}

void ShmRecvConn::release() {
  ++tail_;
  v_.ctrl->tail.tail.store(tail_, std::memory_order_release);
  ringPeer(v_);
}

chorusResult_t ShmRecvConn::awaitLL(uint64_t seq, size_t bytes, char** at, const WaitCtx& w) {
  const uint64_t want = llFlagValue(seq);
  if (bytes > kLlLineMax) {
    *at = v_.ll + v_.geo.llLongOffset(seq);
    std::atomic<uint64_t>* flag = flagAt(*at, llLongFlagOffset(v_.geo.llMax));
    if (flag->load(std::memory_order_acquire) == want) return chorusSuccess;
    return waitUntil([flag, want] { return flag->load(std::memory_order_acquire) == want; }, w,
                     v_.localBell, v_.peerPid, v_.remoteBell);
  }
  char* buf = *at = v_.ll + v_.geo.llShortOffset(seq);
  const size_t lines = llLines(bytes);
  if (linesReady(buf, lines, want)) return chorusSuccess;
  return waitUntil([buf, lines, want] { return linesReady(buf, lines, want); }, w, v_.localBell,
                   v_.peerPid, v_.remoteBell);
}

chorusResult_t ShmRecvConn::waitLL(const void** data, size_t bytes, const WaitCtx& w) {
  char* buf;
  chorusResult_t r = awaitLL(llSeq_ + 1, bytes, &buf, w);
  if (r != chorusSuccess) return r;
  if (bytes > kLlLineMax || bytes <= kLlLineData) {
    *data = buf;  // long, or one line: in place
  } else {
    gatherLines(buf, bytes, staging_);
    *data = staging_;
  }
  return chorusSuccess;
}

void ShmRecvConn::releaseLL() {
  ++llSeq_;
  v_.ctrl->llAck.consumed.store(llSeq_, std::memory_order_release);
  ringPeer(v_);
}

chorusResult_t ShmRecvConn::recvLL(void* dst, size_t bytes, const WaitCtx& w) {
  char* buf;
  chorusResult_t r = awaitLL(llSeq_ + 1, bytes, &buf, w);
  if (r != chorusSuccess) return r;
  if (bytes > kLlLineMax)
    std::memcpy(dst, buf, bytes);
  else
    gatherLines(buf, bytes, static_cast<char*>(dst));
  releaseLL();
  return chorusSuccess;
}

}  // namespace shm
}  // namespace chorus
