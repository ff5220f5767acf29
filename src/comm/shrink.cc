#include "src/comm/shrink.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/comm/comm.h"
#include "src/core/checks.h"
#include "src/core/debug.h"

namespace chorus {

namespace {

constexpr int64_t kSlackNs = 2000000000ll;

// How long the leader waits for the survivors: they reach the handshake up to one timeout
// apart (a survivor next to the dead rank sees it at once, one further away when its own
// wait times out) and may then spend up to one timeout on their probes.
int64_t leaderWindowNs(const chorusComm* comm) { return 2 * comm->timeoutNs + kSlackNs; }
// How long a survivor waits for the leader's answer: the leader's window and then some.
int64_t replyWindowNs(const chorusComm* comm) { return 3 * comm->timeoutNs + 2 * kSlackNs; }

const char* kindName(uint32_t k) {
  return k == static_cast<uint32_t>(FtKind::FailedRanks) ? "chorusCommFailedRanks"
         : k == static_cast<uint32_t>(FtKind::Shrink)    ? "chorusCommShrink"
                                                         : "an unknown call";
}

struct FtMsg {
  FtHeader hdr{};
  std::vector<uint8_t> mask;
};

std::vector<uint8_t> pack(const FtMsg& m) {
  std::vector<uint8_t> out(sizeof(FtHeader) + m.mask.size());
  std::memcpy(out.data(), &m.hdr, sizeof(FtHeader));
  if (!m.mask.empty()) std::memcpy(out.data() + sizeof(FtHeader), m.mask.data(), m.mask.size());
  return out;
}

FtMsg makeMsg(FtKind kind, uint32_t round, chorusResult_t status, const std::string& detail,
              const std::vector<uint8_t>& mask) {
  FtMsg m;
  m.hdr.magic = kFtMagic;
  m.hdr.kind = static_cast<uint32_t>(kind);
  m.hdr.round = round;
  m.hdr.status = status;
  std::snprintf(m.hdr.detail, sizeof(m.hdr.detail), "%s", detail.c_str());
  m.mask = mask;
  return m;
}

std::string listText(const std::vector<uint8_t>& mask) {
  std::string s = "{";
  for (size_t i = 0; i < mask.size(); ++i)
    if (mask[i]) s += (s.size() > 1 ? ", " : "") + std::to_string(i);
  return s + "}";
}

chorusResult_t sendMsg(chorusComm* comm, int peer, const FtMsg& m) {
  std::vector<uint8_t> bytes = pack(m);
  return comm->bootstrap->send(peer, kFtTag, bytes.data(), bytes.size());
}

// Receives the message of this round from `peer`, skipping older rounds' leftovers.
chorusResult_t recvMsg(chorusComm* comm, int peer, FtKind kind, uint32_t round, FtMsg* out) {
  const size_t n = static_cast<size_t>(comm->nranks);
  std::vector<uint8_t> bytes(sizeof(FtHeader) + n);
  for (;;) {
    CHORUS_CHECK(comm->bootstrap->recv(peer, kFtTag, bytes.data(), bytes.size()));
    std::memcpy(&out->hdr, bytes.data(), sizeof(FtHeader));
    out->hdr.detail[sizeof(out->hdr.detail) - 1] = '\0';
    out->mask.assign(bytes.begin() + static_cast<ptrdiff_t>(sizeof(FtHeader)), bytes.end());
    if (out->hdr.magic != kFtMagic)
      CHORUS_FAIL(chorusRemoteError,
                  "rank %d sent a garbled failed-ranks/shrink message (magic 0x%08x)", peer,
                  out->hdr.magic);
    if (out->hdr.round < round) {
      CHORUS_INFO(kLogInit, "rank %d: skipped rank %d's message of an earlier round (%u < %u)",
                  comm->rank, peer, out->hdr.round, round);
      continue;
    }
    if (out->hdr.round > round)
      CHORUS_FAIL(chorusInvalidUsage,
                  "rank %d has made more chorusCommFailedRanks/chorusCommShrink calls on this "
                  "communicator (round %u) than rank %d (round %u): the survivors' calls do not "
                  "match",
                  peer, out->hdr.round, comm->rank, round);
    if (out->hdr.kind != static_cast<uint32_t>(kind))
      CHORUS_FAIL(chorusInvalidUsage, "rank %d called %s while rank %d called %s", peer,
                  kindName(out->hdr.kind), comm->rank, kindName(static_cast<uint32_t>(kind)));
    for (uint8_t& b : out->mask) b = b ? 1 : 0;
    return chorusSuccess;
  }
}

// Sets the bootstrap's deadline for the handshake and clears it again on the way out.
class DeadlineScope {
 public:
  DeadlineScope(Bootstrap* b, int64_t deadlineNs) : b_(b) { b_->setDeadline(deadlineNs); }
  ~DeadlineScope() { b_->setDeadline(0); }
  void set(int64_t deadlineNs) { b_->setDeadline(deadlineNs); }

 private:
  Bootstrap* b_;
};

int firstUnset(const std::vector<uint8_t>& mask) {
  for (size_t i = 0; i < mask.size(); ++i)
    if (!mask[i]) return static_cast<int>(i);
  return -1;
}

}  // namespace

chorusResult_t failedRanksAgree(chorusComm* comm, std::vector<int>* failed) {
  const int n = comm->nranks;
  const int me = comm->rank;
  const int64_t start = monotonicNs();
  const uint32_t round = ++comm->ftRound;
  std::vector<uint8_t> mask(static_cast<size_t>(n), 0);
  for (int r : comm->failedRanks) mask[static_cast<size_t>(r)] = 1;

  // 1. Probe every rank not known failed, all at once: a dead process's listener refuses
  //    at once; an unreachable host takes until the deadline.
  {
    std::vector<chorusResult_t> res(static_cast<size_t>(n), chorusSuccess);
    std::vector<std::thread> probes;
    const int64_t probeDeadline = start + comm->timeoutNs;
    Bootstrap* b = comm->bootstrap.get();
    for (int p = 0; p < n; ++p) {
      if (p == me || mask[static_cast<size_t>(p)]) continue;
      probes.emplace_back([b, p, probeDeadline, &res] {
        res[static_cast<size_t>(p)] = b->probe(p, probeDeadline);
      });
    }
    for (auto& t : probes) t.join();
    for (int p = 0; p < n; ++p)
      if (res[static_cast<size_t>(p)] != chorusSuccess) {
        mask[static_cast<size_t>(p)] = 1;
        CHORUS_INFO(kLogInit, "rank %d: rank %d failed its liveness probe (%s)", me, p,
                    chorusGetErrorString(res[static_cast<size_t>(p)]));
      }
  }

  // 2. Agree through the lowest rank this rank found alive.
  const int leader = firstUnset(mask);  // never -1: this rank is alive
  DeadlineScope dl(comm->bootstrap.get(), monotonicNs() + leaderWindowNs(comm));
  if (leader != me) {
    dl.set(monotonicNs() + replyWindowNs(comm));
    chorusResult_t r =
        sendMsg(comm, leader, makeMsg(FtKind::FailedRanks, round, chorusSuccess, "", mask));
    if (r != chorusSuccess)
      CHORUS_FAIL(r,
                  "chorusCommFailedRanks: rank %d could not reach rank %d, the lowest rank it "
                  "found alive, which gathers the survivors' views: %s",
                  me, leader, threadLastError());
    FtMsg reply;
    r = recvMsg(comm, leader, FtKind::FailedRanks, round, &reply);
    if (r != chorusSuccess)
      CHORUS_FAIL(r, "chorusCommFailedRanks: rank %d got no answer from rank %d: %s", me, leader,
                  threadLastError());
    if (reply.hdr.status != chorusSuccess)
      CHORUS_FAIL(static_cast<chorusResult_t>(reply.hdr.status), "chorusCommFailedRanks: %s",
                  reply.hdr.detail);
    if (reply.mask[static_cast<size_t>(me)])
      CHORUS_FAIL(chorusRemoteError,
                  "chorusCommFailedRanks: rank %d counted rank %d as failed (it did not answer "
                  "in time); failed ranks %s",
                  leader, me, listText(reply.mask).c_str());
    mask = reply.mask;
  } else {
    chorusResult_t code = chorusSuccess;
    std::string why;
    std::vector<uint8_t> agreed = mask;
    for (int p = 0; p < n; ++p) {
      if (p == me || mask[static_cast<size_t>(p)]) continue;
      FtMsg m;
      chorusResult_t r = recvMsg(comm, p, FtKind::FailedRanks, round, &m);
      if (r == chorusInvalidUsage) {  // mismatched calls: everyone fails
        if (code == chorusSuccess) {
          code = r;
          why = threadLastError();
        }
      } else if (r != chorusSuccess) {
        agreed[static_cast<size_t>(p)] = 1;  // alive a moment ago, silent now: failed
        CHORUS_WARN(kLogInit, "chorusCommFailedRanks: rank %d counts rank %d as failed: %s", me, p,
                    threadLastError());
      } else {
        for (int q = 0; q < n; ++q)
          agreed[static_cast<size_t>(q)] |= m.mask[static_cast<size_t>(q)];
      }
    }
    FtMsg reply = makeMsg(FtKind::FailedRanks, round, code, why, agreed);
    for (int p = 0; p < n; ++p)
      if (p != me && !mask[static_cast<size_t>(p)] && sendMsg(comm, p, reply) != chorusSuccess)
        CHORUS_INFO(kLogInit, "rank %d: could not send the failed-ranks answer to rank %d", me, p);
    if (code != chorusSuccess) CHORUS_FAIL(code, "chorusCommFailedRanks: %s", why.c_str());
    mask = agreed;
  }
  failed->clear();
  for (int p = 0; p < n; ++p)
    if (mask[static_cast<size_t>(p)]) failed->push_back(p);
  comm->failedRanks = *failed;
  CHORUS_INFO(kLogInit, "rank %d: failed ranks %s agreed in %.3f s", me, listText(mask).c_str(),
              static_cast<double>(monotonicNs() - start) / 1e9);
  return chorusSuccess;
}

chorusResult_t shrinkRendezvous(chorusComm* comm, const std::vector<uint8_t>& excluded,
                                const std::string& localError, ShrinkResult* out) {
  const int n = comm->nranks;
  const int me = comm->rank;
  const uint32_t round = comm->ftRound;     // counted by the caller
  const int leader = firstUnset(excluded);  // never -1: this rank is not excluded
  DeadlineScope dl(comm->bootstrap.get(), monotonicNs() + leaderWindowNs(comm));
  const chorusResult_t mine = localError.empty() ? chorusSuccess : chorusInvalidArgument;
  if (leader != me) {
    dl.set(monotonicNs() + replyWindowNs(comm));
    chorusResult_t r =
        sendMsg(comm, leader, makeMsg(FtKind::Shrink, round, mine, localError, excluded));
    if (r != chorusSuccess)
      CHORUS_FAIL(r,
                  "chorusCommShrink: rank %d could not reach rank %d, the lowest surviving rank, "
                  "which leads the shrink (if it failed, exclude it too): %s",
                  me, leader, threadLastError());
    FtMsg reply;
    r = recvMsg(comm, leader, FtKind::Shrink, round, &reply);
    if (r != chorusSuccess)
      CHORUS_FAIL(
          r, "chorusCommShrink: rank %d got no answer from rank %d, which leads the shrink: %s", me,
          leader, threadLastError());
    if (reply.hdr.status != chorusSuccess)
      CHORUS_FAIL(static_cast<chorusResult_t>(reply.hdr.status), "chorusCommShrink: %s",
                  reply.hdr.detail);
    if (mine != chorusSuccess)  // the leader cannot have accepted it; be sure anyway
      CHORUS_FAIL(mine, "chorusCommShrink: rank %d: %s", me, localError.c_str());
    out->id = reply.hdr.id;
  } else {
    chorusResult_t code = mine;
    std::string why = localError.empty() ? "" : "rank " + std::to_string(me) + ": " + localError;
    for (int p = 0; p < n; ++p) {
      if (p == me || excluded[static_cast<size_t>(p)]) continue;
      FtMsg m;
      chorusResult_t r = recvMsg(comm, p, FtKind::Shrink, round, &m);
      if (code != chorusSuccess) continue;  // the first reason is the one reported
      if (r != chorusSuccess) {
        code = r;
        why = "rank " + std::to_string(p) + " did not join the shrink: " + threadLastError();
      } else if (m.hdr.status != chorusSuccess) {
        code = static_cast<chorusResult_t>(m.hdr.status);
        why = "rank " + std::to_string(p) + ": " + m.hdr.detail;
      } else if (m.mask != excluded) {
        code = chorusInvalidArgument;
        why = "rank " + std::to_string(p) + " excludes " + listText(m.mask) + " but rank " +
              std::to_string(me) + " excludes " + listText(excluded) +
              ": every survivor must pass the same exclude list";
      }
    }
    if (code == chorusSuccess) {
      code = bootstrapCreateRoot(&out->id);
      if (code != chorusSuccess) why = std::string("no bootstrap root: ") + threadLastError();
    }
    FtMsg reply = makeMsg(FtKind::Shrink, round, code, why, {});
    reply.mask.assign(static_cast<size_t>(n), 0);
    if (code == chorusSuccess) reply.hdr.id = out->id;
    for (int p = 0; p < n; ++p)
      if (p != me && !excluded[static_cast<size_t>(p)] && sendMsg(comm, p, reply) != chorusSuccess)
        CHORUS_INFO(kLogInit, "rank %d: could not send the shrink answer to rank %d", me, p);
    if (code != chorusSuccess) CHORUS_FAIL(code, "chorusCommShrink: %s", why.c_str());
  }
  out->nranks = 0;
  for (int p = 0; p < n; ++p) {
    if (excluded[static_cast<size_t>(p)]) continue;
    if (p == me) out->rank = out->nranks;
    ++out->nranks;
  }
  return chorusSuccess;
}

}  // namespace chorus
