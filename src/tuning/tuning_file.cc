// tuning_file.cc — CHORUS_TUNING_FILE: reading the model's constants from a file
// (the syntax: docs/ENV.md).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/core/debug.h"
#include "src/tuning/names.h"
#include "src/tuning/tuning.h"

namespace chorus {

namespace {

struct NamedConst {
  const char* name;
  double ModelParams::*field;
};
const NamedConst kConsts[] = {
    {"simple_step_us", &ModelParams::simpleStepUs},
    {"ll_bw_factor", &ModelParams::llBwFactor},
    {"ll_peer_us", &ModelParams::llPeerUs},
    {"tree_bw_factor", &ModelParams::treeBwFactor},
    {"os_lat_factor", &ModelParams::osLatFactor},
    {"os_lat_us", &ModelParams::osLatUs},
    {"os_bw_factor", &ModelParams::osBwFactor},
    {"tcp_crowd_peer_us", &ModelParams::tcpCrowdPeerUs},
    {"tcp_crowd_halving_large", &ModelParams::tcpCrowdHalvingLarge},
};

bool number(const std::string& s, double* v) {
  if (s == "-") return true;  // keep
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !std::isfinite(d) || d < 0) return false;
  *v = d;
  return true;
}

}  // namespace

bool parseTuningText(const std::string& text, ModelParams* out, std::string* err) {
  ModelParams p = *out;
  std::stringstream in(text);
  std::string line;
  int lineno = 0;
  auto fail = [&](const std::string& why) {
    if (err) *err = "line " + std::to_string(lineno) + ": " + why + " (\"" + line + "\")";
    return false;
  };
  while (std::getline(in, line)) {
    ++lineno;
    std::string body = line.substr(0, line.find('#'));
    std::stringstream ls(body);
    std::vector<std::string> w;
    for (std::string x; ls >> x;) w.push_back(x);
    if (w.empty()) continue;
    const std::string key = lowerCase(w[0]);
    if (key == "shm" || key == "tcp" || key == "tcp_leaders") {
      LinkCost& l = key == "shm" ? p.shm : key == "tcp" ? p.tcp : p.tcpLeaders;
      if (w.size() != 3 || !number(w[1], &l.latUs) || !number(w[2], &l.bwGBps) || l.bwGBps <= 0)
        return fail("expected: " + key + " LATENCY_US BANDWIDTH_GBPS");
      continue;
    }
    if (key == "tcp_tree_correction" || key == "tcp_crowd_ring_correction" ||
        key == "tcp_crowd_halving_correction") {
      double* f = key == "tcp_tree_correction"         ? p.tcpTreeCorrection
                  : key == "tcp_crowd_ring_correction" ? p.tcpCrowdRingCorrection
                                                       : p.tcpCrowdHalvingCorrection;
      if (w.size() != 1 + ModelParams::kTcpTreeBuckets)
        return fail("expected: " + key + " and " + std::to_string(ModelParams::kTcpTreeBuckets) +
                    " factors (16 KiB, 32 KiB, ..., 8 MiB)");
      for (int i = 0; i < ModelParams::kTcpTreeBuckets; ++i)
        if (!number(w[1 + i], &f[i]) || f[i] <= 0)
          return fail(key + ": factor " + std::to_string(i + 1) + " is not a positive number or -");
      continue;
    }
    if (key == "set") {
      if (w.size() != 3) return fail("expected: set NAME VALUE");
      bool ok = false;
      for (const NamedConst& c : kConsts)
        if (lowerCase(w[1]) == c.name) ok = number(w[2], &(p.*(c.field)));
      if (!ok) return fail("unknown constant or bad value");
      continue;
    }
    const int coll = collIndex(w[0]);
    if (coll >= 0) {
      if (w.size() < 4) return fail("expected: COLL ALGO PROTO LATENCY_US BANDWIDTH_GBPS | off");
      const int algo = algoIndex(w[1]);
      const int proto = protoIndex(w[2]);
      if (algo < 0 || proto < 0) return fail("unknown algorithm or protocol");
      ModelParams::Override o{coll, algo, proto, false, {0, 1}};
      if (w.size() == 4 && lowerCase(w[3]) == "off") {
        o.off = true;
      } else if (w.size() != 5 || w[3] == "-" || w[4] == "-" || !number(w[3], &o.cost.latUs) ||
                 !number(w[4], &o.cost.bwGBps) || o.cost.bwGBps <= 0) {
        return fail("expected: COLL ALGO PROTO LATENCY_US BANDWIDTH_GBPS | off");
      }
      p.overrides.push_back(o);
      continue;
    }
    return fail("unknown keyword " + w[0]);
  }
  *out = p;
  return true;
}

ModelParams loadModelParams(const std::string& path) {
  ModelParams p;
  if (path.empty()) return p;
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string err;
  if (!f)
    CHORUS_WARN(kLogTuning, "CHORUS_TUNING_FILE=%s cannot be read; using the defaults",
                path.c_str());
  else if (!parseTuningText(ss.str(), &p, &err))
    CHORUS_WARN(kLogTuning, "CHORUS_TUNING_FILE=%s: %s; using the defaults", path.c_str(),
                err.c_str());
  else
    CHORUS_INFO(kLogTuning, "tuning constants from %s", path.c_str());
  return p;
}

}  // namespace chorus
