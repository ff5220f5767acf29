#include "trainer/ps_plan.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace trainer {

std::vector<size_t> PsPlan::shardsOf(int server) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < shards.size(); ++i)
    if (shards[i].server == server) out.push_back(i);
  return out;
}

std::string PsPlan::describe() const {
  std::string s;
  for (int k = 0; k < servers; ++k) {
    s += "  server " + std::to_string(k) + ": " + std::to_string(serverElements[size_t(k)]) +
         " elements:";
    for (size_t i : shardsOf(k)) {
      const PsShard& sh = shards[i];
      const PsTensor& t = tensors[sh.tensor];
      s += " " + t.name;
      if (sh.rowEnd - sh.rowBegin != t.rows)
        s += "[" + std::to_string(sh.rowBegin) + ":" + std::to_string(sh.rowEnd) + "]";
    }
    s += "\n";
  }
  return s;
}

PsPlan makePsPlan(const std::vector<PsTensor>& tensors, int servers) {
  if (servers < 1) throw std::invalid_argument("parameter-server plan: need at least 1 server");
  PsPlan plan;
  plan.servers = servers;
  plan.tensors = tensors;
  int64_t total = 0;
  for (const PsTensor& t : tensors) total += t.rows * t.rowSize;
  const int64_t fair = (total + servers - 1) / servers;

  // Which server(s) each tensor goes to: split the big ones evenly by rows; then the whole
  // ones, largest first, each to the least-loaded server (ties: the lowest number).
  std::vector<int64_t> load(size_t(servers), 0);
  std::vector<int> owner(tensors.size(), -1);  // -1: split over all servers
  std::vector<size_t> whole;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PsTensor& t = tensors[i];
    const int64_t n = t.rows * t.rowSize;
    if (servers > 1 && 2 * n > fair && t.rows >= servers) {
      for (int k = 0; k < servers; ++k) {
        int64_t b = t.rows * k / servers, e = t.rows * (k + 1) / servers;
        load[size_t(k)] += (e - b) * t.rowSize;
      }
    } else {
      whole.push_back(i);
    }
  }
  std::stable_sort(whole.begin(), whole.end(), [&](size_t a, size_t b) {
    return tensors[a].rows * tensors[a].rowSize > tensors[b].rows * tensors[b].rowSize;
  });
  for (size_t i : whole) {
    int k = int(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = k;
    load[size_t(k)] += tensors[i].rows * tensors[i].rowSize;
  }

  plan.serverElements.assign(size_t(servers), 0);
  auto add = [&](size_t i, int64_t b, int64_t e, int k) {
    PsShard sh;
    sh.tensor = i;
    sh.rowBegin = b;
    sh.rowEnd = e;
    sh.server = k;
    sh.count = (e - b) * tensors[i].rowSize;
    sh.serverOffset = plan.serverElements[size_t(k)];
    plan.serverElements[size_t(k)] += sh.count;
    plan.shards.push_back(sh);
  };
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PsTensor& t = tensors[i];
    if (owner[i] >= 0) {
      add(i, 0, t.rows, owner[i]);
    } else {
      for (int k = 0; k < servers; ++k) add(i, t.rows * k / servers, t.rows * (k + 1) / servers, k);
    }
  }
  return plan;
}

}  // namespace trainer
