#include "tools/chorusrun/hosts.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tools/chorusrun/options.h"

namespace chorusrun {
namespace {

// Slots one host may declare; the job as a whole is capped at kMaxRanks anyway.
constexpr int kMaxSlots = kMaxRanks;

bool parseSlots(const std::string& text, int* out) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  long v = std::strtol(text.c_str(), nullptr, 10);
  if (v < 1 || v > kMaxSlots) return false;
  *out = static_cast<int>(v);
  return true;
}

// A host name goes to the launch agent as one argument: no whitespace or
// control characters, not empty, and not starting with '-' (an agent such as
// ssh would take it for an option).
bool validHostName(const std::string& name, std::string* why) {
  if (name.empty()) {
    *why = "empty host name";
    return false;
  }
  if (name[0] == '-') {
    *why = "host name '" + name + "' starts with '-'";
    return false;
  }
  for (unsigned char c : name) {
    if (c <= 0x20 || c == 0x7f || c == ',' || c == '[' || c == ']' || c == '#' || c == '\'' ||
        c == '"' || c == '\\') {
      *why = "host name '" + name + "' contains an invalid character";
      return false;
    }
  }
  return true;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

}  // namespace

bool parseHostList(const std::string& text, std::vector<HostSpec>* hosts, std::string* err) {
  if (text.empty()) {
    *err = "empty host list for -H";
    return false;
  }
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    // A '[v6]' entry may not contain commas, so a plain split is enough.
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    HostSpec h;
    std::string slots;
    bool hasSlots = false;
    if (!item.empty() && item[0] == '[') {  // [v6] or [v6]:N
      size_t close = item.find(']');
      if (close == std::string::npos) {
        *err = "unterminated '[' in host '" + item + "'";
        return false;
      }
      h.name = item.substr(1, close - 1);
      std::string rest = item.substr(close + 1);
      if (!rest.empty()) {
        if (rest[0] != ':') {
          *err = "invalid host entry '" + item + "' (expected [address]:slots)";
          return false;
        }
        slots = rest.substr(1);
        hasSlots = true;
      }
    } else {
      size_t colon = item.find(':');
      if (colon != std::string::npos && item.find(':', colon + 1) != std::string::npos) {
        *err = "invalid host entry '" + item +
               "' (write IPv6 addresses as [address] or [address]:slots)";
        return false;
      }
      h.name = item.substr(0, colon);
      if (colon != std::string::npos) {
        slots = item.substr(colon + 1);
        hasSlots = true;
      }
    }
    std::string why;
    if (!validHostName(h.name, &why)) {
      *err = why + " in -H '" + text + "'";
      return false;
    }
    if (hasSlots && !parseSlots(slots, &h.slots)) {
      *err = "invalid slot count '" + slots + "' for host '" + h.name + "' (expected 1.." +
             std::to_string(kMaxSlots) + ")";
      return false;
    }
    hosts->push_back(h);
  }
  return true;
}

bool parseHostfile(const std::string& path, std::vector<HostSpec>* hosts, std::string* err) {
  std::ifstream in(path);
  if (!in) {
    *err = "cannot read hostfile '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::string line;
  int lineno = 0;
  size_t before = hosts->size();
  while (std::getline(in, line)) {
    ++lineno;
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    // "slots = 4" is accepted as well as "slots=4": glue '=' to its neighbours first.
    std::string glued;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '=') {
        while (!glued.empty() && (glued.back() == ' ' || glued.back() == '\t')) glued.pop_back();
        glued += '=';
        while (i + 1 < line.size() && (line[i + 1] == ' ' || line[i + 1] == '\t')) ++i;
      } else {
        glued += line[i];
      }
    }
    std::istringstream words(glued);
    std::string word;
    words >> word;
    const std::string where = path + ":" + std::to_string(lineno) + ": ";
    HostSpec h;
    h.name = word;
    if (h.name.size() >= 2 && h.name.front() == '[' && h.name.back() == ']') {
      h.name = h.name.substr(1, h.name.size() - 2);
    }
    std::string why;
    if (!validHostName(h.name, &why)) {
      *err = where + why;
      return false;
    }
    while (words >> word) {
      size_t eq = word.find('=');
      std::string key = word.substr(0, eq);
      std::string value = eq == std::string::npos ? "" : word.substr(eq + 1);
      if (key == "slots") {
        if (!parseSlots(value, &h.slots)) {
          *err = where + "invalid slot count '" + value + "' (expected slots=1.." +
                 std::to_string(kMaxSlots) + ")";
          return false;
        }
      } else if (key == "max_slots" || key == "max-slots") {
        int ignored = 0;
        if (!parseSlots(value, &ignored)) {
          *err = where + "invalid " + key + " '" + value + "'";
          return false;
        }
      } else {
        *err = where + "unknown field '" + word + "' (expected 'host [slots=N]')";
        return false;
      }
    }
    hosts->push_back(h);
  }
  if (in.bad()) {
    *err = "error reading hostfile '" + path + "'";
    return false;
  }
  if (hosts->size() == before) {
    *err = "hostfile '" + path + "' names no hosts";
    return false;
  }
  return true;
}

bool isLocalHostName(const std::string& name) {
  if (name == "localhost" || name == "127.0.0.1" || name == "::1") return true;
  char buf[HOST_NAME_MAX + 2] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return false;
  std::string self(buf);
  if (name == self) return true;
  std::string selfShort = self.substr(0, self.find('.'));
  std::string nameShort = name.substr(0, name.find('.'));
  // "node1" matches "node1.example.org" and the reverse, but only when one of
  // the two is unqualified (two different FQDNs never match), and never for
  // numeric addresses.
  bool numeric = name.find_first_not_of("0123456789.") == std::string::npos;
  bool oneShort = name.find('.') == std::string::npos || self.find('.') == std::string::npos;
  return !numeric && oneShort && nameShort == selfShort;
}

std::vector<HostSpec> mergeHosts(const std::vector<HostSpec>& hosts) {
  std::vector<HostSpec> merged;
  int localIndex = -1;
  for (const HostSpec& h : hosts) {
    bool local = isLocalHostName(h.name);
    int found = -1;
    if (local) {
      found = localIndex;
    } else {
      for (size_t i = 0; i < merged.size(); ++i) {
        if (merged[i].name == h.name) found = static_cast<int>(i);
      }
    }
    if (found >= 0) {
      long sum = static_cast<long>(merged[found].slots) + h.slots;
      merged[found].slots = static_cast<int>(sum > INT_MAX / 2 ? INT_MAX / 2 : sum);
      continue;
    }
    HostSpec copy = h;
    copy.local = local;
    if (local) localIndex = static_cast<int>(merged.size());
    merged.push_back(copy);
  }
  return merged;
}

int totalSlots(const std::vector<HostSpec>& hosts) {
  long total = 0;
  for (const HostSpec& h : hosts) {
    total += h.slots;
    if (total > INT_MAX / 2) return INT_MAX / 2;
  }
  return static_cast<int>(total);
}

bool mapRanks(const std::vector<HostSpec>& hosts, int np, bool oversubscribe,
              std::vector<Placement>* placements, std::vector<int>* localSizes, std::string* err) {
  const int total = totalSlots(hosts);
  if (hosts.empty() || total < 1) {
    *err = "no hosts to run on";
    return false;
  }
  if (np > total && !oversubscribe) {
    std::string list;
    for (size_t i = 0; i < hosts.size() && i < 8; ++i) {
      if (i) list += ", ";
      list += hosts[i].name + ":" + std::to_string(hosts[i].slots);
    }
    if (hosts.size() > 8) list += ", ...";
    *err = "-np " + std::to_string(np) + " exceeds the " + std::to_string(total) + " slot" +
           (total == 1 ? "" : "s") + " available (" + list +
           "); give more slots or use --oversubscribe";
    return false;
  }
  // The slot list is never materialised: walk the hosts' slot ranges instead.
  placements->assign(static_cast<size_t>(np), Placement{});
  localSizes->assign(hosts.size(), 0);
  for (int r = 0; r < np; ++r) {
    int slot = r % total;
    int h = 0;
    while (slot >= hosts[h].slots) {
      slot -= hosts[h].slots;
      ++h;
    }
    (*placements)[r].host = h;
    (*placements)[r].localRank = (*localSizes)[h]++;
  }
  return true;
}

}  // namespace chorusrun
