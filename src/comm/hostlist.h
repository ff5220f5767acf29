// hostlist.h — Slurm's compressed host lists ("node[01-03,7],login1") expanded.
#pragma once

#include <string>
#include <vector>

namespace chorus {

/// Expands a Slurm host list: comma-separated names, each with any number of bracket
/// groups of numbers and ranges whose zero padding is kept ("n[08-10]" -> n08 n09 n10;
/// "r[1-2]-n[1-2]" -> r1-n1 r1-n2 r2-n1 r2-n2). Returns false on malformed input
/// (unbalanced brackets, a range that runs backwards, more than `limit` names).
bool expandHostList(const std::string& list, std::vector<std::string>* out,
                    size_t limit = 1 << 16);

}  // namespace chorus
