// names.cc — names of algorithms and protocols, and the CHORUS_ALGO / CHORUS_PROTO masks.
#include "src/tuning/names.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>

#include "src/tuning/tuning.h"

namespace chorus {

const char* algoName(Algo a) {
  switch (a) {
    case Algo::Direct: return "direct";
    case Algo::Ring: return "ring";
    case Algo::Tree: return "tree";
    case Algo::Doubling: return "doubling";
    case Algo::Halving: return "halving";
  }
  return "?";
}

const char* protoName(Proto p) { return p == Proto::LL ? "LL" : "Simple"; }

const char* routeName(Route r) { return r == Route::SingleCopy ? "single copy" : "FIFO"; }

const char* pathRanName(PathRan p) {
  switch (p) {
    case PathRan::Fifo: return "FIFO";
    case PathRan::Mapped: return "mapped";
    case PathRan::Cma: return "CMA";
  }
  return "?";
}

std::string lowerCase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "", "a,b", "^a,b" over `names` (lower case) -> bit mask of allowed entries.
// `all`: what "" (and an exclusion list) starts from.
namespace {

unsigned parseMask(const std::string& specIn, const char* const* names, int count, unsigned all,
                   std::string* bad) {
  std::string spec = lowerCase(specIn);
  spec.erase(std::remove_if(spec.begin(), spec.end(),
                            [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
             spec.end());
  if (spec.empty()) return all;
  const bool exclude = spec[0] == '^';
  if (exclude) spec.erase(0, 1);
  unsigned named = 0;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    int found = -1;
    for (int i = 0; i < count; ++i)
      if (item == names[i]) found = i;
    if (found < 0) {
      if (bad) *bad += (bad->empty() ? "" : ",") + item;
      continue;
    }
    named |= 1u << found;
  }
  if (exclude) return all & ~named;
  return named ? named : all;  // nothing recognized: no restriction
}

const char* const kAlgoNames[] = {"direct", "ring", "tree", "doubling", "halving"};
const char* const kProtoNames[] = {"ll", "simple"};

int indexOf(const std::string& s, const char* const* names, int count) {
  const std::string l = lowerCase(s);
  for (int i = 0; i < count; ++i)
    if (l == names[i]) return i;
  return -1;
}

}  // namespace

int algoIndex(const std::string& s) { return indexOf(s, kAlgoNames, kNumAlgos); }
int protoIndex(const std::string& s) { return indexOf(s, kProtoNames, kNumProtos); }

int collIndex(const std::string& s) {
  const std::string l = lowerCase(s);
  for (int i = 0; i < kNumColls; ++i)
    if (l == collName(static_cast<Coll>(i))) return i;
  return -1;
}

unsigned parseAlgoMask(const std::string& spec, std::string* bad, unsigned all) {
  return parseMask(spec, kAlgoNames, kNumAlgos, all, bad);
}

unsigned parseProtoMask(const std::string& spec, std::string* bad) {
  return parseMask(spec, kProtoNames, kNumProtos, (1u << kNumProtos) - 1, bad);
}

}  // namespace chorus
