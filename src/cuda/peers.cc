// peers.cc — the path verdict (see peers.h).
#include "src/cuda/peers.h"

#include <unistd.h>

#include <cstdio>

namespace chorus {
namespace cuda {

bool parsePathMode(const std::string& s, PathMode* out, std::string* err) {
  if (s.empty() || s == "auto")
    *out = PathMode::Auto;
  else if (s == "staging")
    *out = PathMode::Staging;
  else if (s == "device")
    *out = PathMode::Device;
  else {
    if (err) *err = "CHORUS_CUDA_PATH=" + s + " is not auto, staging or device";
    return false;
  }
  return true;
}

uint64_t processToken() {
  // The pid alone repeats across pid namespaces on one host; the address of this function
  // differs between processes (ASLR) and needs no state.
  return (static_cast<uint64_t>(getpid()) << 40) ^
         static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&processToken));
}

Verdict decidePath(const std::vector<PeerHeader>& h, std::string* why) {
  bool anyStaging = false, anyDevice = false;
  for (const PeerHeader& p : h) {
    anyStaging |= p.mode == static_cast<int32_t>(PathMode::Staging);
    anyDevice |= p.mode == static_cast<int32_t>(PathMode::Device);
  }
  char buf[200];
  if (anyStaging && anyDevice) {
    if (why) *why = "ranks disagree on CHORUS_CUDA_PATH (some staging, some device)";
    return Verdict::Mismatch;
  }
  if (anyStaging) {
    if (why) *why = "CHORUS_CUDA_PATH=staging";
    return Verdict::Staging;
  }
  std::string reason;
  for (size_t i = 0; i < h.size() && reason.empty(); ++i) {
    const PeerHeader& a = h[i];
    if (!a.oneHost) {
      reason = "ranks on more than one host";
    } else if (!a.scratchOk) {
      std::snprintf(buf, sizeof buf, "rank %zu has no device scratch area", i);
      reason = buf;
    } else {
      for (size_t j = 0; j < h.size() && reason.empty(); ++j) {
        const PeerHeader& b = h[j];
        const bool reach = b.device >= 0 && b.device < 64 && ((a.accessMask >> b.device) & 1u);
        if (!reach) {
          std::snprintf(buf, sizeof buf, "rank %zu (GPU %d) cannot reach rank %zu's GPU %d", i,
                        a.device, j, b.device);
          reason = buf;
        }
      }
    }
  }
  if (reason.empty()) return Verdict::Device;
  if (why) *why = reason;
  return anyDevice ? Verdict::NoDevice : Verdict::Staging;
}

}  // namespace cuda
}  // namespace chorus
