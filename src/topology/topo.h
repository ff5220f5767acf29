// topo.h — what a host looks like, and where each rank sits in it.
//
// Detection (detect.cc) turns hwloc's view of one host — or an hwloc XML file given with
// CHORUS_TOPO_FILE — into the plain structs below, so that nothing past detection depends
// on hwloc. Ranks then exchange a fixed-size RankTopoRecord each (src/comm/topo_exchange.cc) and
// the graph builders (graph.cc) compute rings and trees from those records alone: they are pure
// functions, so tests feed them synthetic multi-host layouts without any process.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace chorus {
namespace topo {

/// A PCI device Chorus cares about: a GPU or a NIC, located by its bus id and by the chain
/// of bridges above it (outermost first), which is what "closest" is computed from.
struct PciDevice {
  enum class Kind { Gpu, Nic };
  Kind kind = Kind::Nic;
  std::string busId;                 // "0000:17:00.0"
  std::vector<std::string> osNames;  // "mlx5_0", "eth0", "cuda0", ...
  std::vector<std::string> bridges;  // ids of the bridges above, host bridge first
  int numa = -1;                     // logical index of the nearest NUMA node, -1 unknown
  int package = -1;                  // logical index of its package, -1 unknown
};

struct NumaNode {
  int osIndex = 0;
  int package = -1;  // logical package index
  uint64_t memBytes = 0;
  std::vector<int> cpus;  // PU os indices
};

struct Package {
  int osIndex = 0;
  std::vector<int> cpus;  // PU os indices
};

/// One host. Packages and NUMA nodes are in hwloc's logical order; their indices are what
/// ranks report.
struct HostTopo {
  std::string hostname;
  std::string source;  // "hwloc", "xml:<path>" or "flat (<why>)"
  int cores = 0;
  int pus = 0;
  int l3Count = 0;
  uint64_t l3Bytes = 0;  // size of one L3
  uint64_t l2Bytes = 0;  // size of one L2 (the first; a core's own on current x86 and Arm)
  std::vector<Package> packages;
  std::vector<NumaNode> numas;
  std::vector<PciDevice> gpus;
  std::vector<PciDevice> nics;
};

/// How far apart two PCI devices are, nearest first (the names NCCL users know).
enum class PciDistance {
  PIX,   // behind the same PCI switch (one switch hop)
  PXB,   // behind a common PCI bridge further up, but not the host bridge
  PHB,   // same host bridge (root complex)
  NODE,  // same NUMA node, different host bridges
  SYS,   // different NUMA nodes (the path crosses the socket interconnect)
};
const char* pciDistanceName(PciDistance d);

PciDistance pciDistance(const PciDevice& a, const PciDevice& b);

/// Index into host.nics of the NIC closest to `dev` (ties: lowest bus id), -1 if none.
int closestNic(const HostTopo& host, const PciDevice& dev);
/// Index into host.nics of the NIC closest to NUMA node `numa` (a NIC on that node first,
/// then one on the same package, then any; ties: lowest bus id), -1 if none.
int closestNicToNuma(const HostTopo& host, int numa);

/// Where a set of CPUs (a rank's binding) lies: the package and NUMA node that contain all
/// of them, -1 when they span several (an unbound rank).
struct Placement {
  int package = -1;
  int numa = -1;
};
Placement locate(const HostTopo& host, const std::vector<int>& cpus);

/// A flat host: one package, one NUMA node, `ncpus` PUs, no devices.
HostTopo flatTopo(int ncpus, const std::string& why);

/// Detects this host: CHORUS_TOPO_FILE if set, else hwloc; never fails (degrades to a flat
/// topology with one INFO line). `xmlOut`, when non-null, receives hwloc's XML of what was
/// read (empty without hwloc).
HostTopo detectHost(std::string* xmlOut);
/// This host as detected once per process (detectHost on the first call, thread-safe; the
/// result is read-only afterwards) with its hwloc XML (empty without hwloc).
struct DetectedHost {
  HostTopo host;
  std::string xml;
};
const DetectedHost& detectedHost();
/// Loads one host from an hwloc XML file; false (with *err) if it cannot be read.
bool loadXml(const std::string& path, HostTopo* out, std::string* err, std::string* xmlOut);
/// The CPUs this process is bound to (all online CPUs when unbound).
std::vector<int> currentBinding();

/// Binds the pages of [addr, addr+bytes) to NUMA node `numaOsIndex`; a no-op returning
/// true when the host has a single NUMA node or hwloc is absent.
bool bindMemoryToNuma(void* addr, size_t bytes, int numaOsIndex);
/// The same for the NUMA node holding all of this thread's CPUs (from sysfs, no hwloc
/// needed); a no-op when there is one node or the binding spans several.
bool bindToLocalNuma(void* addr, size_t bytes);

/// Human-readable summary of a host (chorus-topo, GRAPH log).
std::string describe(const HostTopo& host);

// ---------------------------------------------------------------------------------------
// What ranks exchange, and the graphs built from it.

/// One rank's fixed-size record, gathered to every rank through the bootstrap.
struct RankTopoRecord {
  uint64_t hostHash = 0;
  int32_t rank = 0;
  int16_t package = -1;  // logical package of the binding, -1 unbound/unknown
  int16_t numa = -1;     // logical NUMA node of the binding, -1 unbound/unknown
  int16_t nPackages = 1;
  int16_t nNumas = 1;
  int16_t nGpus = 0;
  int16_t nNics = 0;
  int32_t numaOsIndex = -1;  // os index of `numa`, for memory binding
  char nic[20] = {};         // name of the NIC closest to the binding ("" if none)
  char nicBusId[16] = {};    // its PCI bus id
};
static_assert(sizeof(RankTopoRecord) == 64, "fixed-size record");

/// Makes this rank's record from its host and binding.
RankTopoRecord makeRecord(const HostTopo& host, const std::vector<int>& binding, uint64_t hostHash,
                          int rank);

/// Host order used by every graph: hosts in the order of their lowest rank. Returns, for
/// each host, its ranks ordered package by package, NUMA node by NUMA node, then by rank.
std::vector<std::vector<int>> groupByHost(const std::vector<RankTopoRecord>& ranks);

/// The ring: hosts one after another, each host's ranks socket by socket, so the ring
/// crosses each host boundary and each socket boundary once.
std::vector<int> buildRing(const std::vector<RankTopoRecord>& ranks);

constexpr int kMaxTreeChildren = 3;  // two across hosts + one down the host's chain

struct TreeNode {
  int parent = -1;
  int nchildren = 0;
  std::array<int, kMaxTreeChildren> children{{-1, -1, -1}};
};

/// A tree over all ranks: node[rank], and its root.
struct Tree {
  int root = -1;
  std::vector<TreeNode> node;
};

/// The binary tree over host positions 1..n in in-order numbering (leaves are the odd
/// positions): parent position of each position, 0 for the root.
std::vector<int> btreeParents(int n);

/// Double binary tree: across hosts two complementary binary trees (a host heads an interior
/// node in at most one of them), inside a host a chain — in host order for tree 0 and
/// reversed for tree 1, so with up to two ranks per host no rank is interior in both.
std::array<Tree, 2> buildTrees(const std::vector<RankTopoRecord>& ranks);

std::string formatRing(const std::vector<int>& ring);
std::string formatTree(const Tree& t);
/// Graphviz of the ring and both trees, hosts as clusters.
std::string toDot(const std::vector<RankTopoRecord>& ranks, const std::vector<int>& ring,
                  const std::array<Tree, 2>& trees);

}  // namespace topo
}  // namespace chorus
