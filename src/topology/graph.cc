// graph.cc — rings and double binary trees from the gathered rank records.
//
// Pure functions of the records: no hwloc, no communicator, no I/O, so the unit tests can
// feed them any multi-host layout.
#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "src/topology/topo.h"

namespace chorus {
namespace topo {

std::vector<std::vector<int>> groupByHost(const std::vector<RankTopoRecord>& ranks) {
  std::vector<std::vector<int>> hosts;
  std::map<uint64_t, size_t> index;  // host hash -> position in `hosts`
  for (size_t r = 0; r < ranks.size(); ++r) {
    auto it = index.find(ranks[r].hostHash);
    if (it == index.end()) {
      it = index.emplace(ranks[r].hostHash, hosts.size()).first;
      hosts.emplace_back();
    }
    hosts[it->second].push_back(static_cast<int>(r));
  }
  // Inside a host: package by package, NUMA node by NUMA node, then rank. Unbound ranks
  // (-1) come first, in rank order.
  for (auto& h : hosts)
    std::stable_sort(h.begin(), h.end(), [&](int a, int b) {
      const RankTopoRecord& x = ranks[static_cast<size_t>(a)];
      const RankTopoRecord& y = ranks[static_cast<size_t>(b)];
      return std::make_tuple(x.package, x.numa, a) < std::make_tuple(y.package, y.numa, b);
    });
  return hosts;
}

std::vector<int> buildRing(const std::vector<RankTopoRecord>& ranks) {
  std::vector<int> ring;
  for (const auto& h : groupByHost(ranks)) ring.insert(ring.end(), h.begin(), h.end());
  return ring;
}

std::vector<int> btreeParents(int n) {
  // In-order numbering of positions 1..n: position p whose lowest set bit is b has its
  // children at p - b/2 and at the first of p + b/2, p + b/4, ... that exists. Odd
  // positions are the leaves; the root is the highest power of two not above n.
  std::vector<int> parent(static_cast<size_t>(n) + 1, 0);
  for (int p = 2; p <= n; p += 2) {
    const int b = p & -p;
    parent[static_cast<size_t>(p - b / 2)] = p;
    int c = b / 2;
    while (c >= 1 && p + c > n) c /= 2;
    if (c >= 1) parent[static_cast<size_t>(p + c)] = p;
  }
  return parent;
}

std::array<Tree, 2> buildTrees(const std::vector<RankTopoRecord>& ranks) {
  const auto hosts = groupByHost(ranks);
  const int nh = static_cast<int>(hosts.size());
  const std::vector<int> parentPos = btreeParents(nh);
  std::array<Tree, 2> trees;
  for (int t = 0; t < 2; ++t) {
    Tree& tree = trees[static_cast<size_t>(t)];
    tree.node.assign(ranks.size(), TreeNode{});
    // Host h sits at position pos[h] of the binary tree. Tree 1 mirrors tree 0 (even host
    // count) or shifts it by one (odd count), which turns tree 0's interior positions (even)
    // into leaves (odd): a host heads an interior node in at most one tree.
    std::vector<int> pos(static_cast<size_t>(nh)), hostAt(static_cast<size_t>(nh) + 1, -1);
    for (int h = 0; h < nh; ++h) {
      int p = h + 1;
      if (t == 1) p = nh % 2 == 0 ? nh - h : (h + nh - 1) % nh + 1;
      pos[static_cast<size_t>(h)] = p;
      hostAt[static_cast<size_t>(p)] = h;
    }
    // A host's chain: host order in tree 0, reversed in tree 1; its head talks across hosts.
    auto chain = [&](int h) {
      std::vector<int> c = hosts[static_cast<size_t>(h)];
      if (t == 1) std::reverse(c.begin(), c.end());
      return c;
    };
    auto addChild = [&](int parent, int child) {
      TreeNode& pn = tree.node[static_cast<size_t>(parent)];
      pn.children[static_cast<size_t>(pn.nchildren++)] = child;
      tree.node[static_cast<size_t>(child)].parent = parent;
    };
    // Children across hosts first (in position order), then the chain: the reduction order
    // at a head is ((own OP left host) OP right host) OP rest of the chain.
    for (int p = 1; p <= nh; ++p) {
      const int pp = parentPos[static_cast<size_t>(p)];
      if (pp == 0) {
        tree.root = chain(hostAt[static_cast<size_t>(p)]).front();
        continue;
      }
      addChild(chain(hostAt[static_cast<size_t>(pp)]).front(),
               chain(hostAt[static_cast<size_t>(p)]).front());
    }
    for (int h = 0; h < nh; ++h) {
      const std::vector<int> c = chain(h);
      for (size_t i = 1; i < c.size(); ++i) addChild(c[i - 1], c[i]);
    }
  }
  return trees;
}

std::string formatRing(const std::vector<int>& ring) {
  std::string s;
  for (int r : ring) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

std::string formatTree(const Tree& t) {
  // "root R; rank:parent->children ..." e.g. "root 3; 0:1->4 1:3->0,2,5 ..."
  std::string s = "root " + std::to_string(t.root) + ";";
  for (size_t r = 0; r < t.node.size(); ++r) {
    const TreeNode& n = t.node[r];
    s += " " + std::to_string(r) + ":" + (n.parent < 0 ? "-" : std::to_string(n.parent)) + "->";
    if (n.nchildren == 0) s += "-";
    for (int i = 0; i < n.nchildren; ++i)
      s += (i ? "," : "") + std::to_string(n.children[static_cast<size_t>(i)]);
  }
  return s;
}

std::string toDot(const std::vector<RankTopoRecord>& ranks, const std::vector<int>& ring,
                  const std::array<Tree, 2>& trees) {
  std::string s = "digraph chorus {\n  node [shape=box];\n";
  const auto hosts = groupByHost(ranks);
  for (size_t h = 0; h < hosts.size(); ++h) {
    s += "  subgraph cluster_host" + std::to_string(h) + " {\n    label=\"host " +
         std::to_string(h) + "\";\n";
    for (int r : hosts[h]) {
      const RankTopoRecord& x = ranks[static_cast<size_t>(r)];
      s += "    r" + std::to_string(r) + " [label=\"rank " + std::to_string(r) + "\\npkg " +
           std::to_string(x.package) + " numa " + std::to_string(x.numa) +
           (x.nic[0] ? std::string("\\n") + x.nic : std::string()) + "\"];\n";
    }
    s += "  }\n";
  }
  for (size_t i = 0; i < ring.size() && ring.size() > 1; ++i)
    s += "  r" + std::to_string(ring[i]) + " -> r" + std::to_string(ring[(i + 1) % ring.size()]) +
         " [color=black, label=\"ring\"];\n";
  const char* colors[2] = {"blue", "red"};
  for (int t = 0; t < 2; ++t)
    for (size_t r = 0; r < trees[static_cast<size_t>(t)].node.size(); ++r) {
      const int p = trees[static_cast<size_t>(t)].node[r].parent;
      if (p >= 0)
        s += "  r" + std::to_string(r) + " -> r" + std::to_string(p) + " [color=" + colors[t] +
             ", label=\"tree" + std::to_string(t) + "\"];\n";
    }
  return s + "}\n";
}

}  // namespace topo
}  // namespace chorus
