// chorus-topo — prints a host's topology and the rings and trees Chorus builds for a layout.
//
// The same code as the library: detection (hwloc, or an hwloc XML file) and the pure graph
// builders of src/topology, fed with a synthetic layout of identical hosts.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/topology/topo.h"

namespace {

const char kUsage[] =
    "usage: chorus-topo [--xml FILE] [--hosts N --ranks-per-host K [--placement block|cyclic]]\n"
    "                   [--dot] [--dump-xml FILE]\n"
    "\n"
    "Without a layout, prints this host's topology: packages, NUMA nodes, cores, caches, PCI\n"
    "GPUs and NICs with their NUMA node and, for each GPU and NUMA node, the closest NIC (by PCI\n"
    "path: PIX same switch, PXB bridges, PHB host bridge, NODE same NUMA node, SYS across).\n"
    "\n"
    "With --hosts/--ranks-per-host, lays out N identical hosts (this one, or --xml FILE) with K\n"
    "ranks each, local rank i bound to NUMA node i*numas/K, and prints each rank's place, the\n"
    "ring and both trees of the double binary tree, exactly as a communicator would build them.\n"
    "\n"
    "  --xml FILE           read the host from an hwloc XML file (as CHORUS_TOPO_FILE does);\n"
    "                       lstopo --of xml writes one\n"
    "  --hosts N            number of hosts in the layout (1..4096)\n"
    "  --ranks-per-host K   ranks per host (1..1024)\n"
    "  --placement P        block: ranks 0..K-1 on the first host (default); cyclic: rank r on\n"
    "                       host r % N (what -H a:1,b:1 -np 2N --oversubscribe gives)\n"
    "  --dot                print the ring and trees as Graphviz instead (dot -Tsvg)\n"
    "  --dump-xml FILE      write the topology that was read as hwloc XML\n"
    "  -h, --help           this text\n"
    "\n"
    "Trees: 'r:P->C' means rank r has parent P and children C ('-' for none).\n";

int die(const char* msg) {
  std::fprintf(stderr, "chorus-topo: %s\n", msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string xml, dumpXml, placement = "block";
  int hosts = 0, perHost = 0;
  bool dot = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "chorus-topo: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--xml") {
      xml = value("--xml");
    } else if (a == "--hosts") {
      hosts = std::atoi(value("--hosts"));
    } else if (a == "--ranks-per-host") {
      perHost = std::atoi(value("--ranks-per-host"));
    } else if (a == "--placement") {
      placement = value("--placement");
    } else if (a == "--dot") {
      dot = true;
    } else if (a == "--dump-xml") {
      dumpXml = value("--dump-xml");
    } else {
      std::fprintf(stderr, "chorus-topo: unknown argument '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if ((hosts > 0) != (perHost > 0)) return die("--hosts and --ranks-per-host go together");
  if (hosts < 0 || hosts > 4096 || perHost < 0 || perHost > 1024)
    return die("--hosts must be 1..4096 and --ranks-per-host 1..1024");
  if (placement != "block" && placement != "cyclic") return die("--placement is block or cyclic");

  chorus::topo::HostTopo host;
  std::string xmlText;
  if (!xml.empty()) {
    std::string err;
    if (!chorus::topo::loadXml(xml, &host, &err, &xmlText)) return die(err.c_str());
  } else {
    host = chorus::topo::detectHost(&xmlText);
  }
  if (!dumpXml.empty()) {
    FILE* f = std::fopen(dumpXml.c_str(), "w");
    if (!f || std::fwrite(xmlText.data(), 1, xmlText.size(), f) != xmlText.size())
      return die(("cannot write " + dumpXml).c_str());
    std::fclose(f);
  }
  if (hosts == 0) {
    if (!dot) std::fputs(chorus::topo::describe(host).c_str(), stdout);
    if (!dot) return 0;
    hosts = perHost = 1;
  }

  const int n = hosts * perHost;
  std::vector<chorus::topo::RankTopoRecord> recs;
  for (int r = 0; r < n; ++r) {
    const int h = placement == "cyclic" ? r % hosts : r / perHost;
    const int local = placement == "cyclic" ? r / hosts : r % perHost;
    const size_t numa =
        static_cast<size_t>(local) * host.numas.size() / static_cast<size_t>(perHost);
    recs.push_back(chorus::topo::makeRecord(
        host, host.numas[numa].cpus, 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(h + 1), r));
  }
  const std::vector<int> ring = chorus::topo::buildRing(recs);
  const auto trees = chorus::topo::buildTrees(recs);
  if (dot) {
    std::fputs(chorus::topo::toDot(recs, ring, trees).c_str(), stdout);
    return 0;
  }
  std::printf("%s", chorus::topo::describe(host).c_str());
  std::printf("\nlayout: %d host(s) x %d rank(s), %s placement\n", hosts, perHost,
              placement.c_str());
  const auto groups = chorus::topo::groupByHost(recs);
  for (size_t h = 0; h < groups.size(); ++h) {
    std::printf("  host %zu:", h);
    for (int r : groups[h]) {
      const auto& x = recs[static_cast<size_t>(r)];
      std::printf(" %d(pkg %d numa %d%s%s)", r, x.package, x.numa, x.nic[0] ? " " : "", x.nic);
    }
    std::printf("\n");
  }
  std::printf("ring: %s\n", chorus::topo::formatRing(ring).c_str());
  for (int t = 0; t < 2; ++t)
    std::printf("tree %d: %s\n", t,
                chorus::topo::formatTree(trees[static_cast<size_t>(t)]).c_str());
  return 0;
}
