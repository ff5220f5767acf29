#include "src/comm/hostlist.h"

#include <cstdlib>

namespace chorus {
namespace {

// Expands one name (no top-level commas) into `out`; recursion handles later groups.
bool expandOne(const std::string& name, std::vector<std::string>* out, size_t limit) {
  const size_t open = name.find('[');
  if (open == std::string::npos) {
    if (name.find(']') != std::string::npos) return false;
    if (out->size() >= limit) return false;
    out->push_back(name);
    return true;
  }
  const size_t close = name.find(']', open);
  if (close == std::string::npos || close == open + 1) return false;
  const std::string prefix = name.substr(0, open);
  const std::string rest = name.substr(close + 1);
  const std::string body = name.substr(open + 1, close - open - 1);
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = body.substr(pos, comma - pos);
    const size_t dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (lo.empty() || hi.empty() || lo.find_first_not_of("0123456789") != std::string::npos ||
        hi.find_first_not_of("0123456789") != std::string::npos || lo.size() > 9 || hi.size() > 9)
      return false;
    const long a = std::strtol(lo.c_str(), nullptr, 10);
    const long b = std::strtol(hi.c_str(), nullptr, 10);
    if (b < a) return false;
    const size_t width = lo.size();  // "08-10": the low end's width is the padding
    for (long v = a; v <= b; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      if (!expandOne(prefix + digits + rest, out, limit)) return false;
    }
    pos = comma + 1;
  }
  return true;
}

}  // namespace

bool expandHostList(const std::string& list, std::vector<std::string>* out, size_t limit) {
  out->clear();
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return false;
    if (c == ',' && depth == 0) {
      if (i > start && !expandOne(list.substr(start, i - start), out, limit)) return false;
      start = i + 1;
    }
  }
  return depth == 0 && !out->empty();
}

bool parseHostPort(const std::string& hostport, std::string* host, int* port, const char** why) {
  std::string portText;
  if (!hostport.empty() && hostport[0] == '[') {  // [v6]:port
    const size_t close = hostport.find(']');
    if (close == std::string::npos || close + 1 >= hostport.size() || hostport[close + 1] != ':') {
      *why = "is not [host]:port";
      return false;
    }
    *host = hostport.substr(1, close - 1);
    portText = hostport.substr(close + 2);
  } else {
    const size_t colon = hostport.rfind(':');
    if (colon == std::string::npos) {
      *why = "is not host:port";
      return false;
    }
    *host = hostport.substr(0, colon);
    portText = hostport.substr(colon + 1);
  }
  if (portText.empty() || portText.size() > 5 ||
      portText.find_first_not_of("0123456789") != std::string::npos) {
    *why = "has a port that is not a number in 1..65535";
    return false;
  }
  const long v = std::strtol(portText.c_str(), nullptr, 10);
  if (v < 1 || v > 65535) {
    *why = "has a port that is not a number in 1..65535";
    return false;
  }
  *port = static_cast<int>(v);
  return true;
}

}  // namespace chorus
