// report.cc — the model's predictions as a table, for the INFO log and for people.
#include <cstdio>
#include <string>
#include <vector>

#include "src/tuning/tuning.h"

namespace chorus {

namespace {

std::string sizeText(size_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0)
    std::snprintf(buf, sizeof buf, "%zuG", b >> 30);
  else if (b >= (1u << 20) && b % (1u << 20) == 0)
    std::snprintf(buf, sizeof buf, "%zuM", b >> 20);
  else if (b >= 1024 && b % 1024 == 0)
    std::snprintf(buf, sizeof buf, "%zuK", b >> 10);
  else
    std::snprintf(buf, sizeof buf, "%zu", b);
  return buf;
}

}  // namespace

std::string formatPredictions(const ModelParams& p, const ModelShape& s, unsigned algoMask,
                              unsigned protoMask) {
  static const size_t kSizes[] = {8,       256,     4 << 10,  16 << 10, 64 << 10, 256 << 10,
                                  1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20};
  static const Coll kColls[] = {Coll::AllReduce, Coll::Broadcast, Coll::AllGather, Coll::Reduce,
                                Coll::ReduceScatter};
  const TuningTables t = buildTables(p, s, algoMask, protoMask);
  std::string out;
  char buf[64];
  out += "predicted us      ";
  for (size_t b : kSizes) std::snprintf(buf, sizeof buf, " %9s", sizeText(b).c_str()), out += buf;
  out += "\n";
  for (Coll c : kColls) {
    for (int i = 0; i < kNumAlgos; ++i) {
      const Algo a = static_cast<Algo>(i);
      bool any = false;
      std::string row;
      std::snprintf(buf, sizeof buf, "%-14s %-6s", collName(c), algoName(a));
      row += buf;
      for (size_t b : kSizes) {
        const double us = predictUs(p, s, c, a, b);
        if (us >= 0) any = true;
        if (us < 0)
          std::snprintf(buf, sizeof buf, " %9s", "-");
        else
          std::snprintf(buf, sizeof buf, " %9.*f", us < 100 ? 2 : 0, us);
        row += buf;
      }
      if (any) out += row + "\n";
    }
    std::string seg;
    const std::vector<Segment>& v = t.segs[static_cast<int>(c)];
    for (size_t k = 0; k < v.size(); ++k) {
      seg += algoName(v[k].algo);
      if (k + 1 < v.size()) seg += " <=" + sizeText(v[k].upTo) + " < ";
    }
    out += std::string(collName(c)) + " choice: " + seg + "\n";
  }
  return out;
}

}  // namespace chorus
