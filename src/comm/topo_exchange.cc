// topo_exchange.cc — topology exchange at communicator init: this rank's record from the
// detected host (src/topology), allgathered, then the ring and trees (src/topology's pure
// builders) stored in the communicator.
#include "src/comm/topo_exchange.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "src/comm/comm.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/params.h"
#include "src/topology/topo.h"

namespace chorus {
namespace {

void dumpXml(const std::string& pattern, const topo::HostTopo& host, const std::string& xml) {
  std::string path;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'h') {
      path += host.hostname;
      ++i;
    } else {
      path += pattern[i];
    }
  }
  // Without hwloc there is no XML to give: write a comment describing the flat host.
  const std::string text =
      xml.empty() ? "<!-- chorus: no hwloc XML; " + topo::describe(host) + "-->\n" : xml;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
    if (f) std::fclose(f);
    CHORUS_WARN(kLogGraph, "cannot write CHORUS_TOPO_DUMP_FILE %s", tmp.c_str());
    return;
  }
  std::fclose(f);
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    CHORUS_WARN(kLogGraph, "cannot rename %s to %s", tmp.c_str(), path.c_str());
  else
    CHORUS_INFO(kLogGraph, "topology of %s written to %s", host.hostname.c_str(), path.c_str());
}

}  // namespace

chorusResult_t commTopoInit(chorusComm* comm) {
  const int n = comm->nranks, rank = comm->rank;
  const topo::DetectedHost& cache = topo::detectedHost();
  const PeerInfo& me = comm->peers[static_cast<size_t>(rank)];
  std::vector<topo::RankTopoRecord> recs(static_cast<size_t>(n));
  recs[static_cast<size_t>(rank)] =
      topo::makeRecord(cache.host, topo::currentBinding(), me.hostHash, rank);
  CHORUS_CHECK(comm->bootstrap->allGather(recs.data(), sizeof(topo::RankTopoRecord)));
  for (int p = 0; p < n; ++p)
    if (recs[static_cast<size_t>(p)].rank != p ||
        recs[static_cast<size_t>(p)].hostHash != comm->peers[static_cast<size_t>(p)].hostHash)
      CHORUS_FAIL(chorusInternalError, "topology exchange returned a scrambled record for rank %d",
                  p);

  const std::vector<int> ring = topo::buildRing(recs);
  const auto trees = topo::buildTrees(recs);
  const std::vector<std::vector<int>> hosts = topo::groupByHost(recs);
  comm->nHosts = static_cast<int>(hosts.size());
  // Recursive doubling between host leaders (src/algorithms/allreduce.cc): each host's
  // lowest rank, hosts in the order of it, and this host's ranks in rank order.
  comm->hostLeaders.clear();
  for (const std::vector<int>& h : hosts) {
    std::vector<int> sorted = h;
    std::sort(sorted.begin(), sorted.end());
    comm->hostLeaders.push_back(sorted[0]);
    if (recs[static_cast<size_t>(sorted[0])].hostHash == me.hostHash) comm->hostMates = sorted;
  }
  comm->numaOsIndex = recs[static_cast<size_t>(rank)].numaOsIndex;

  RingOrder& r = comm->ring;
  r.order = ring;
  r.pos.assign(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) r.pos[static_cast<size_t>(ring[static_cast<size_t>(i)])] = i;
  r.me = r.pos[static_cast<size_t>(rank)];
  r.next = r.at(r.me + 1);
  r.prev = r.at(r.me - 1);
  for (int t = 0; t < 2; ++t) {
    const topo::TreeNode& node = trees[static_cast<size_t>(t)].node[static_cast<size_t>(rank)];
    TreeLinks& l = comm->trees[static_cast<size_t>(t)];
    l.parent = node.parent;
    l.nchildren = node.nchildren;
    for (int c = 0; c < kTreeMaxChildren; ++c)
      l.children[static_cast<size_t>(c)] = node.children[static_cast<size_t>(c)];
  }

  // Lowest rank of each host logs the host and may dump it; rank 0 logs the graphs.
  bool firstOnHost = true;
  for (int p = 0; p < rank; ++p)
    if (recs[static_cast<size_t>(p)].hostHash == me.hostHash) firstOnHost = false;
  if (firstOnHost) {
    if (logEnabled(LogLevel::Info, kLogGraph)) {
      std::string d = topo::describe(cache.host);
      if (!d.empty() && d.back() == '\n') d.pop_back();
      for (size_t pos; (pos = d.find('\n')) != std::string::npos;) d[pos] = ';';
      CHORUS_INFO(kLogGraph, "rank %d: %s", rank, d.c_str());
    }
    const std::string& dump = paramString(Param::TopoDumpFile);
    if (!dump.empty()) dumpXml(dump, cache.host, cache.xml);
  }
  const topo::RankTopoRecord& mine = recs[static_cast<size_t>(rank)];
  CHORUS_INFO(kLogGraph, "rank %d: package %d numa %d nic %s %s", rank, mine.package, mine.numa,
              mine.nic[0] ? mine.nic : "-", mine.nicBusId);
  if (rank == 0 && n > 1) {
    CHORUS_INFO(kLogGraph, "ring %s (%d hosts)", topo::formatRing(ring).c_str(), comm->nHosts);
    for (int t = 0; t < 2; ++t)
      CHORUS_INFO(kLogGraph, "tree %d %s", t,
                  topo::formatTree(trees[static_cast<size_t>(t)]).c_str());
  }
  return chorusSuccess;
}

}  // namespace chorus
