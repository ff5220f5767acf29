#include "transports/rdma/device.h"

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>

namespace chorus {
namespace rdma {
namespace {

bool isV4Mapped(const uint8_t g[16]) {
  static const uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g, kPrefix, sizeof(kPrefix)) == 0;
}

const GidEntry* findGid(const PortInfo& p, int index) {
  for (const GidEntry& g : p.gids)
    if (g.index == index) return &g;
  return nullptr;
}

}  // namespace

bool parseHcaFilter(const std::string& spec, HcaFilter* out, std::string* why) {
  *out = HcaFilter{};
  size_t i = 0;
  if (i < spec.size() && spec[i] == '^') {
    out->exclude = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '=') {
    out->exact = true;
    ++i;
  }
  while (i < spec.size()) {
    size_t end = spec.find(',', i);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(i, end - i);
    i = end + 1;
    if (item.empty()) continue;
    HcaFilter::Item it;
    const size_t colon = item.find(':');
    it.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string port = item.substr(colon + 1);
      char* e = nullptr;
      const long v = std::strtol(port.c_str(), &e, 10);
      if (port.empty() || *e != '\0' || v < 1 || v > 255) {
        *why = "CHORUS_IB_HCA: bad port '" + port + "' in '" + item + "'";
        return false;
      }
      it.port = static_cast<int>(v);
    }
    out->items.push_back(it);
  }
  return true;
}

bool hcaMatches(const HcaFilter& f, const std::string& name, int port) {
  if (f.items.empty()) return true;
  bool listed = false;
  for (const HcaFilter::Item& it : f.items) {
    const bool nameOk = f.exact ? name == it.name : name.compare(0, it.name.size(), it.name) == 0;
    if (nameOk && (it.port < 0 || it.port == port)) listed = true;
  }
  return f.exclude ? !listed : listed;
}

bool chooseGid(const PortInfo& p, int requested, bool* useGrh, int* index, std::string* why) {
  if (requested >= 0) {
    if (!findGid(p, requested)) {
      *why = "port " + std::to_string(p.port) +
             " has no GID at CHORUS_IB_GID_INDEX=" + std::to_string(requested);
      return false;
    }
    *useGrh = true;
    *index = requested;
    return true;
  }
  if (p.link == LinkLayer::InfiniBand) {
    *useGrh = false;
    *index = 0;
    return true;
  }
  // RoCE: v2 with an IPv4-mapped address, any v2, then v1.
  const GidEntry* best = nullptr;
  int bestRank = 0;
  for (const GidEntry& g : p.gids) {
    int rank = 0;
    if (g.type == GidType::RoCEv2)
      rank = isV4Mapped(g.raw) ? 3 : 2;
    else if (g.type == GidType::RoCEv1)
      rank = 1;
    if (rank > bestRank) {
      bestRank = rank;
      best = &g;
    }
  }
  if (!best) {
    *why = "Ethernet port " + std::to_string(p.port) + " has no RoCE GID";
    return false;
  }
  *useGrh = true;
  *index = best->index;
  return true;
}

bool choosePort(const std::vector<DeviceInfo>& devs, const HcaFilter& f, int gidIndex,
                PortChoice* out, std::string* why) {
  std::string notes;
  bool anyMatched = false;
  for (size_t d = 0; d < devs.size(); ++d) {
    for (const PortInfo& p : devs[d].ports) {
      if (!hcaMatches(f, devs[d].name, p.port)) continue;
      anyMatched = true;
      const std::string at = devs[d].name + ":" + std::to_string(p.port);
      if (!p.active) {
        notes += (notes.empty() ? "" : "; ") + at + " is not active";
        continue;
      }
      std::string gidWhy;
      bool grh = false;
      int idx = -1;
      if (!chooseGid(p, gidIndex, &grh, &idx, &gidWhy)) {
        notes += (notes.empty() ? "" : "; ") + devs[d].name + ": " + gidWhy;
        continue;
      }
      out->device = static_cast<int>(d);
      out->port = p.port;
      out->useGrh = grh;
      out->gidIndex = idx;
      return true;
    }
  }
  if (!anyMatched)
    *why = devs.empty() ? "no device" : "no device port matches CHORUS_IB_HCA";
  else
    *why = notes;
  return false;
}

std::string gidString(const uint8_t raw[16]) {
  char buf[INET6_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET6, raw, buf, sizeof(buf));
  return buf;
}

}  // namespace rdma
}  // namespace chorus
