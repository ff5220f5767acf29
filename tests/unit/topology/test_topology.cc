// Topology: hwloc XML parsing into plain structs, PCI locality, and the ring / double binary
// tree builders on synthetic multi-host layouts (no processes: the builders are pure).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "config.h"
#include "src/topology/topo.h"

#ifndef CHORUS_TOPO_DATA
#error "CHORUS_TOPO_DATA must point at tests/unit/topology/data"
#endif

namespace {

using chorus::topo::HostTopo;
using chorus::topo::PciDevice;
using chorus::topo::PciDistance;
using chorus::topo::RankTopoRecord;
using chorus::topo::Tree;

std::string dataPath(const char* name) { return std::string(CHORUS_TOPO_DATA) + "/" + name; }

#if HAVE_HWLOC
HostTopo load(const char* name) {
  HostTopo h;
  std::string err;
  EXPECT_TRUE(chorus::topo::loadXml(dataPath(name), &h, &err, nullptr)) << err;
  return h;
}

const PciDevice* byBus(const std::vector<PciDevice>& v, const std::string& bus) {
  for (const auto& d : v)
    if (d.busId == bus) return &d;
  return nullptr;
}

std::vector<int> range(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i < hi; ++i) v.push_back(i);
  return v;
}

TEST(TopoXml, TwoSocketsFourNumaEightGpusFourNics) {
  const HostTopo h = load("two_socket_8gpu.xml");
  EXPECT_EQ(h.hostname, "gpu-node");
  ASSERT_EQ(h.packages.size(), 2u);
  ASSERT_EQ(h.numas.size(), 4u);
  EXPECT_EQ(h.cores, 32);
  EXPECT_EQ(h.pus, 32);
  EXPECT_EQ(h.l3Count, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(h.numas[static_cast<size_t>(i)].osIndex, i);
    EXPECT_EQ(h.numas[static_cast<size_t>(i)].package, i / 2);
    EXPECT_EQ(h.numas[static_cast<size_t>(i)].cpus, range(8 * i, 8 * i + 8));
  }
  EXPECT_EQ(h.packages[1].cpus, range(16, 32));
  ASSERT_EQ(h.gpus.size(), 8u);
  ASSERT_EQ(h.nics.size(), 4u);

  // Every GPU by bus id: its NUMA node, package and closest NIC (with the distance).
  struct Want {
    const char* gpu;
    int numa;
    const char* nic;
    PciDistance dist;
  };
  const Want want[] = {
      {"0000:13:00.0", 0, "0000:15:00.0", PciDistance::PIX},
      {"0000:14:00.0", 0, "0000:15:00.0", PciDistance::PIX},
      {"0000:33:00.0", 1, "0000:35:00.0", PciDistance::PIX},
      {"0000:34:00.0", 1, "0000:35:00.0", PciDistance::PIX},
      {"0000:93:00.0", 2, "0000:95:00.0", PciDistance::PIX},
      {"0000:94:00.0", 2, "0000:95:00.0", PciDistance::PIX},
      // NUMA node 3's NIC is on its own host bridge: same node, not the same switch.
      {"0000:b3:00.0", 3, "0000:c1:00.0", PciDistance::NODE},
      {"0000:b4:00.0", 3, "0000:c1:00.0", PciDistance::NODE},
  };
  for (const Want& w : want) {
    const PciDevice* g = byBus(h.gpus, w.gpu);
    ASSERT_NE(g, nullptr) << w.gpu;
    EXPECT_EQ(g->numa, w.numa) << w.gpu;
    EXPECT_EQ(g->package, w.numa / 2) << w.gpu;
    const int n = chorus::topo::closestNic(h, *g);
    ASSERT_GE(n, 0);
    EXPECT_EQ(h.nics[static_cast<size_t>(n)].busId, w.nic) << w.gpu;
    EXPECT_EQ(chorus::topo::pciDistance(*g, h.nics[static_cast<size_t>(n)]), w.dist) << w.gpu;
  }
  // The NICs' names come from their OS devices.
  const PciDevice* nic3 = byBus(h.nics, "0000:c1:00.0");
  ASSERT_NE(nic3, nullptr);
  EXPECT_EQ(nic3->osNames, (std::vector<std::string>{"mlx5_3", "ib3"}));
  EXPECT_EQ(nic3->numa, 3);

  // Across sockets and between GPUs.
  EXPECT_EQ(
      chorus::topo::pciDistance(*byBus(h.gpus, "0000:13:00.0"), *byBus(h.nics, "0000:95:00.0")),
      PciDistance::SYS);
  EXPECT_EQ(
      chorus::topo::pciDistance(*byBus(h.gpus, "0000:13:00.0"), *byBus(h.gpus, "0000:14:00.0")),
      PciDistance::PIX);
  EXPECT_EQ(
      chorus::topo::pciDistance(*byBus(h.gpus, "0000:13:00.0"), *byBus(h.gpus, "0000:33:00.0")),
      PciDistance::SYS);

  // NUMA node -> NIC.
  const char* numaNic[] = {"0000:15:00.0", "0000:35:00.0", "0000:95:00.0", "0000:c1:00.0"};
  for (int i = 0; i < 4; ++i) {
    const int n = chorus::topo::closestNicToNuma(h, i);
    ASSERT_GE(n, 0);
    EXPECT_EQ(h.nics[static_cast<size_t>(n)].busId, numaNic[i]) << "numa " << i;
  }

  // A rank bound to cores 10-11 sits on package 0, NUMA node 1 and reports mlx5_1; an
  // unbound rank (all cores) has no package or NUMA node.
  const RankTopoRecord r = chorus::topo::makeRecord(h, {10, 11}, 42, 3);
  EXPECT_EQ(r.package, 0);
  EXPECT_EQ(r.numa, 1);
  EXPECT_EQ(r.numaOsIndex, 1);
  EXPECT_EQ(r.nPackages, 2);
  EXPECT_EQ(r.nNumas, 4);
  EXPECT_EQ(r.nGpus, 8);
  EXPECT_EQ(r.nNics, 4);
  EXPECT_STREQ(r.nic, "mlx5_1");
  EXPECT_STREQ(r.nicBusId, "0000:35:00.0");
  const RankTopoRecord u = chorus::topo::makeRecord(h, range(0, 32), 42, 0);
  EXPECT_EQ(u.package, -1);
  EXPECT_EQ(u.numa, -1);
  const RankTopoRecord s = chorus::topo::makeRecord(h, range(16, 32), 42, 0);
  EXPECT_EQ(s.package, 1);
  EXPECT_EQ(s.numa, -1);
}

TEST(TopoXml, DescribeMentionsDevices) {
  const std::string d = chorus::topo::describe(load("two_socket_8gpu.xml"));
  EXPECT_NE(d.find("2 package(s), 4 NUMA node(s)"), std::string::npos) << d;
  EXPECT_NE(
      d.find("gpu 0000:b3:00.0 [cuda6,nvml6] numa 3 package 1, closest NIC 0000:c1:00.0 (NODE)"),
      std::string::npos)
      << d;
}

TEST(TopoXml, MissingFileFails) {
  HostTopo h;
  std::string err;
  EXPECT_FALSE(chorus::topo::loadXml(dataPath("no_such_file.xml"), &h, &err, nullptr));
  EXPECT_NE(err.find("no_such_file.xml"), std::string::npos);
}

// (b) 4 hosts of 2 sockets, 2 ranks per host, placed round-robin (rank r on host r % 4,
// like `chorusrun -H a:1,b:1,c:1,d:1 -np 8 --oversubscribe`), and the higher rank of each
// host bound to socket 0: the graphs must follow hosts and sockets, not rank numbers.
std::vector<RankTopoRecord> fourHostsRoundRobin() {
  const HostTopo h = load("two_socket_host.xml");
  EXPECT_EQ(h.packages.size(), 2u);
  EXPECT_EQ(h.nics.size(), 2u);
  std::vector<RankTopoRecord> recs;
  for (int r = 0; r < 8; ++r) {
    const int host = r % 4;
    const std::vector<int> cpus = r < 4 ? range(8, 16) : range(0, 8);  // socket 1, socket 0
    recs.push_back(chorus::topo::makeRecord(h, cpus, 0x1000 + static_cast<uint64_t>(host), r));
  }
  return recs;
}

TEST(TopoGraph, FourHostsTwoSocketsRing) {
  const auto recs = fourHostsRoundRobin();
  EXPECT_EQ(recs[0].package, 1);
  EXPECT_EQ(recs[4].package, 0);
  EXPECT_STREQ(recs[0].nic, "mlx5_1");
  EXPECT_STREQ(recs[0].nicBusId, "0000:98:00.0");
  EXPECT_STREQ(recs[4].nic, "mlx5_0");
  EXPECT_STREQ(recs[4].nicBusId, "0000:17:00.0");
  // Hosts in the order of their lowest rank; inside a host socket 0 first.
  EXPECT_EQ(chorus::topo::buildRing(recs), (std::vector<int>{4, 0, 5, 1, 6, 2, 7, 3}));
}

struct Links {
  int parent;
  std::vector<int> children;
};

void expectTree(const Tree& t, int root, const std::vector<Links>& want) {
  EXPECT_EQ(t.root, root);
  ASSERT_EQ(t.node.size(), want.size());
  for (size_t r = 0; r < want.size(); ++r) {
    const auto& n = t.node[r];
    EXPECT_EQ(n.parent, want[r].parent) << "rank " << r;
    EXPECT_EQ(std::vector<int>(n.children.begin(), n.children.begin() + n.nchildren),
              want[r].children)
        << "rank " << r;
  }
}

TEST(TopoGraph, FourHostsTwoSocketsDoubleBinaryTree) {
  const auto trees = chorus::topo::buildTrees(fourHostsRoundRobin());
  // Hosts (in order) hold [4 0] [5 1] [6 2] [7 3]. Tree 0: host positions 1..4, root the
  // host at position 4 (host 3), host 1 under it, hosts 0 and 2 under host 1; each host a
  // chain from its socket-0 rank.
  expectTree(
      trees[0], 7,
      {{4, {}}, {5, {}}, {6, {}}, {7, {}}, {5, {0}}, {7, {4, 6, 1}}, {5, {2}}, {-1, {5, 3}}});
  // Tree 1: mirrored positions (host h at 4-h): host 0 is the root, host 2 under it, hosts 3
  // and 1 under host 2; chains reversed, so each host's socket-1 rank talks across hosts.
  expectTree(
      trees[1], 0,
      {{-1, {2, 4}}, {2, {5}}, {0, {3, 1, 6}}, {2, {7}}, {0, {}}, {1, {}}, {2, {}}, {3, {}}});
  for (int r = 0; r < 8; ++r)
    EXPECT_FALSE(trees[0].node[static_cast<size_t>(r)].nchildren > 0 &&
                 trees[1].node[static_cast<size_t>(r)].nchildren > 0)
        << "rank " << r << " is interior in both trees";
}

TEST(TopoGraph, EightGpuHostRanksPerNuma) {
  // One rank per NUMA node, given in reverse: the ring and chain still go node by node.
  const HostTopo h = load("two_socket_8gpu.xml");
  std::vector<RankTopoRecord> recs;
  for (int r = 0; r < 4; ++r)
    recs.push_back(chorus::topo::makeRecord(h, range(8 * (3 - r), 8 * (3 - r) + 8), 7, r));
  EXPECT_EQ(chorus::topo::buildRing(recs), (std::vector<int>{3, 2, 1, 0}));
  const auto trees = chorus::topo::buildTrees(recs);
  expectTree(trees[0], 3, {{1, {}}, {2, {0}}, {3, {1}}, {-1, {2}}});
  expectTree(trees[1], 0, {{-1, {1}}, {0, {2}}, {1, {3}}, {2, {}}});
}
#endif  // HAVE_HWLOC

// Run by meson with CHORUS_TOPO_FILE set (topology_file_*): detection reads the file when
// it can, and degrades to a flat host, without failing, when it cannot.
TEST(TopoDetect, TopoFileOrFlatFallback) {
  const char* file = std::getenv("CHORUS_TOPO_FILE");
  if (!file) GTEST_SKIP() << "CHORUS_TOPO_FILE not set";
  std::string xml;
  const HostTopo h = chorus::topo::detectHost(&xml);
  const bool readable = std::string(file).find("no_such") == std::string::npos;
#if HAVE_HWLOC
  if (readable) {
    EXPECT_EQ(h.source, std::string("xml:") + file);
    EXPECT_EQ(h.numas.size(), 4u);
    EXPECT_EQ(h.gpus.size(), 8u);
    EXPECT_NE(xml.find("<topology"), std::string::npos);
    return;
  }
#endif
  (void)readable;
  EXPECT_EQ(h.source.rfind("flat (", 0), 0u) << h.source;
  EXPECT_EQ(h.packages.size(), 1u);
  EXPECT_EQ(h.numas.size(), 1u);
  EXPECT_GE(h.pus, 1);
  // A flat host still places a rank.
  const RankTopoRecord r = chorus::topo::makeRecord(h, chorus::topo::currentBinding(), 1, 0);
  EXPECT_EQ(r.package, 0);
  EXPECT_EQ(r.numa, 0);
}

// ---- Properties over many synthetic layouts (no hwloc needed) ----

std::vector<RankTopoRecord> layout(int hosts, int perHost, bool roundRobin, int sockets) {
  std::vector<RankTopoRecord> recs(static_cast<size_t>(hosts * perHost));
  for (int r = 0; r < hosts * perHost; ++r) {
    const int host = roundRobin ? r % hosts : r / perHost;
    const int local = roundRobin ? r / hosts : r % perHost;
    RankTopoRecord& x = recs[static_cast<size_t>(r)];
    x.rank = r;
    x.hostHash = 0xabc0 + static_cast<uint64_t>(host) * 977;
    // Interleave sockets against local rank order: local 0 on the last socket.
    x.package = static_cast<int16_t>((sockets - 1 - local % sockets));
    x.numa = x.package;
  }
  return recs;
}

int hostOf(const std::vector<RankTopoRecord>& recs, int r) {
  return static_cast<int>(recs[static_cast<size_t>(r)].hostHash);
}

TEST(TopoGraph, RingCrossesEachHostAndSocketBoundaryOnce) {
  for (int hosts = 1; hosts <= 9; ++hosts)
    for (int per = 1; per <= 4; ++per)
      for (bool rr : {false, true})
        for (int sockets : {1, 2}) {
          const auto recs = layout(hosts, per, rr, sockets);
          const auto ring = chorus::topo::buildRing(recs);
          const int n = hosts * per;
          ASSERT_EQ(static_cast<int>(ring.size()), n);
          EXPECT_EQ(std::set<int>(ring.begin(), ring.end()).size(), static_cast<size_t>(n));
          int hostCross = 0, socketCross = 0;
          for (int i = 0; i < n; ++i) {
            const int a = ring[static_cast<size_t>(i)], b = ring[static_cast<size_t>((i + 1) % n)];
            if (hostOf(recs, a) != hostOf(recs, b))
              ++hostCross;
            else if (recs[static_cast<size_t>(a)].package != recs[static_cast<size_t>(b)].package)
              ++socketCross;
          }
          EXPECT_EQ(hostCross, hosts == 1 ? 0 : hosts) << hosts << "x" << per;
          // Inside each host the ring changes socket once (sockets - 1 times, when used).
          const int used = std::min(per, sockets);
          EXPECT_EQ(socketCross, hosts * (used - 1) + (hosts == 1 && used > 1 ? 1 : 0))
              << hosts << "x" << per << " sockets " << sockets;
        }
}

TEST(TopoGraph, BinaryTreeLeavesAreOddPositions) {
  for (int n = 1; n <= 64; ++n) {
    const auto parent = chorus::topo::btreeParents(n);
    int roots = 0;
    std::vector<int> nchild(static_cast<size_t>(n) + 1, 0);
    for (int p = 1; p <= n; ++p) {
      if (parent[static_cast<size_t>(p)] == 0)
        ++roots;
      else
        ++nchild[static_cast<size_t>(parent[static_cast<size_t>(p)])];
    }
    EXPECT_EQ(roots, 1) << n;
    for (int p = 1; p <= n; ++p) {
      EXPECT_LE(nchild[static_cast<size_t>(p)], 2);
      if (n > 1) {
        EXPECT_EQ(nchild[static_cast<size_t>(p)] > 0, p % 2 == 0) << "n " << n << " p " << p;
      }
    }
  }
}

TEST(TopoGraph, DoubleTreesAreSpanningAndComplementary) {
  for (int hosts = 1; hosts <= 17; ++hosts)
    for (int per = 1; per <= 3; ++per)
      for (bool rr : {false, true}) {
        const auto recs = layout(hosts, per, rr, 2);
        const auto trees = chorus::topo::buildTrees(recs);
        const int n = hosts * per;
        for (int t = 0; t < 2; ++t) {
          const Tree& tr = trees[static_cast<size_t>(t)];
          ASSERT_GE(tr.root, 0);
          EXPECT_EQ(tr.node[static_cast<size_t>(tr.root)].parent, -1);
          // Every rank reaches the root without a cycle; parent/child links agree.
          for (int r = 0; r < n; ++r) {
            int x = r, steps = 0;
            while (x != tr.root && steps <= n) x = tr.node[static_cast<size_t>(x)].parent, ++steps;
            EXPECT_EQ(x, tr.root) << "rank " << r;
            const auto& nd = tr.node[static_cast<size_t>(r)];
            for (int c = 0; c < nd.nchildren; ++c)
              EXPECT_EQ(tr.node[static_cast<size_t>(nd.children[static_cast<size_t>(c)])].parent,
                        r);
            // At most one child on the same host (the chain) and two on other hosts.
            int crossKids = 0;
            for (int c = 0; c < nd.nchildren; ++c)
              crossKids += hostOf(recs, nd.children[static_cast<size_t>(c)]) != hostOf(recs, r);
            EXPECT_LE(crossKids, 2);
          }
        }
        for (int r = 0; r < n; ++r) {
          auto crossKids = [&](int t) {
            const auto& nd = trees[static_cast<size_t>(t)].node[static_cast<size_t>(r)];
            int k = 0;
            for (int c = 0; c < nd.nchildren; ++c)
              k += hostOf(recs, nd.children[static_cast<size_t>(c)]) != hostOf(recs, r);
            return k;
          };
          // Across hosts, no rank has children in both trees.
          EXPECT_FALSE(crossKids(0) > 0 && crossKids(1) > 0)
              << hosts << "x" << per << " rank " << r;
          // With up to two ranks per host, no rank is interior in both trees at all.
          if (per <= 2) {
            EXPECT_FALSE(trees[0].node[static_cast<size_t>(r)].nchildren > 0 &&
                         trees[1].node[static_cast<size_t>(r)].nchildren > 0)
                << hosts << "x" << per << " rank " << r;
          }
        }
      }
}

TEST(TopoGraph, FlatHostAndFormatting) {
  const HostTopo f = chorus::topo::flatTopo(4, "test");
  EXPECT_EQ(f.packages.size(), 1u);
  EXPECT_EQ(f.numas.size(), 1u);
  const RankTopoRecord r = chorus::topo::makeRecord(f, {1}, 5, 0);
  EXPECT_EQ(r.package, 0);
  EXPECT_EQ(r.numa, 0);
  EXPECT_EQ(r.nic[0], '\0');
  const auto recs = layout(2, 1, false, 1);
  const auto trees = chorus::topo::buildTrees(recs);
  EXPECT_EQ(chorus::topo::formatTree(trees[0]), "root 1; 0:1->- 1:-->0");
  EXPECT_EQ(chorus::topo::formatTree(trees[1]), "root 0; 0:-->1 1:0->-");
  const std::string dot = chorus::topo::toDot(recs, chorus::topo::buildRing(recs), trees);
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("r0 -> r1 [color=blue"), std::string::npos) << dot;
}

TEST(TopoGraph, PciDistanceClasses) {
  PciDevice a, b;
  a.bridges = {"hb0", "rp0", "up0", "down0"};
  b.bridges = {"hb0", "rp0", "up0", "down1"};
  EXPECT_EQ(chorus::topo::pciDistance(a, b), PciDistance::PIX);
  b.bridges = {"hb0", "rp0", "up1", "down1"};
  EXPECT_EQ(chorus::topo::pciDistance(a, b), PciDistance::PXB);
  b.bridges = {"hb0", "rp1"};
  EXPECT_EQ(chorus::topo::pciDistance(a, b), PciDistance::PHB);
  b.bridges = {"hb1", "rp1"};
  a.numa = b.numa = 2;
  EXPECT_EQ(chorus::topo::pciDistance(a, b), PciDistance::NODE);
  b.numa = 3;
  EXPECT_EQ(chorus::topo::pciDistance(a, b), PciDistance::SYS);
}

}  // namespace
