#include "transports/shm/transport.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "src/core/asym_fence.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "transports/shm/connection.h"

namespace chorus {
namespace shm {
namespace {

struct ShmInfo {
  char name[96];
  uint64_t bytes;
  uint64_t pad[3];
};
static_assert(sizeof(ShmInfo) <= kConnectInfoBytes, "connect info too large");

}  // namespace

std::unique_ptr<Transport> createShmTransport(const TransportContext& ctx) {
  return std::make_unique<ShmTransport>(ctx.shm);
}

bool ShmTransport::canConnect(const PeerInfo& self, const PeerInfo& peer) const {
  return self.hostHash == peer.hostHash && !opt_.disable;
}

namespace {

// Fault the segments' pages in at setup, not on a collective's first pass over each FIFO
// slot (a fault per 4 KiB page in both processes: np 2, the first ~10 calls of a 32 KiB
// all-gather took 3-15x as long). Only while a rank's segments (its own and its same-host
// peers') come to at most kPrefaultMaxBytes: np 8 would populate ~270 MiB per rank and
// take over a second of init on 2 CPUs. MADV_POPULATE_WRITE needs Linux 5.14; an older
// kernel ignores it and faults on first touch as before.
constexpr size_t kPrefaultMaxBytes = size_t{64} << 20;

// The segments a rank maps: its own and those of the ranks on its host (the others are
// reached by another transport). 2 hosts x 2 ranks map 2 of 4 (each segment holds a FIFO
// per rank of the job: 17 MiB there), not 4: counted as 4, 68 MiB, nothing was populated
// and the first calls of a 1 MiB all-reduce took 2-4x as long.
size_t sameHostRanks(const TransportContext& ctx) {
  if (!ctx.peers || ctx.rank < 0 || static_cast<size_t>(ctx.rank) >= ctx.peers->size())
    return static_cast<size_t>(ctx.nranks);
  const uint64_t mine = (*ctx.peers)[static_cast<size_t>(ctx.rank)].hostHash;
  size_t k = 0;
  for (const PeerInfo& p : *ctx.peers) k += p.hostHash == mine ? 1 : 0;
  return std::max<size_t>(k, 1);
}

void prefault(void* base, size_t bytes, size_t nranks) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  if (nranks * bytes <= kPrefaultMaxBytes) (void)madvise(base, bytes, MADV_POPULATE_WRITE);
}

}  // namespace

ShmTransport::~ShmTransport() {
  if (!ownName_.empty() && !unlinked_) shm_unlink(ownName_.c_str());
  for (auto& m : peers_)
    if (m.base && m.base != own_.base) munmap(m.base, m.bytes);
  if (own_.base) munmap(own_.base, own_.bytes);
}

chorusResult_t ShmTransport::setup(const TransportContext& ctx, void* info) {
  access_.init(ctx);
  geo_.slotBytes = ctx.slotBytes;
  geo_.depth = ctx.fifoDepth;
  geo_.llMax = std::max<size_t>(ctx.llBytes, 64);
  // Boards (board.h) serve schedules of three or more ranks (src/algorithms/board.cc): a
  // slot's worth per buffer. Every rank derives the same size (segments must agree).
  geo_.boardBuffer = ctx.nranks > 2 ? ctx.slotBytes : 0;
  // Pair cells (pair_cells.h) serve two-rank exchanges (src/algorithms/pair.cc) and, where
  // one host holds all of a power-of-two number of ranks, the pairs rank ^ 2^k of recursive
  // halving and doubling (src/algorithms/pair_halving.cc): a slot's worth each, one area per
  // partner. In the segment's size, so ranks that disagree on CHORUS_PAIR_CELLS fail at
  // init (mapPeer) instead of waiting for each other in different schedules. Every rank
  // that maps a segment is on its host and counts the same ranks there.
  sameHost_ = sameHostRanks(ctx);
  const int n = ctx.nranks;
  const bool pow2 = n >= 2 && (n & (n - 1)) == 0;
  geo_.pairs = 0;
  if (opt_.pairCells && n == 2)
    geo_.pairs = 1;
  else if (opt_.pairCells && pow2 && sameHost_ == static_cast<size_t>(n))
    while ((1 << geo_.pairs) < n) ++geo_.pairs;
  geo_.pairCell = geo_.pairs > 0 ? ctx.slotBytes : 0;
  rank_ = ctx.rank;
  pids_.assign(static_cast<size_t>(ctx.nranks), 0);
  if (ctx.peers)
    for (size_t r = 0; r < ctx.peers->size() && r < pids_.size(); ++r)
      pids_[r] = (*ctx.peers)[r].pid;
  if (geo_.depth < 2 || geo_.depth > kMaxDepth)
    CHORUS_FAIL(chorusInvalidArgument, "shm FIFO depth %d outside [2, %d] (CHORUS_FIFO_DEPTH)",
                geo_.depth, kMaxDepth);
  const size_t bytes = geo_.segmentBytes(ctx.nranks);
  char name[96];
  snprintf(name, sizeof(name), "/chorus-%016llx-r%d-p%d",
           static_cast<unsigned long long>(ctx.commHash), ctx.rank, static_cast<int>(getpid()));
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) CHORUS_FAIL(chorusSystemError, "shm_open(%s) failed: %s", name, strerror(errno));
  ownName_ = name;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    close(fd);
    CHORUS_FAIL(chorusSystemError, "ftruncate(%s, %zu) failed: %s (is /dev/shm large enough?)",
                name, bytes, strerror(e));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (base == MAP_FAILED)
    CHORUS_FAIL(chorusSystemError, "mmap(%s, %zu) failed: %s", name, bytes, strerror(e));
  // This segment is read by its owner (everything in it is written *to* this rank): put its
  // pages on the owner's NUMA node before anything touches them (no-op on one-node hosts).
  if (opt_.bindLocal) opt_.bindLocal(base, bytes);
  prefault(base, bytes, sameHost_);
  own_ = {base, bytes};
  auto* hdr = static_cast<SegmentHeader*>(base);
  hdr->owner = ctx.rank;
  hdr->nranks = ctx.nranks;
  // Our sleepers issue the heavy asymmetric fence, so peers of registered processes may
  // ring our bell without one (connection.h, lightRing). Set before the name is published.
  hdr->bell.asymmetric.store(opt_.asymmetricBell && asymFenceReady() ? 1 : 0,
                             std::memory_order_relaxed);
  hdr->magic = kSegmentMagic;
  peers_.assign(static_cast<size_t>(ctx.nranks), Mapping{});
  peers_[static_cast<size_t>(ctx.rank)] = own_;

  ShmInfo si{};
  snprintf(si.name, sizeof(si.name), "%s", name);
  si.bytes = bytes;
  std::memcpy(info, &si, sizeof(si));
  CHORUS_INFO(kLogShm, "segment %s: %zu bytes, %d slots x %zu B, LL %zu B", name, bytes, geo_.depth,
              geo_.slotBytes, geo_.llMax);
  return chorusSuccess;
}

chorusResult_t ShmTransport::mapPeer(int peer, const void* peerInfo, size_t expectBytes) {
  if (peers_[static_cast<size_t>(peer)].base) return chorusSuccess;
  ShmInfo si;
  std::memcpy(&si, peerInfo, sizeof(si));
  si.name[sizeof(si.name) - 1] = '\0';
  if (si.bytes != expectBytes)
    CHORUS_FAIL(chorusInvalidUsage,
                "rank %d's shared segment is %llu bytes, expected %zu: ranks disagree on "
                "CHORUS_CHUNKSIZE/CHORUS_BUFFSIZE/CHORUS_LL_THRESHOLD/"
                "CHORUS_PAIR_CELLS",
                peer, static_cast<unsigned long long>(si.bytes), expectBytes);
  int fd = shm_open(si.name, O_RDWR, 0);
  if (fd < 0)
    CHORUS_FAIL(chorusSystemError, "shm_open(%s) of rank %d failed: %s", si.name, peer,
                strerror(errno));
  void* base = mmap(nullptr, si.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (base == MAP_FAILED)
    CHORUS_FAIL(chorusSystemError, "mmap of rank %d's segment failed: %s", peer, strerror(e));
  auto* hdr = static_cast<SegmentHeader*>(base);
  if (hdr->magic != kSegmentMagic || hdr->owner != peer) {
    munmap(base, si.bytes);
    CHORUS_FAIL(chorusInternalError, "segment %s does not belong to rank %d", si.name, peer);
  }
  prefault(base, si.bytes, sameHost_);
  peers_[static_cast<size_t>(peer)] = {base, static_cast<size_t>(si.bytes)};
  return chorusSuccess;
}

chorusResult_t ShmTransport::connect(const TransportContext& ctx, int peer, const void* peerInfo,
                                     std::unique_ptr<SendConn>* send,
                                     std::unique_ptr<RecvConn>* recv) {
  CHORUS_CHECK(mapPeer(peer, peerInfo, own_.bytes));
  char* peerBase = static_cast<char*>(peers_[static_cast<size_t>(peer)].base);
  char* ownBase = static_cast<char*>(own_.base);
  Doorbell* ownBell = &static_cast<SegmentHeader*>(own_.base)->bell;
  Doorbell* peerBell = &reinterpret_cast<SegmentHeader*>(peerBase)->bell;

  auto view = [&](char* segBase, int writer, Doorbell* local, Doorbell* remote) {
    char* area = segBase + geo_.areaOffset(writer);
    ConnView v;
    v.ctrl = reinterpret_cast<ConnCtrl*>(area);
    v.ll = area + geo_.ctrlBytes();
    v.slots = area + geo_.slotsOffset();
    v.geo = geo_;
    v.localBell = local;
    v.remoteBell = remote;
    v.peerPid = (*ctx.peers)[static_cast<size_t>(peer)].pid;
    v.peerRank = peer;
    v.lightRing = asymFenceReady() && remote->asymmetric.load(std::memory_order_relaxed) != 0;
    return v;
  };
  // We write into our area of the peer's segment; the peer writes into its area of ours.
  *send = std::make_unique<ShmSendConn>(view(peerBase, ctx.rank, ownBell, peerBell));
  *recv = std::make_unique<ShmRecvConn>(view(ownBase, peer, ownBell, peerBell));
  return chorusSuccess;
}

void ShmTransport::finishSetup() {
  std::vector<char*> bases;
  for (const Mapping& m : peers_) bases.push_back(static_cast<char*>(m.base));
  board_.init(geo_, rank_, static_cast<int>(peers_.size()), bases, pids_);
  pairs_.assign(static_cast<size_t>(geo_.pairs), ShmPairCells{});
  for (int k = 0; k < geo_.pairs; ++k)
    pairs_[static_cast<size_t>(k)].init(geo_, rank_, k, bases, pids_);
  if (!ownName_.empty() && !unlinked_) {
    shm_unlink(ownName_.c_str());
    unlinked_ = true;
  }
}

PairCells* ShmTransport::pairCells(int peer) {
  const int x = peer ^ rank_;
  for (size_t k = 0; k < pairs_.size(); ++k)
    if (x == (1 << k)) return pairs_[k].ready() ? &pairs_[k] : nullptr;
  return nullptr;
}

void ShmTransport::wakeAll() {
  if (!own_.base) return;
  wakeAllWaiters(&static_cast<SegmentHeader*>(own_.base)->bell);
}

}  // namespace shm
}  // namespace chorus
