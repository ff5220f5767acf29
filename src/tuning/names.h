// names.h — the names of algorithms, protocols and collectives as the environment and the
// tuning file spell them (case-insensitive), for the parsers of src/tuning.
#pragma once

#include <string>

namespace chorus {

std::string lowerCase(std::string s);
/// Index of an algorithm / protocol / collective by name (lower or upper case); -1: unknown.
int algoIndex(const std::string& s);
int protoIndex(const std::string& s);
int collIndex(const std::string& s);  // the names collName gives (src/core/coll.cc)

}  // namespace chorus
