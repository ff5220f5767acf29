#include "src/comm/hostid.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>
#include <string>

#include "src/core/params.h"

namespace chorus {

uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

// The kernel's boot id with its newline; "" where it cannot be read.
std::string bootId() {
  std::string id;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {0};
    if (std::fgets(boot, sizeof(boot), f)) id = boot;
    std::fclose(f);
  }
  return id;
}

}  // namespace

uint64_t hostHash() {
  const std::string& forced = paramString(Param::HostId);
  std::string id;
  if (!forced.empty()) {
    id = "hostid:" + forced;
  } else {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    id = host;
    id += bootId();
  }
  return fnv1a(id.data(), id.size());
}

uint64_t processStartTicks(int pid) {
  char path[48];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "re");
  if (!f) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) state ppid ...": the command may hold spaces and parentheses, so count
  // fields from the last ')'; the state is field 3, the start time field 22.
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  ++p;
  for (int field = 2; field < 21; ++field) {
    p = std::strchr(p + 1, ' ');
    if (!p) return 0;
  }
  return std::strtoull(p + 1, nullptr, 10);
}

KernelRecord ownKernelRecord() {
  KernelRecord r;
  const std::string boot = bootId();
  if (boot.size() >= 8) r.bootHash = fnv1a(boot.data(), boot.size());
  if (FILE* f = std::fopen("/proc/stat", "re")) {
    char line[512];
    while (std::fgets(line, sizeof(line), f))
      if (std::strncmp(line, "btime ", 6) == 0) r.bootTime = std::strtoll(line + 6, nullptr, 10);
    std::fclose(f);
  }
  r.pid = static_cast<int32_t>(getpid());
  r.startTicks = processStartTicks(r.pid);
  return r;
}

bool sameKernel(const KernelRecord& mine, const KernelRecord& other) {
  if (mine.bootHash != 0 && mine.bootHash == other.bootHash) return true;
  if (mine.bootTime == 0 || other.bootTime != mine.bootTime || other.startTicks == 0 ||
      other.pid <= 0)
    return false;
  return processStartTicks(other.pid) == other.startTicks;
}

int kernelLeader(const std::vector<KernelRecord>& all, int me) {
  const int n = static_cast<int>(all.size());
  if (me < 0 || me >= n) return me;
  for (int r = 0; r < me; ++r)
    if (sameKernel(all[static_cast<size_t>(me)], all[static_cast<size_t>(r)])) return r;
  return me;
}

std::vector<KernelShare> kernelShares(const std::vector<uint64_t>& kernelOfRank,
                                      const std::vector<std::array<uint64_t, 16>>& cpuMaskOfRank) {
  const size_t n = std::min(kernelOfRank.size(), cpuMaskOfRank.size());
  std::map<uint64_t, std::pair<int, std::array<uint64_t, 16>>> kernels;
  for (size_t r = 0; r < n; ++r) {
    auto& k = kernels[kernelOfRank[r]];
    ++k.first;
    for (size_t i = 0; i < k.second.size(); ++i) k.second[i] |= cpuMaskOfRank[r][i];
  }
  std::vector<KernelShare> out(n);
  for (size_t r = 0; r < n; ++r) {
    const auto& k = kernels[kernelOfRank[r]];
    out[r].ranks = k.first;
    for (uint64_t m : k.second) out[r].cpus += __builtin_popcountll(m);
  }
  return out;
}

}  // namespace chorus
