// detect.cc — one host's topology from hwloc (or an hwloc XML file), as plain structs.
//
// Everything hwloc-specific is in this file. Without hwloc (-Dhwloc=disabled), or when it
// fails, a host is "flat": one package, one NUMA node, the CPUs we can see, no devices —
// logged once at INFO, never an error.
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config.h"
#include "src/core/debug.h"
#include "src/core/params.h"
#include "src/topology/topo.h"

#if HAVE_HWLOC
#include <hwloc.h>
#endif

namespace chorus {
namespace topo {

const char* pciDistanceName(PciDistance d) {
  switch (d) {
    case PciDistance::PIX: return "PIX";
    case PciDistance::PXB: return "PXB";
    case PciDistance::PHB: return "PHB";
    case PciDistance::NODE: return "NODE";
    case PciDistance::SYS: return "SYS";
  }
  return "?";
}

PciDistance pciDistance(const PciDevice& a, const PciDevice& b) {
  size_t k = 0;
  while (k < a.bridges.size() && k < b.bridges.size() && a.bridges[k] == b.bridges[k]) ++k;
  if (k >= 2) {
    // They meet below the host bridge. One switch: each is at most one bridge (its
    // downstream port) below the meeting point.
    if (a.bridges.size() - k <= 1 && b.bridges.size() - k <= 1) return PciDistance::PIX;
    return PciDistance::PXB;
  }
  if (k == 1) return PciDistance::PHB;
  if (a.numa >= 0 && a.numa == b.numa) return PciDistance::NODE;
  return PciDistance::SYS;
}

namespace {
// The index of the NIC that ranks lowest by `rank` (lower is closer), ties to the lowest bus
// id; -1 when the host has none.
template <class Rank>
int closestNicBy(const HostTopo& host, Rank rank) {
  int best = -1;
  for (size_t i = 0; i < host.nics.size(); ++i) {
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const PciDevice& b = host.nics[static_cast<size_t>(best)];
    const PciDevice& c = host.nics[i];
    const auto rb = rank(b), rc = rank(c);
    if (rc < rb || (rc == rb && c.busId < b.busId)) best = static_cast<int>(i);
  }
  return best;
}
}  // namespace

int closestNic(const HostTopo& host, const PciDevice& dev) {
  return closestNicBy(host, [&](const PciDevice& nic) { return pciDistance(dev, nic); });
}

int closestNicToNuma(const HostTopo& host, int numa) {
  const int pkg = numa >= 0 && numa < static_cast<int>(host.numas.size())
                      ? host.numas[static_cast<size_t>(numa)].package
                      : -1;
  return closestNicBy(host, [&](const PciDevice& d) {
    if (numa >= 0 && d.numa == numa) return 0;
    if (pkg >= 0 && d.package == pkg) return 1;
    return 2;
  });
}

namespace {
bool containsAll(const std::vector<int>& set, const std::vector<int>& cpus) {
  for (int c : cpus)
    if (std::find(set.begin(), set.end(), c) == set.end()) return false;
  return true;
}
}  // namespace

Placement locate(const HostTopo& host, const std::vector<int>& cpus) {
  Placement pl;
  if (cpus.empty()) return pl;
  for (size_t i = 0; i < host.packages.size(); ++i)
    if (containsAll(host.packages[i].cpus, cpus)) pl.package = static_cast<int>(i);
  for (size_t i = 0; i < host.numas.size(); ++i)
    if (containsAll(host.numas[i].cpus, cpus)) pl.numa = static_cast<int>(i);
  if (pl.numa >= 0 && pl.package < 0) pl.package = host.numas[static_cast<size_t>(pl.numa)].package;
  return pl;
}

std::vector<int> currentBinding() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

HostTopo flatTopo(int ncpus, const std::string& why) {
  HostTopo h;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  h.hostname = name;
  h.source = "flat (" + why + ")";
  ncpus = std::max(1, ncpus);
  h.cores = h.pus = ncpus;
  Package p;
  NumaNode n;
  n.package = 0;
  for (int c = 0; c < ncpus; ++c) p.cpus.push_back(c);
  n.cpus = p.cpus;
  h.packages.push_back(p);
  h.numas.push_back(n);
  return h;
}

namespace {

int onlineCpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

HostTopo flatFallback(const std::string& why) {
  CHORUS_INFO(kLogGraph, "topology: %s; using a flat single-socket host", why.c_str());
  HostTopo h = flatTopo(onlineCpus(), why);
  // A flat host still knows every CPU it may run on (the binding may be sparse).
  std::vector<int> all = currentBinding();
  for (int c = 0; c < onlineCpus(); ++c)
    if (std::find(all.begin(), all.end(), c) == all.end()) all.push_back(c);
  std::sort(all.begin(), all.end());
  h.packages[0].cpus = all;
  h.numas[0].cpus = all;
  return h;
}

#if HAVE_HWLOC

std::vector<int> cpuList(hwloc_const_cpuset_t set) {
  std::vector<int> out;
  if (!set) return out;
  int i;
  hwloc_bitmap_foreach_begin(i, set) { out.push_back(i); }
  hwloc_bitmap_foreach_end();
  return out;
}

std::string bridgeId(hwloc_obj_t b) {
  char buf[64];
  if (b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
    snprintf(buf, sizeof(buf), "hostbridge %04x:[%02x-%02x]",
             static_cast<unsigned>(b->attr->bridge.downstream.pci.domain),
             static_cast<unsigned>(b->attr->bridge.downstream.pci.secondary_bus),
             static_cast<unsigned>(b->attr->bridge.downstream.pci.subordinate_bus));
  } else {
    snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%01x", static_cast<unsigned>(b->attr->pcidev.domain),
             static_cast<unsigned>(b->attr->pcidev.bus), static_cast<unsigned>(b->attr->pcidev.dev),
             static_cast<unsigned>(b->attr->pcidev.func));
  }
  return buf;
}

HostTopo fromHwloc(hwloc_topology_t t, const std::string& source) {
  HostTopo h;
  h.source = source;
  hwloc_obj_t root = hwloc_get_root_obj(t);
  const char* hn = hwloc_obj_get_info_by_name(root, "HostName");
  if (hn) {
    h.hostname = hn;
  } else {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    h.hostname = name;
  }
  h.cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  h.pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  const int npkg = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  for (int i = 0; i < npkg; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, static_cast<unsigned>(i));
    Package p;
    p.osIndex = static_cast<int>(o->os_index);
    p.cpus = cpuList(o->cpuset);
    h.packages.push_back(p);
  }
  const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    NumaNode n;
    n.osIndex = static_cast<int>(o->os_index);
    n.memBytes = o->attr ? o->attr->numanode.local_memory : 0;
    n.cpus = cpuList(o->cpuset);
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, o);
    n.package = pkg ? static_cast<int>(pkg->logical_index) : (npkg <= 1 ? 0 : -1);
    h.numas.push_back(n);
  }
  if (h.packages.empty()) {  // some VMs report no package: one covering everything
    Package p;
    p.cpus = cpuList(root->cpuset);
    h.packages.push_back(p);
  }
  if (h.numas.empty()) {
    NumaNode n;
    n.package = 0;
    n.cpus = cpuList(root->cpuset);
    h.numas.push_back(n);
  }
  const int depthL3 = hwloc_get_type_depth(t, HWLOC_OBJ_L3CACHE);
  if (depthL3 >= 0) {
    h.l3Count = hwloc_get_nbobjs_by_depth(t, depthL3);
    hwloc_obj_t l3 = hwloc_get_obj_by_depth(t, depthL3, 0);
    if (l3 && l3->attr) h.l3Bytes = l3->attr->cache.size;
  }
  const int depthL2 = hwloc_get_type_depth(t, HWLOC_OBJ_L2CACHE);
  if (depthL2 >= 0) {
    hwloc_obj_t l2 = hwloc_get_obj_by_depth(t, depthL2, 0);
    if (l2 && l2->attr) h.l2Bytes = l2->attr->cache.size;
  }
  for (hwloc_obj_t o = hwloc_get_next_pcidev(t, nullptr); o; o = hwloc_get_next_pcidev(t, o)) {
    const unsigned cls = o->attr->pcidev.class_id >> 8;
    PciDevice d;
    if (cls == 0x03 || cls == 0x12)
      d.kind = PciDevice::Kind::Gpu;
    else if (cls == 0x02)
      d.kind = PciDevice::Kind::Nic;
    else
      continue;
    char bus[32];
    snprintf(bus, sizeof(bus), "%04x:%02x:%02x.%01x", static_cast<unsigned>(o->attr->pcidev.domain),
             static_cast<unsigned>(o->attr->pcidev.bus), static_cast<unsigned>(o->attr->pcidev.dev),
             static_cast<unsigned>(o->attr->pcidev.func));
    d.busId = bus;
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
      if (c->type == HWLOC_OBJ_OS_DEVICE && c->name) d.osNames.push_back(c->name);
    for (hwloc_obj_t p = o->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent)
      d.bridges.insert(d.bridges.begin(), bridgeId(p));
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, o);
    if (anc) {
      if (anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1) {
        const int os = hwloc_bitmap_first(anc->nodeset);
        for (size_t i = 0; i < h.numas.size(); ++i)
          if (h.numas[i].osIndex == os) d.numa = static_cast<int>(i);
      }
      hwloc_obj_t pkg = anc->type == HWLOC_OBJ_PACKAGE
                            ? anc
                            : hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, anc);
      if (pkg)
        d.package = static_cast<int>(pkg->logical_index);
      else if (npkg <= 1)
        d.package = 0;
      if (d.numa >= 0 && d.package < 0) d.package = h.numas[static_cast<size_t>(d.numa)].package;
    }
    (d.kind == PciDevice::Kind::Gpu ? h.gpus : h.nics).push_back(d);
  }
  return h;
}

bool loadTopology(const std::string& xmlPath, HostTopo* out, std::string* err,
                  std::string* xmlOut) {
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) {
    *err = "hwloc_topology_init failed";
    return false;
  }
  // PCI objects are filtered out by default: keep the ones that matter (GPUs, NICs and the
  // bridges above them), or all of them when reading a file someone wrote for us.
  hwloc_topology_set_io_types_filter(
      t, xmlPath.empty() ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT : HWLOC_TYPE_FILTER_KEEP_ALL);
  if (!xmlPath.empty() && hwloc_topology_set_xml(t, xmlPath.c_str()) != 0) {
    *err = "cannot read hwloc XML " + xmlPath + ": " + strerror(errno);
    hwloc_topology_destroy(t);
    return false;
  }
  if (!xmlPath.empty()) hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  if (hwloc_topology_load(t) != 0) {
    *err = "hwloc_topology_load failed" + (xmlPath.empty() ? std::string() : " for " + xmlPath);
    hwloc_topology_destroy(t);
    return false;
  }
  *out = fromHwloc(t, xmlPath.empty() ? "hwloc" : "xml:" + xmlPath);
  if (xmlOut) {
    char* buf = nullptr;
    int len = 0;
    if (hwloc_topology_export_xmlbuffer(t, &buf, &len, 0) == 0 && buf) {
      xmlOut->assign(buf);
      hwloc_free_xmlbuffer(t, buf);
    }
  }
  hwloc_topology_destroy(t);
  return true;
}

#endif  // HAVE_HWLOC

}  // namespace

bool loadXml(const std::string& path, HostTopo* out, std::string* err, std::string* xmlOut) {
#if HAVE_HWLOC
  return loadTopology(path, out, err, xmlOut);
#else
  (void)path;
  (void)out;
  (void)xmlOut;
  *err = "this build has no hwloc (-Dhwloc=disabled), so it cannot read " + path;
  return false;
#endif
}

HostTopo detectHost(std::string* xmlOut) {
  const std::string& file = paramString(Param::TopoFile);
#if HAVE_HWLOC
  HostTopo h;
  std::string err;
  if (loadTopology(file, &h, &err, xmlOut)) return h;
  return flatFallback(err);
#else
  if (xmlOut) xmlOut->clear();
  return flatFallback(file.empty() ? "built without hwloc"
                                   : "built without hwloc, CHORUS_TOPO_FILE=" + file + " ignored");
#endif
}

const DetectedHost& detectedHost() {
  // The one detection of this process (a few milliseconds of hwloc, and the host does not
  // change): a kept process-global, written once under call_once and read-only after.
  static const DetectedHost* const host = [] {
    auto* d = new DetectedHost();
    d->host = detectHost(&d->xml);
    return d;
  }();
  return *host;
}

namespace {

// The machine's real NUMA nodes from sysfs (a topology file may describe another machine):
// os index -> CPUs.
std::vector<std::pair<int, std::vector<int>>> sysNumaNodes() {
  std::vector<std::pair<int, std::vector<int>>> nodes;
  for (int i = 0; i < 1024; ++i) {
    char path[80];
    snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", i);
    std::ifstream f(path);
    if (!f) {
      if (i >= 64) break;
      continue;
    }
    std::string list;
    std::getline(f, list);
    std::vector<int> cpus;
    std::stringstream ss(list);
    for (std::string item; std::getline(ss, item, ',');) {
      int lo = 0, hi = 0;
      const int got = std::sscanf(item.c_str(), "%d-%d", &lo, &hi);
      if (got == 1) hi = lo;
      if (got >= 1)
        for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    }
    nodes.emplace_back(i, cpus);
  }
  return nodes;
}

}  // namespace

bool bindToLocalNuma(void* addr, size_t bytes) {
  const auto nodes = sysNumaNodes();
  if (nodes.size() <= 1) return true;
  const std::vector<int> mine = currentBinding();
  for (const auto& n : nodes)
    if (!mine.empty() && containsAll(n.second, mine)) return bindMemoryToNuma(addr, bytes, n.first);
  return true;  // bound across nodes (or unbound): leave first-touch placement
}

bool bindMemoryToNuma(void* addr, size_t bytes, int numaOsIndex) {
  // Needs only the kernel. Prefer the node (not bind), so a full node never fails a mapping.
  if (sysNumaNodes().size() <= 1 || numaOsIndex < 0 || numaOsIndex >= 1024) return true;
  unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {};
  mask[static_cast<size_t>(numaOsIndex) / (8 * sizeof(unsigned long))] |=
      1ul << (static_cast<size_t>(numaOsIndex) % (8 * sizeof(unsigned long)));
  const long pg = sysconf(_SC_PAGESIZE);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(addr) & ~static_cast<uintptr_t>(pg - 1);
  const size_t len = bytes + (reinterpret_cast<uintptr_t>(addr) - lo);
  if (syscall(SYS_mbind, lo, len, MPOL_PREFERRED, mask, 1024ul, 0ul) != 0) {
    CHORUS_INFO(kLogShm, "mbind to NUMA node %d failed: %s (pages stay where touched)", numaOsIndex,
                strerror(errno));
    return false;
  }
  return true;
}

std::string describe(const HostTopo& h) {
  std::ostringstream s;
  s << "host " << h.hostname << " (" << h.source << "): " << h.packages.size() << " package(s), "
    << h.numas.size() << " NUMA node(s), " << h.cores << " cores, " << h.pus << " PUs";
  if (h.l3Count) s << ", " << h.l3Count << " x L3 " << (h.l3Bytes >> 20) << " MiB";
  if (h.l2Bytes) s << ", L2 " << (h.l2Bytes >> 10) << " KiB";
  s << "\n";
  auto cpus = [](const std::vector<int>& v) {
    std::string out;
    for (size_t i = 0; i < v.size();) {
      size_t j = i;
      while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
      if (!out.empty()) out += ",";
      out += std::to_string(v[i]) + (j > i ? "-" + std::to_string(v[j]) : "");
      i = j + 1;
    }
    return out;
  };
  for (size_t i = 0; i < h.packages.size(); ++i)
    s << "  package " << i << ": cpus " << cpus(h.packages[i].cpus) << "\n";
  for (size_t i = 0; i < h.numas.size(); ++i)
    s << "  numa " << i << " (os " << h.numas[i].osIndex << ", package " << h.numas[i].package
      << "): cpus " << cpus(h.numas[i].cpus) << ", " << (h.numas[i].memBytes >> 20) << " MiB\n";
  auto dev = [&](const PciDevice& d, const char* what) {
    s << "  " << what << " " << d.busId << " [";
    for (size_t i = 0; i < d.osNames.size(); ++i) s << (i ? "," : "") << d.osNames[i];
    s << "] numa " << d.numa << " package " << d.package;
    if (d.kind == PciDevice::Kind::Gpu) {
      const int n = closestNic(h, d);
      if (n >= 0)
        s << ", closest NIC " << h.nics[static_cast<size_t>(n)].busId << " ("
          << pciDistanceName(pciDistance(d, h.nics[static_cast<size_t>(n)])) << ")";
    }
    s << "\n";
  };
  for (const auto& g : h.gpus) dev(g, "gpu");
  for (const auto& n : h.nics) dev(n, "nic");
  for (size_t i = 0; i < h.numas.size(); ++i) {
    const int n = closestNicToNuma(h, static_cast<int>(i));
    if (n >= 0) s << "  numa " << i << " -> nic " << h.nics[static_cast<size_t>(n)].busId << "\n";
  }
  return s.str();
}

RankTopoRecord makeRecord(const HostTopo& host, const std::vector<int>& binding, uint64_t hostHash,
                          int rank) {
  RankTopoRecord r;
  r.hostHash = hostHash;
  r.rank = rank;
  const Placement pl = locate(host, binding);
  r.package = static_cast<int16_t>(pl.package);
  r.numa = static_cast<int16_t>(pl.numa);
  r.nPackages = static_cast<int16_t>(host.packages.size());
  r.nNumas = static_cast<int16_t>(host.numas.size());
  r.nGpus = static_cast<int16_t>(host.gpus.size());
  r.nNics = static_cast<int16_t>(host.nics.size());
  r.numaOsIndex = pl.numa >= 0 ? host.numas[static_cast<size_t>(pl.numa)].osIndex : -1;
  const int nic = closestNicToNuma(host, pl.numa);
  if (nic >= 0) {
    const PciDevice& d = host.nics[static_cast<size_t>(nic)];
    snprintf(r.nic, sizeof(r.nic), "%s", d.osNames.empty() ? "" : d.osNames.front().c_str());
    snprintf(r.nicBusId, sizeof(r.nicBusId), "%s", d.busId.c_str());
  }
  return r;
}

}  // namespace topo
}  // namespace chorus
