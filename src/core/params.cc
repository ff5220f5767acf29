#include "src/core/params.h"

#include "src/core/timeout.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace chorus {
namespace {

#define CHORUS_TIMEOUT_TEXT_(x) #x
#define CHORUS_TIMEOUT_TEXT(x) CHORUS_TIMEOUT_TEXT_(x)  // the number of src/core/timeout.h

// The one table. Keep docs/ENV.md in step (tests/unit/test_params.cc checks it).
const ParamInfo kParams[] = {
    {"CHORUS_DEBUG", "WARN", "Log level: NONE, WARN, INFO or TRACE."},
    {"CHORUS_DEBUG_SUBSYS", "ALL",
     "Comma list of INIT,COLL,P2P,SHM,NET,BOOTSTRAP,TUNING,GRAPH,ENV,ALLOC or ALL; ^X excludes."},
    {"CHORUS_DEBUG_FILE", "", "Write logs here instead of stderr; %h is the host, %p the pid."},
    {"CHORUS_TIMEOUT_S", CHORUS_TIMEOUT_TEXT(CHORUS_DEFAULT_TIMEOUT_S),
     "Deadline in seconds for every wait (bootstrap, connect, FIFO)."},
    {"CHORUS_BUFFSIZE", "4M", "Bytes of shared FIFO per connection (slots x slot size)."},
    {"CHORUS_CHUNKSIZE", "512K", "Bytes per FIFO slot: the pipelining unit of ring algorithms."},
    {"CHORUS_FIFO_DEPTH", "0", "Slots per connection; 0 means BUFFSIZE / CHUNKSIZE."},
    {"CHORUS_LL_THRESHOLD", "16K",
     "Largest message (bytes) the low-latency protocol carries; the cost model picks direct/LL "
     "only up to it."},
    {"CHORUS_TREE_THRESHOLD", "0",
     "Largest all-reduce (bytes) for which tree is preferred over ring; 0 lets the cost model "
     "decide."},
    {"CHORUS_NT_THRESHOLD", "auto",
     "Outputs at least this large are written with streaming (non-temporal) stores; auto: "
     "same-host all-gather, all-to-all and all-reduce stream where a rank's input and output "
     "exceed its share of the host's last-level cache, gather where the root's output reaches "
     "it, other calls from 8M."},
    {"CHORUS_ALGO", "",
     "Restrict the cost model to these algorithms: ring, tree, direct, doubling (all-reduce "
     "recursive doubling, opt-in: only when named), or a list (ring,tree); ^list excludes. "
     "Where none of them can run a call, the default plan runs it (a WARN says so once "
     "per collective), or the call fails under CHORUS_ALGO_STRICT=1."},
    {"CHORUS_PROTO", "", "Restrict the protocol: LL or Simple; ^X excludes one."},
    {"CHORUS_ALGO_STRICT", "0",
     "1: a call that CHORUS_ALGO / CHORUS_PROTO cannot run fails with chorusInvalidUsage "
     "instead of running the default plan."},
    {"CHORUS_SPIN_NS", "0",
     "How long (ns) a waiter spins before it sleeps on its doorbell; 0 adapts it per "
     "communicator (docs/ARCHITECTURE.md, Waiting)."},
    {"CHORUS_HOSTID", "", "Overrides the host identity (hostname + boot id) used to group ranks."},
    {"CHORUS_SOCKET_IFNAME", "",
     "Interface (prefix) for bootstrap sockets; ^eth0 excludes, =eth0 matches exactly."},
    {"CHORUS_INIT", "", "Rendezvous for chorusCommInitFromEnv: tcp://host:port or file:///path."},
    {"CHORUS_SECRET", "",
     "Shared secret for CHORUS_INIT=tcp:// rendezvous (default: derived from the address)."},
    {"CHORUS_CHECK_POINTERS", "1",
     "Check that user buffers are mapped host memory before touching them (1) or not (0)."},
    {"CHORUS_KERNEL_ISA", "",
     "Force a lower host kernel variant (baseline, avx2) for debugging; a higher one than the CPU "
     "runs is ignored."},
    {"CHORUS_NSOCKS", "auto",
     "TCP sockets per peer pair and direction; each message is striped across them (1 to 16); "
     "auto: 2, or 1 where a kernel runs as many of the job's ranks as it has CPUs, or more."},
    {"CHORUS_SOCKET_BUFSIZE", "4M",
     "SO_SNDBUF/SO_RCVBUF asked for on TCP transport sockets (the kernel may cap it; 0 keeps its "
     "autotuning)."},
    {"CHORUS_SHM_DISABLE", "0",
     "1: never use shared memory, so ranks of one host talk over TCP (testing, comparisons)."},
    {"CHORUS_TCP_CHUNKSIZE", "512K",
     "Bytes per FIFO slot on TCP connections (never less than CHORUS_CHUNKSIZE)."},
    {"CHORUS_INIT_SERVED", "0",
     "1: the CHORUS_INIT=tcp:// root is already served by the launcher (chorusrun); rank 0 only "
     "joins it."},
    {"CHORUS_SLURM_PORT_BASE", "29500",
     "Under Slurm without CHORUS_INIT, the rendezvous port is this plus a number derived from the "
     "job and step ids."},
    {"CHORUS_FLIGHT_RECORDER_SIZE", "1024",
     "Operations each communicator remembers for hang reports (rounded up to a power of two; 0 "
     "turns the flight recorder off)."},
    {"CHORUS_FLIGHT_RECORDER_DIR", "",
     "Where every rank writes its flight recorder (on a timeout or peer failure, and at finalize, "
     "destroy and abort); read with tools/chorus-hang-report."},
    {"CHORUS_CHECK_MODE", "0",
     "1: before each collective, ranks check that they all make the same call (collective, count, "
     "type, op, root); a mismatch fails on every rank."},
    {"CHORUS_TOPO_FILE", "",
     "Read this host's topology from an hwloc XML file instead of detecting it."},
    {"CHORUS_TOPO_DUMP_FILE", "",
     "Write the detected topology of each host here as hwloc XML (%h is the host); rank order and "
     "graphs go to the GRAPH log."},
    {"CHORUS_TUNING_FILE", "",
     "Cost-model constants: lines 'shm|tcp LATENCY_US BANDWIDTH_GBPS', 'set NAME VALUE', 'COLL "
     "ALGO PROTO LATENCY_US BANDWIDTH_GBPS|off'."},
    {"CHORUS_CUDA_DISABLE", "0",
     "1: behave as a host-only build (chorusStreamFromCuda refused, no CUDA call made for "
     "pointers)."},
    {"CHORUS_CUDA_PIECE_BYTES", "4M",
     "Device buffers are staged and reduced in pieces of this many bytes per block (0: whole "
     "call); same on every rank."},
    {"CHORUS_CUDA_PATH", "auto",
     "Device buffers of ranks on one host: auto (GPU kernels on peers' device memory where "
     "every rank can, else host staging), staging, device (refuse calls that cannot); same "
     "on every rank."},
    {"CHORUS_CUDA_TWO_SHOT_BYTES", "256K",
     "Device path all-reduce: pieces of at least this many bytes reduce-scatter then "
     "all-gather (two-shot) instead of every rank reducing everything (one-shot)."},
    {"CHORUS_IB_DISABLE", "0",
     "1: never use RDMA (InfiniBand/RoCE); peers on other hosts use tcp."},
    {"CHORUS_IB_HCA", "",
     "RDMA devices to use: comma list of name prefixes, each optionally :port; =list matches "
     "exactly, ^list excludes."},
    {"CHORUS_IB_GID_INDEX", "-1",
     "GID table index for RoCE (or IB with a global route); -1 picks a RoCE v2 GID, IPv4-mapped "
     "first."},
    {"CHORUS_IB_TIMEOUT", "18", "RDMA ACK timeout exponent (4.096 us x 2^value) per retry."},
    {"CHORUS_IB_RETRY_CNT", "7",
     "RDMA retransmissions before a write fails with an error completion (0 to 7)."},
    {"CHORUS_IB_SL", "0", "InfiniBand service level of the queue pairs."},
    {"CHORUS_IB_TC", "0", "Traffic class of RoCE / GRH packets."},
    {"CHORUS_IB_REG_CACHE", "1G",
     "Bytes of RDMA send buffers kept registered; least recently used idle ones are deregistered "
     "past it."},
    {"CHORUS_TCP_BUSY_POLL_US", "auto",
     "How long a thread waiting for a TCP message reads the sockets itself before the progress "
     "thread's epoll takes over and the thread sleeps (microseconds; 0: never poll). auto: 100, "
     "or where this rank's kernel runs more ranks than it has CPUs, as long as the wait yields "
     "(2000)."},
    {"CHORUS_TCP_POLL_MAX_BYTES", "1G",
     "After a TCP message larger than this a waiting thread does not read the sockets itself: the "
     "progress thread keeps reading ahead while it reduces. Default: no limit (a slot is at most "
     "CHORUS_TCP_CHUNKSIZE): the caller reads every size, no thread hand-off."},
    {"CHORUS_SINGLE_COPY_THRESHOLD", "8K",
     "Same-host all-gather, all-to-all, broadcast, gather and scatter of at least this many "
     "result bytes copy straight between the ranks' buffers (CMA or registered memory); -1: "
     "never."},
    {"CHORUS_CMA_DISABLE", "0",
     "1: never read peers' memory with process_vm_readv (registered chorusMemAlloc buffers "
     "are still read directly)."},
    {"CHORUS_CMA_MAX", "auto",
     "auto: each same-host collective times process_vm_readv/writev (CMA) against the FIFO per "
     "size and uses the faster (each size starts on the FIFO where an init probe finds the "
     "kernel's copy 4x slower than a user copy); timed: the same without that start; a "
     "number: CMA only for results below this many bytes, the FIFO above (unless "
     "registered); 0: never; -1: always."},
    {"CHORUS_TCP_CONGESTION", "auto",
     "TCP congestion control of the tcp transport's sockets (TCP_CONGESTION); auto: reno when "
     "one kernel runs every rank (namespaced hosts, containers: virtual links), else the "
     "system's; empty: the system's. A name the kernel refuses keeps the default (logged)."},
    {"CHORUS_SLOT_STORES", "auto",
     "How the shared-memory ring all-reduce, ring all-gather and all-to-all write the FIFO "
     "slots their peers read: temporal, streaming, or auto (both timed on the calls themselves, "
     "the faster used, per collective; logged at INFO)."},
    {"CHORUS_SPIN_BUSY_NS", "5000",
     "Where more tasks are runnable than the machine has CPUs (/proc/loadavg), a waiter "
     "spins at most this long (ns) before it sleeps on its doorbell, whatever its learnt "
     "budget; 0: the learnt budget holds on a busy machine too. Not used where CHORUS_SPIN_NS "
     "fixes the spin or the job's ranks outnumber their CPUs."},
    {"CHORUS_TCP_PIECE_MIN", "64K",
     "Two ranks over TCP: the ring all-reduce cuts each rank's half into pieces of a quarter "
     "of it, but no smaller than this (nor larger than a slot), so the socket carries one "
     "piece while the last is reduced; 0: one piece per half, as over shared memory."},
    {"CHORUS_TCP_PAIR_LANE", "1",
     "1: the higher rank of a pair sends its TCP messages that fit one segment on the lower "
     "rank's socket, so small messages of both directions share a socket and their ACKs ride "
     "on data; 0: every rank sends only on the sockets it opened."},
    {"CHORUS_TCP_SEND_FROM_USER", "1",
     "1: collectives over TCP hand the kernel their pieces where they lie (the caller's "
     "buffers), and a call returns once the kernel has taken them; 0: each piece is copied "
     "into a send slot first."},
    {"CHORUS_SPIN_STREAM_NS", "-2",
     "A number >= 0: a host stream's worker thread spins at most this long (ns) before it "
     "sleeps on its doorbell, whatever the learnt budget (its caller is not blocked: DDP's "
     "backward pass computes beside it); -1: no cap; -2: no spin while more tasks are "
     "runnable than the machine has CPUs, no cap otherwise. Not a cap on a fixed "
     "CHORUS_SPIN_NS."},
    {"CHORUS_REPRODUCIBLE", "0",
     "1: every floating-point sum, product and average (all-reduce, reduce, reduce-scatter) "
     "adds in rank order, the same bits whatever the algorithm, protocol, slot size, "
     "transport or host layout for a given world size (docs/REPRODUCIBLE.md); 0: the fastest "
     "plan. chorusConfig_t::reproducible overrides it per communicator; every rank must agree."},
    {"CHORUS_ASYM_FENCE", "1",
     "1: where the kernel offers membarrier's global expedited command, the shared-memory "
     "doorbells and a communicator's calls from one thread pay no store-load fence per call "
     "(a sleeper or another thread pays a membarrier instead); 0: full fences on both sides."},
    {"CHORUS_PAIR_CELLS", "1",
     "1: two ranks on one host (shared memory) run the all-gather, all-to-all and all-reduce "
     "pieces that would go through the FIFO slots through two shared cells the ranks swap at "
     "every exchange (each writes the cell it last read; no credit goes back); 0: the FIFO. "
     "Every rank must use the same value (init fails otherwise)."},
    {"CHORUS_CROWD_BALANCE", "1",
     "1: where one host's ranks outnumber its CPUs and share the boards, a waiting rank on a "
     "CPU that holds more than its share of them steps to an allowed CPU that holds fewer "
     "(at most every 100 ms per rank; its affinity mask is left as it was); 0: the kernel's "
     "placement alone."},
    {"CHORUS_REPRO_SCHEDULE", "auto",
     "Reproducible all-reduce across hosts (equal, contiguous runs of ranks), 16 KiB to 4 MiB: "
     "auto: rank 0 times the rank-order schedules (swap, chain, chain8, rails, rails2) and "
     "picks per size for every rank; plan: the fixed plan's schedule, untimed; a schedule's "
     "name: that one where it applies; random: a test mode (random figures, frequent "
     "changes). Every schedule gives the same bits; every rank must use the same value."},
};
static_assert(sizeof(kParams) / sizeof(kParams[0]) == static_cast<int>(Param::Count),
              "one table row per Param");

struct Registry {
  std::string values[static_cast<int>(Param::Count)];
  int64_t ints[static_cast<int>(Param::Count)];
};

bool parseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 0);
  if (end == s.c_str()) return false;
  int64_t mult = 1;
  if (*end != '\0') {
    switch (std::toupper(static_cast<unsigned char>(*end))) {
      case 'K': mult = 1ll << 10; break;
      case 'M': mult = 1ll << 20; break;
      case 'G': mult = 1ll << 30; break;
      default: return false;
    }
    ++end;
    if (*end == 'B' || *end == 'b') ++end;
    if (*end != '\0') return false;
  }
  *out = v * mult;
  return true;
}

const Registry& registry() {
  // Read once; immutable afterwards, so it is not mutable global state.
  static const Registry* reg = [] {
    auto* r = new Registry();
    for (int i = 0; i < static_cast<int>(Param::Count); ++i) {
      const char* env = std::getenv(kParams[i].name);
      r->values[i] = env ? env : kParams[i].defaultValue;
      int64_t v = 0;
      if (!parseInt(r->values[i], &v)) {
        if (env && *env && parseInt(kParams[i].defaultValue, &v)) {
          // The logger itself reads params, so warn with plain stderr here.
          std::fprintf(stderr, "chorus: WARN %s=%s is not an integer, using %s\n", kParams[i].name,
                       env, kParams[i].defaultValue);
        }
        if (!parseInt(kParams[i].defaultValue, &v)) v = 0;
      }
      r->ints[i] = v;
    }
    return r;
  }();
  return *reg;
}

}  // namespace

const ParamInfo* paramTable(int* count) {
  *count = static_cast<int>(Param::Count);
  return kParams;
}

const std::string& paramString(Param p) { return registry().values[static_cast<int>(p)]; }

int64_t paramInt(Param p) { return registry().ints[static_cast<int>(p)]; }

}  // namespace chorus
