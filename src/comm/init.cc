// init.cc — building a communicator: bootstrap, who is where, transports, connections.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>

#include "src/comm/peer_exchange.h"
#include "src/comm/comm.h"
#include "src/comm/hostid.h"
#include "src/comm/reproducible.h"
#include "src/core/checks.h"
#include "src/core/live_handles.h"
#include "src/core/debug.h"
#include "src/core/params.h"
#include "src/core/timeout.h"
#include "kernels/host/host_reduce.h"
#include "src/comm/topo_exchange.h"
#include "src/topology/topo.h"
#include "src/tuning/names.h"
#include "transports/registry/registry.h"

namespace chorus {

int64_t commDeadline(const chorusComm* comm) { return monotonicNs() + comm->timeoutNs; }

void commRecordError(chorusComm* comm, chorusResult_t res) {
  if (!comm || res == chorusSuccess || res == chorusInProgress) return;
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  const char* detail = threadLastError();
  comm->lastError = *detail ? detail : chorusGetErrorString(res);
}

chorusResult_t recordOnComm(const chorusComm* comm, chorusResult_t res) {
  if (res != chorusSuccess && liveHandleHas(HandleKind::Comm, comm))
    commRecordError(const_cast<chorusComm*>(comm), res);
  return res;
}

chorusResult_t commCheck(const chorusComm* comm, const char* api) {
  if (comm == nullptr) CHORUS_FAIL(chorusInvalidArgument, "%s: comm is NULL", api);
  // Asked of the live set, never read from *comm: a destroyed one is freed memory.
  if (!liveHandleHas(HandleKind::Comm, comm))
    CHORUS_FAIL(chorusInvalidUsage, "%s: comm %p is not a live communicator (destroyed?)", api,
                static_cast<const void*>(comm));
  return chorusSuccess;
}

namespace {

// Waiting (src/core/wait.h): polls before the first clock read; the spin budget's start,
// floor and ceiling where each local rank has a core; and, where ranks outnumber cores, no
// spin and 2 ms of yielding before a sleep. A sleep and its wake-up cost a few µs to tens of µs
// (more in a VM whose idle vCPU halts), which is what the budget is measured against.
constexpr int kInlinePolls = 64;
constexpr int64_t kStartSpinNs = 200000;
constexpr int64_t kMinSpinNs = 20000;
constexpr int64_t kMaxSpinNs = 20000000;
constexpr int64_t kCrowdedSpinNs = 0;
constexpr int64_t kCrowdedYieldNs = 2000000;
constexpr int64_t kTcpBusyPollNs = 100000;  // CHORUS_TCP_BUSY_POLL_US=auto where not crowded
// CHORUS_NT_THRESHOLD=auto: the fixed threshold of the calls the cache share does not decide
// (src/tuning/output_stores.h), the setting's earlier default.
constexpr size_t kAutoNtBytes = size_t{8} << 20;

/// The CPUs this process may run on, as PeerInfo::cpuMask bits.
void ownCpuMask(uint64_t (&mask)[16]) {
  for (uint64_t& m : mask) m = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return;
  for (int cpu = 0; cpu < 1024 && cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) mask[cpu / 64] |= uint64_t{1} << (cpu % 64);
}

/// Sets each peer's ncpus to how many CPUs the ranks of its host may use between them (the
/// union of their masks), in one pass over the table; a host whose masks are all empty
/// keeps what its ranks reported.
void setHostCpus(std::vector<PeerInfo>* peers) {
  std::map<uint64_t, std::array<uint64_t, 16>> unions;
  for (const PeerInfo& p : *peers) {
    std::array<uint64_t, 16>& all = unions[p.hostHash];
    for (int i = 0; i < 16; ++i) all[static_cast<size_t>(i)] |= p.cpuMask[i];
  }
  for (PeerInfo& p : *peers) {
    int n = 0;
    for (uint64_t m : unions[p.hostHash]) n += __builtin_popcountll(m);
    if (n > 0) p.ncpus = n;
  }
}

/// Fills comm->kernelRanks / kernelCpus / kernelCrowded / nKernels /
/// maxRanksPerKernelCpu: every rank's KernelRecord is allgathered, each rank names the
/// lowest rank it can tell runs on its own kernel (src/comm/hostid.h), and those leaders
/// are allgathered too, so every rank groups the ranks from the same table.
/// kernelCrowded is this rank's own kernel (how it should wait); maxRanksPerKernelCpu is
/// the job's worst kernel, the same figure on every rank (the cost model's input: a
/// collective runs as slowly as its most crowded host).
chorusResult_t exchangeKernels(chorusComm* comm) {
  const size_t n = comm->peers.size();
  const size_t me = static_cast<size_t>(comm->rank);
  std::vector<KernelRecord> recs(n);
  recs[me] = ownKernelRecord();
  CHORUS_CHECK(comm->bootstrap->allGather(recs.data(), sizeof(KernelRecord)));
  std::vector<uint64_t> leaders(n, 0);
  leaders[me] = static_cast<uint64_t>(kernelLeader(recs, comm->rank));
  CHORUS_CHECK(comm->bootstrap->allGather(leaders.data(), sizeof(uint64_t)));
  std::vector<std::array<uint64_t, 16>> masks(n);
  for (size_t r = 0; r < n; ++r)
    std::copy(std::begin(comm->peers[r].cpuMask), std::end(comm->peers[r].cpuMask),
              masks[r].begin());
  const std::vector<KernelShare> shares = kernelShares(leaders, masks);
  const KernelShare& mine = shares[me];
  comm->kernelRanks = mine.ranks;
  comm->kernelCpus = mine.cpus > 0 ? mine.cpus : comm->ncpus;
  comm->kernelCrowded = mine.crowded();
  comm->maxRanksPerKernelCpu = 1.0;
  for (const KernelShare& k : shares)
    if (k.crowded())
      comm->maxRanksPerKernelCpu =
          std::max(comm->maxRanksPerKernelCpu, static_cast<double>(k.ranks) / k.cpus);
  std::sort(leaders.begin(), leaders.end());
  comm->nKernels = static_cast<int>(std::unique(leaders.begin(), leaders.end()) - leaders.begin());
  return chorusSuccess;
}

int usableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)) > 0
             ? static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))
             : 1;
}

chorusResult_t readTuning(chorusComm* comm) {
  CommTuning& t = comm->tuning;
  const int64_t slot = paramInt(Param::ChunkSize);
  const int64_t buff = paramInt(Param::BuffSize);
  if (slot < 4096 || slot > (1ll << 30) || slot % 64)
    CHORUS_FAIL(chorusInvalidArgument,
                "CHORUS_CHUNKSIZE=%lld must be a multiple of 64 between 4 KiB and 1 GiB",
                static_cast<long long>(slot));
  t.slotBytes = static_cast<size_t>(slot);
  int64_t depth = paramInt(Param::FifoDepth);
  if (depth <= 0) depth = std::clamp<int64_t>(buff / slot, 2, 14);
  t.fifoDepth = static_cast<int>(depth);
  const int64_t ll = paramInt(Param::LlThreshold);
  if (ll < 0 || ll > (16 << 20))
    CHORUS_FAIL(chorusInvalidArgument, "CHORUS_LL_THRESHOLD=%lld outside [0, 16M]",
                static_cast<long long>(ll));
  t.llBytes = static_cast<size_t>(ll);
  t.treeBytes = static_cast<size_t>(std::max<int64_t>(0, paramInt(Param::TreeThreshold)));
  {
    const std::string nt = lowerCase(paramString(Param::NtThreshold));
    t.ntAuto = nt == "auto" || nt.empty();
    t.ntBytes = t.ntAuto ? kAutoNtBytes
                         : static_cast<size_t>(std::max<int64_t>(0, paramInt(Param::NtThreshold)));
  }
  t.tcpPieceMin = static_cast<size_t>(std::max<int64_t>(0, paramInt(Param::TcpPieceMin)));
  {
    const std::string ss = lowerCase(paramString(Param::SlotStores));
    if (ss == "temporal")
      comm->slotStores.fix(SlotStores::Temporal);
    else if (ss == "streaming")
      comm->slotStores.fix(SlotStores::Streaming);
    else if (ss != "auto" && !ss.empty())
      CHORUS_FAIL(chorusInvalidArgument, "CHORUS_SLOT_STORES=%s: use auto, temporal or streaming",
                  ss.c_str());
  }
  t.algo = lowerCase(paramString(Param::Algo));
  t.proto = paramString(Param::Proto);
  return chorusSuccess;
}

// The transports' settings, from the parameter registry (transports read none themselves);
// their deadlines are the communicator's timeout.
void fillTransportOptions(TransportContext* ctx, int64_t timeoutNs) {
  auto clamped = [](Param p, int lo, int hi) {
    return static_cast<int>(std::clamp<int64_t>(paramInt(p), lo, hi));
  };
  ctx->shm.disable = paramInt(Param::ShmDisable) != 0;
  ctx->shm.pairCells = paramInt(Param::PairCells) != 0;
  ctx->shm.bindLocal = &topo::bindToLocalNuma;  // segments on the reading rank's NUMA node
  TcpOptions& tcp = ctx->tcp;
  tcp.ifname = paramString(Param::SocketIfname);
  // "auto" (the default): 2, or 1 where a kernel's ranks crowd its CPUs (connectTransports).
  tcp.nsocks = paramString(Param::Nsocks) == "auto"
                   ? 2
                   : clamped(Param::Nsocks, -1, 1 << 20);  // the transport rejects what is outside
  tcp.chunkBytes = paramInt(Param::TcpChunkSize);
  tcp.buffBytes = paramInt(Param::BuffSize);
  tcp.sockBuf = paramInt(Param::SocketBuf);
  // "auto" (the default): 100 us, or the crowded wait's yield phase (connectTransports).
  tcp.busyPollNs = paramString(Param::TcpBusyPollUs) == "auto"
                       ? kTcpBusyPollNs
                       : std::max<int64_t>(paramInt(Param::TcpBusyPollUs), 0) * 1000;
  tcp.pollMaxBytes = paramInt(Param::TcpPollMaxBytes);
  tcp.pairLane = paramInt(Param::TcpPairLane) != 0;
  tcp.sendFromUser = paramInt(Param::TcpSendFromUser) != 0;
  tcp.congestion = paramString(Param::TcpCongestion);
  tcp.timeoutNs = timeoutNs;
  RdmaOptions& rdma = ctx->rdma;
  rdma.disable = paramInt(Param::IbDisable) != 0;
  rdma.hca = paramString(Param::IbHca);
  rdma.gidIndex = clamped(Param::IbGidIndex, -1, 1 << 16);
  rdma.ackTimeout = clamped(Param::IbTimeout, 1, 31);
  rdma.retryCnt = clamped(Param::IbRetryCnt, 0, 7);
  rdma.sl = clamped(Param::IbSl, 0, 15);
  rdma.trafficClass = clamped(Param::IbTc, 0, 255);
  rdma.regCacheBytes = static_cast<size_t>(std::max<int64_t>(0, paramInt(Param::IbRegCache)));
  rdma.timeoutNs = timeoutNs;
}

chorusResult_t connectTransports(chorusComm* comm) {
  const int n = comm->nranks;
  comm->sendConn.resize(static_cast<size_t>(n));
  comm->recvConn.resize(static_cast<size_t>(n));
  int ntab = 0;
  const TransportEntry* table = transportTable(&ntab);
  TransportContext ctx{comm->rank,
                       n,
                       &comm->peers,
                       comm->commHash,
                       comm->tuning.slotBytes,
                       comm->tuning.fifoDepth,
                       comm->tuning.llBytes};
  BootstrapPeerExchange exchange(comm->bootstrap.get());
  ctx.exchange = &exchange;
  ctx.linkFailure = &comm->linkFailure;
  fillTransportOptions(&ctx, comm->timeoutNs);
  // Where this rank's kernel runs more of its ranks than it gives them CPUs, waits sleep
  // all the time (crowded mode: no spin, a short yield, then the doorbell), and each sleep
  // on an asymmetric doorbell pays a membarrier whose IPIs reach the other ranks' CPUs:
  // np 4 on 2 CPUs, 512 B-4 KiB all-reduce and broadcast ran up to 1.3x slower with it
  // (docs/PERF.md #perf-asym-fence). There the writers keep their fence.
  ctx.shm.asymmetricBell = !(comm->localRanks > comm->ncpus || comm->kernelCrowded);
  // "auto": where one kernel runs every rank, tcp links are virtual (veth, loopback) with no
  // bottleneck queue to pace for, and a pacing congestion control (BBR) sends from timers on
  // any CPU so segments arrive out of order and are resent (docs/PERF.md "TCP, third
  // pass"). Nor cubic: its HyStart ends slow start once the acks of one window span more
  // than the smallest round trip seen, a few microseconds here, so the first burst long
  // enough fixes the window (the first pieces' size decides every later call's bandwidth,
  // and congestion avoidance regrows a window by one segment per two windows acked:
  // hundreds of MB). Reno has no HyStart: slow start runs until a loss. So reno there;
  // across machines the system's choice stands (docs/PERF.md, "tcp 2 x 1 pieces").
  if (ctx.tcp.congestion == "auto") {
    ctx.tcp.congestion = comm->nKernels == 1 ? "reno" : "";
    if (comm->rank == 0)
      CHORUS_INFO(kLogNet, "tcp congestion control: %s (CHORUS_TCP_CONGESTION=auto, %d kernel%s)",
                  comm->nKernels == 1 ? "reno" : "the system's", comm->nKernels,
                  comm->nKernels == 1 ? "" : "s");
  }
  // CHORUS_NSOCKS=auto: one socket per peer and direction where some kernel runs as many of
  // the job's ranks as it has CPUs, or more (the same answer on every rank). There a second
  // socket adds no CPU to move its stripe (each rank has its caller and its progress thread
  // already, and the kernel's tcp work runs on the same CPUs), only a second stream of
  // segments, recv calls and epoll events for the same CPUs to serve (measured on 4 x 1 and
  // 2 x 2 namespaced hosts on 2 CPUs, 512 KiB all-reduce: 0.4-0.75x the time with two;
  // docs/PERF.md "Session of 2026-11-25, third stop: tcp mid sizes"; 2 x 1 on 2 CPUs, 1-256
  // MiB: 0.55-0.75x the time with two, "fourth stop: tcp 2 x 1 pieces").
  if (paramString(Param::Nsocks) == "auto" && comm->maxRanksPerKernelCpu >= 1.0) {
    ctx.tcp.nsocks = 1;
    if (comm->rank == 0)
      CHORUS_INFO(kLogNet,
                  "tcp: 1 socket per peer (CHORUS_NSOCKS=auto, %.2f ranks per cpu of "
                  "the most crowded kernel)",
                  comm->maxRanksPerKernelCpu);
  }
  // CHORUS_TCP_BUSY_POLL_US=auto: where this rank waits crowded (no spin; yield, then
  // sleep), the waiting caller reads its sockets for as long as it yields, not 100 us. Past
  // the budget the progress thread takes the sockets over, and on a kernel whose ranks
  // outnumber its CPUs every such hand-off is one more thread to schedule before the bytes
  // move, and one more scheduling round before the caller sees them (measured on 4 x 1
  // namespaced hosts on 2 CPUs, 1-16 MiB all-reduce: 0.6-0.8x the time with 100 us;
  // docs/PERF.md "fourth stop: tcp crowd").
  if (paramString(Param::TcpBusyPollUs) == "auto" && comm->waitPolicy.yieldFirstNs > 0) {
    ctx.tcp.busyPollNs = comm->waitPolicy.yieldFirstNs;
    if (comm->rank == 0)
      CHORUS_INFO(kLogNet,
                  "tcp: the waiting caller reads the sockets for %lld us "
                  "(CHORUS_TCP_BUSY_POLL_US=auto, crowded waits)",
                  static_cast<long long>(ctx.tcp.busyPollNs / 1000));
  }
  const PeerInfo& self = comm->peers[static_cast<size_t>(comm->rank)];
  for (int t = 0; t < ntab; ++t) {
    // Only set a transport up if it is needed by some peer pair (all ranks agree: every
    // rank sees the same peer table).
    bool needed = false;
    auto tr = table[t].create(ctx);
    for (int p = 0; p < n && !needed; ++p)
      if (p != comm->rank && !comm->sendConn[static_cast<size_t>(p)] &&
          tr->canConnect(self, comm->peers[static_cast<size_t>(p)]))
        needed = true;
    // Every rank must take part in the allgather if any rank needs it; decide globally.
    int flags[1] = {needed ? 1 : 0};
    std::vector<int> all(static_cast<size_t>(n));
    all[static_cast<size_t>(comm->rank)] = flags[0];
    CHORUS_CHECK(comm->bootstrap->allGather(all.data(), sizeof(int)));
    if (std::none_of(all.begin(), all.end(), [](int v) { return v != 0; })) continue;

    std::vector<char> infos(static_cast<size_t>(n) * kConnectInfoBytes, 0);
    CHORUS_CHECK(
        tr->setup(ctx, infos.data() + static_cast<size_t>(comm->rank) * kConnectInfoBytes));
    CHORUS_CHECK(comm->bootstrap->allGather(infos.data(), kConnectInfoBytes));
    for (int p = 0; p < n; ++p) {
      if (p == comm->rank || comm->sendConn[static_cast<size_t>(p)]) continue;
      if (!tr->canConnect(self, comm->peers[static_cast<size_t>(p)])) continue;
      CHORUS_CHECK(tr->connect(ctx, p, infos.data() + static_cast<size_t>(p) * kConnectInfoBytes,
                               &comm->sendConn[static_cast<size_t>(p)],
                               &comm->recvConn[static_cast<size_t>(p)]));
      // One line per peer pair, so "which transport did rank 3 use to reach rank 5" is
      // answerable from CHORUS_DEBUG=INFO alone (tests grep for it).
      CHORUS_INFO(kLogInit, "rank %d -> rank %d via %s (%s host)", comm->rank, p, tr->name(),
                  comm->peers[static_cast<size_t>(p)].hostHash == self.hostHash ? "same" : "other");
    }
    CHORUS_CHECK(comm->bootstrap->barrier());
    tr->finishSetup();
    CHORUS_INFO(kLogInit, "rank %d: transport %s connected", comm->rank, tr->name());
    comm->transports.push_back(std::move(tr));
  }
  for (int p = 0; p < n; ++p)
    if (p != comm->rank && !comm->sendConn[static_cast<size_t>(p)])
      CHORUS_FAIL(chorusInvalidUsage,
                  "rank %d: no transport can reach rank %d (it is on another host and this "
                  "build has only shared memory)",
                  comm->rank, p);
  return chorusSuccess;
}

}  // namespace

chorusResult_t commInit(chorusComm* comm, const chorusUniqueId& id, int nranks, int rank,
                        const chorusConfig_t* config) {
  if (comm->rank != rank) comm->rank = rank;  // written only when not set before
  if (comm->nranks != nranks) comm->nranks = nranks;
  comm->id = id;
  setLogRank(rank);
  // The host kernels' one-time ISA choice (CHORUS_KERNEL_ISA), before any kernel runs.
  const std::string wantIsa = paramString(Param::KernelIsa);
  const char* isa = kernels::selectIsa(wantIsa.c_str());
  // CHORUS_CONFIG_UNDEF_INT is negative: not given.
  comm->timeoutNs = effectiveTimeoutS(config ? config->timeoutSeconds : 0) * 1000000000ll;
  if (config && config->commName) comm->name = config->commName;
  CHORUS_CHECK(readTuning(comm));
  comm->commHash = fnv1a(id.internal, sizeof(id.internal));
  comm->ncpus = usableCpus();

  // The bootstrap object may exist already (non-blocking init creates it up front so that
  // chorusCommAbort can reach it while connect() waits for peers).
  if (!comm->bootstrap) CHORUS_CHECK(Bootstrap::create(rank, nranks, &comm->bootstrap));
  CHORUS_CHECK(comm->bootstrap->connect(id, monotonicNs() + comm->timeoutNs));

  comm->peers.assign(static_cast<size_t>(nranks), PeerInfo{});
  PeerInfo& me = comm->peers[static_cast<size_t>(rank)];
  me.hostHash = hostHash();
  me.pid = static_cast<int32_t>(getpid());
  me.rank = rank;
  me.cudaDev = -1;
  me.ncpus = comm->ncpus;
  ownCpuMask(me.cpuMask);
  CHORUS_CHECK(comm->bootstrap->allGather(comm->peers.data(), sizeof(PeerInfo)));
  for (int p = 0; p < nranks; ++p)
    if (comm->peers[static_cast<size_t>(p)].rank != p)
      CHORUS_FAIL(chorusInternalError, "bootstrap returned a scrambled peer table");
  // Reproducible mode must be the same on every rank (one more small all-gather).
  CHORUS_CHECK(commAgreeReproducible(comm, reproducibleRequested(config)));
  // Ranks bound one per core see one CPU each; what decides whether they crowd each other
  // is how many CPUs the host's ranks have between them. Every rank computes every host's
  // figure from the same table, so the cost model's inputs agree everywhere.
  setHostCpus(&comm->peers);
  comm->ncpus = comm->peers[static_cast<size_t>(rank)].ncpus;
  comm->localRanks =
      static_cast<int>(std::count_if(comm->peers.begin(), comm->peers.end(),
                                     [&](const PeerInfo& p) { return p.hostHash == me.hostHash; }));

  // CHORUS_NT_THRESHOLD=auto: this rank's share of its host's last-level cache (hwloc; none
  // known: the fixed threshold decides every call), src/tuning/output_stores.h.
  if (comm->tuning.ntAuto) {
    const topo::HostTopo& h = topo::detectedHost().host;
    const uint64_t llc = h.l3Bytes * static_cast<uint64_t>(std::max(0, h.l3Count));
    comm->tuning.cacheShareBytes =
        static_cast<size_t>(llc / static_cast<uint64_t>(std::max(1, comm->localRanks)));
  }
  comm->tuning.l2Bytes = static_cast<size_t>(topo::detectedHost().host.l2Bytes);

  // Hosts that share a kernel share its CPUs: namespaced hosts (tools/cluster) and
  // containers on one machine each count only their own ranks above, yet queue with the
  // others' for the same cores. The kernel's boot id, or a peer's process visible here with
  // its start tick, tells them apart from real machines (src/comm/hostid.h); the kernel's
  // ranks' affinity masks, ORed, are the CPUs they compete for.
  CHORUS_CHECK(exchangeKernels(comm));

  // Waiting policy (src/core/wait.h): spin for a budget learnt from the waits, then sleep
  // on the doorbell. Where ranks outnumber cores the peer may be queued behind the waiter:
  // do not spin, yield (to the next rank, most likely) for a while, then sleep.
  const int64_t spinNs = paramInt(Param::SpinNs);
  const bool hostCrowded = comm->localRanks > comm->ncpus;
  const bool crowded = hostCrowded || comm->kernelCrowded;
  comm->tuning.spin = crowded ? 0 : kInlinePolls;
  if (spinNs > 0)
    comm->waitPolicy.configure(spinNs, spinNs, spinNs, false);
  else if (crowded)
    comm->waitPolicy.configure(kCrowdedSpinNs, kCrowdedSpinNs, kCrowdedSpinNs, false);
  else
    comm->waitPolicy.configure(kStartSpinNs, kMinSpinNs, kMaxSpinNs, true);
  comm->waitPolicy.yieldFirstNs = crowded ? kCrowdedYieldNs : 0;
  comm->waitPolicy.unstack = !crowded;
  // A busy machine (other work runnable beside the ranks) cuts the learnt spin short, per
  // wait: src/core/wait.h, WaitPolicy::busySpinNs. Ranks with a peer on another host run a
  // progress thread each (tcp, rdma), which every message wakes: the kernel's ranks'
  // progress threads are the job's own runnable tasks, not other work.
  const bool anyRemote = comm->localRanks < nranks;
  const int64_t busySpinNs = spinNs > 0 || crowded ? 0 : paramInt(Param::SpinBusyNs);
  if (!comm->waitPolicy.enableBusyCheck(busySpinNs, anyRemote ? comm->kernelRanks : 0))
    CHORUS_INFO(kLogInit, "rank %d: /proc/loadavg unreadable: no busy-machine check", rank);
  CHORUS_INFO(kLogInit,
              "rank %d: %d local ranks on %d cpus; this kernel runs %d of the job's ranks on %d "
              "cpus (%d kernel%s in the job): waits %s%s",
              rank, comm->localRanks, comm->ncpus, comm->kernelRanks, comm->kernelCpus,
              comm->nKernels, comm->nKernels == 1 ? "" : "s",
              crowded                           ? "crowded (no spin, yield 2 ms, then sleep)"
              : comm->waitPolicy.busySpinNs > 0 ? "spin (less on a busy machine), then sleep"
                                                : "spin, then sleep",
              spinNs > 0                ? "; CHORUS_SPIN_NS fixes the spin"
              : crowded && !hostCrowded ? "; crowded by the kernel's other hosts"
                                        : "");

  // Ring and trees from the topology (host by host, socket by socket): src/topology.
  CHORUS_CHECK(commTopoInit(comm));
  if (nranks > 1 && nranks <= 64) {
    std::string text;
    for (int r : comm->ring.order) text += (text.empty() ? "" : " ") + std::to_string(r);
    CHORUS_INFO(kLogInit, "rank %d: ring order %s", rank, text.c_str());
  }
  CHORUS_CHECK(connectTransports(comm));
  CHORUS_CHECK(peerMemInit(comm));
  // Crowded host on the boards: waiters watch where the host's ranks wait and step off a
  // CPU that holds more than its share (src/core/wait.h, WaitPolicy::hostBells).
  if (crowded && comm->peerMem.board != nullptr && comm->localRanks == nranks &&
      paramInt(Param::CrowdBalance) != 0 && comm->ncpus > 1) {
    for (int r = 0; r < nranks; ++r)
      comm->waitPolicy.hostBells.push_back(comm->peerMem.board->bellOf(r));
    comm->waitPolicy.hostBellIndex = rank;
    comm->waitPolicy.cpuShare = (comm->localRanks + comm->ncpus - 1) / comm->ncpus;
  }
  commTuningInit(comm);  // the cost model's tables (and its TUNING log) are built here, once
  CHORUS_INFO(kLogInit,
              "rank %d/%d ready%s%s: %d local ranks on %d cpus, slots %d x %zu B, LL %zu B", rank,
              nranks, comm->name.empty() ? "" : " comm ", comm->name.c_str(), comm->localRanks,
              comm->ncpus, comm->tuning.fifoDepth, comm->tuning.slotBytes, comm->tuning.llBytes);
  // The CPU-dependent choices in one line, so a run on another machine says what it used.
  char share[160] = "";
  if (comm->tuning.cacheShareBytes)
    std::snprintf(share, sizeof share,
                  "; same-host all-gather, all-to-all, all-reduce and gather by this rank's "
                  "share of the last-level cache, %zu B",
                  comm->tuning.cacheShareBytes);
  CHORUS_INFO(
      kLogInit,
      "rank %d: host kernels %s (%s), streaming stores for results from %zu B%s "
      "(CHORUS_NT_THRESHOLD%s)",
      rank, isa,
      wantIsa.empty() ? "best this CPU runs; CHORUS_KERNEL_ISA forces one" : "CHORUS_KERNEL_ISA",
      comm->tuning.ntBytes, share, comm->tuning.ntAuto ? "=auto" : "");
  return chorusSuccess;
}

void commWaitIdle(chorusComm* comm) {
  while (comm->activeCalls.load(std::memory_order_acquire) > 0) {
    if (comm->abortFlag.load(std::memory_order_relaxed))
      for (auto& t : comm->transports) t->wakeAll();
    usleep(1000);
  }
}

void commFree(chorusComm* comm) {
  if (!comm) return;
  if (comm->initThread.joinable()) comm->initThread.join();
  liveHandleRemove(HandleKind::Comm, comm);
  comm->sendConn.clear();
  comm->recvConn.clear();
  comm->transports.clear();
  comm->bootstrap.reset();
  delete comm;
}

}  // namespace chorus
