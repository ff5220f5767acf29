// fuzz_hostlist.cc — Slurm's compressed host lists (SLURM_STEP_NODELIST), expanded by
// expandHostList: never crashes, never exceeds its limit, and every name it returns is
// bracket-free.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/comm/hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 512) return 0;
  const std::string list(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> out;
  const size_t limit = 4096;
  if (chorus::expandHostList(list, &out, limit)) {
    if (out.empty() || out.size() > limit) __builtin_trap();
    for (const std::string& n : out)
      if (n.find('[') != std::string::npos || n.find(']') != std::string::npos) __builtin_trap();
  }
  return 0;
}
