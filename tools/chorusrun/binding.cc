#include "tools/chorusrun/binding.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <utility>

namespace chorusrun {

namespace {

// The core a CPU belongs to: (package, core id) from sysfs; a CPU whose topology cannot
// be read is a core of its own.
std::pair<long, long> coreOf(int cpu, const std::string& sysRoot) {
  const std::string dir =
      sysRoot + "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  long pkg = -1, core = -1;
  std::ifstream p(dir + "physical_package_id"), c(dir + "core_id");
  if (!(p >> pkg) || !(c >> core)) return {-2, cpu};
  return {pkg, core};
}

}  // namespace

bool parseBindMode(const std::string& text, BindMode* mode) {
  if (text == "core")
    *mode = BindMode::kCore;
  else if (text == "none")
    *mode = BindMode::kNone;
  else if (text == "auto")
    *mode = BindMode::kAuto;
  else
    return false;
  return true;
}

bool mayBind(BindMode mode, int localSize) {
  // A lone rank per host: binding it buys nothing (no rank of its job shares its host; 4 x 1
  // with and without host 0's rank bound ran the same times, docs/PERF.md), and where
  // several namespaced hosts share one kernel's CPUs every host would put its rank on core 0.
  return mode != BindMode::kNone && localSize > 0 && !(mode == BindMode::kAuto && localSize == 1);
}

std::vector<cpu_set_t> planBinding(int localSize, BindMode mode, std::string* note,
                                   const std::string& sysRoot) {
  std::vector<cpu_set_t> out;
  if (!mayBind(mode, localSize)) return out;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    if (note) *note = "cannot read chorusrun's own CPU affinity: ranks run unbound";
    return out;
  }
  // Cores in (package, core) order, each with the CPUs of it that we may use.
  std::map<std::pair<long, long>, std::vector<int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cores[coreOf(cpu, sysRoot)].push_back(cpu);
  const int ncores = static_cast<int>(cores.size());
  // More ranks than cores: auto leaves them unbound (as mpirun does); core shares the cores
  // round robin, local rank i on core i mod ncores, as Intel MPI pins by default (np 4 on 2
  // cores: {0},{1},{0},{1}). Not the default: measured both ways it steadied the all-gather
  // but slowed the broadcast's chain by 15-20% at 256 KiB-2 MiB, and beside busy processes
  // it was as often worse as better (docs/PERF.md, "Binding crowded ranks").
  if (localSize > ncores && (mode != BindMode::kCore || ncores == 0)) return out;
  if (localSize > ncores && note)
    *note = std::to_string(localSize) + " local ranks on " + std::to_string(ncores) +
            " cores: they share the cores round robin (local rank i on core i mod " +
            std::to_string(ncores) + ")";
  std::vector<const std::vector<int>*> order;
  for (const auto& kv : cores) order.push_back(&kv.second);
  // Local rank i on core i, as mpirun maps by core: neighbours in rank order (ring
  // neighbours) share a socket and its cache as long as they can.
  out.resize(static_cast<size_t>(localSize));
  for (int i = 0; i < localSize; ++i) {
    CPU_ZERO(&out[static_cast<size_t>(i)]);
    const std::vector<int>& cpus = *order[static_cast<size_t>(i % ncores)];
    for (int cpu : cpus) CPU_SET(cpu, &out[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace chorusrun
