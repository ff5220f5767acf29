#include "src/comm/hostid.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
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

uint64_t hostHash() {
  const std::string& forced = paramString(Param::HostId);
  std::string id;
  if (!forced.empty()) {
    id = "hostid:" + forced;
  } else {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    id = host;
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char boot[64] = {0};
      if (std::fgets(boot, sizeof(boot), f)) id += boot;
      std::fclose(f);
    }
  }
  return fnv1a(id.data(), id.size());
}

}  // namespace chorus
