// rdma/device.h — which HCA, port and GID a rank uses: pure functions over the device
// list, so the choice is unit-tested without hardware.
//
// CHORUS_IB_HCA follows the syntax users know from NCCL_IB_HCA: a comma list of device
// names, each optionally ":port"; names match as prefixes unless the list starts with "="
// (exact), and a leading "^" turns the list into exclusions. Empty: every device.
// CHORUS_IB_GID_INDEX picks the GID (RoCE needs one); -1 chooses: on Ethernet ports a
// RoCE v2 GID, IPv4-mapped first (routable, what RoCE v2 fabrics are set up for), then any
// RoCE v2, then RoCE v1; on InfiniBand ports no GID (LID routing).
#pragma once

#include <string>
#include <vector>

#include "transports/rdma/verbs.h"

namespace chorus {
namespace rdma {

struct HcaFilter {
  struct Item {
    std::string name;
    int port = -1;  ///< -1: any port
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Item> items;  ///< empty: match everything
};

/// Parses a CHORUS_IB_HCA value. False (with *why) for a malformed port number.
bool parseHcaFilter(const std::string& spec, HcaFilter* out, std::string* why);

/// Whether device `name` port `port` passes the filter.
bool hcaMatches(const HcaFilter& f, const std::string& name, int port);

struct PortChoice {
  int device = -1;  ///< index into the device list
  int port = -1;    ///< verbs port number
  bool useGrh = false;
  int gidIndex = -1;
};

/// The first active port, in list order, that passes the filter and has a usable GID.
/// False with *why ("no active port", "mlx5_1 matched but ...") otherwise.
bool choosePort(const std::vector<DeviceInfo>& devs, const HcaFilter& f, int gidIndex,
                PortChoice* out, std::string* why);

/// The GID of `p` to use: `requested` (>= 0) if the port has it, or the automatic choice
/// described above. Sets *useGrh; false with *why when nothing fits.
bool chooseGid(const PortInfo& p, int requested, bool* useGrh, int* index, std::string* why);

/// "fe80::...": a GID as an IPv6 address, for logs.
std::string gidString(const uint8_t raw[16]);

}  // namespace rdma
}  // namespace chorus
