// split.h — the collective part of chorusCommSplit: agree on groups and hand each group
// a fresh unique id through the parent's bootstrap.
#pragma once

#include "chorus.h"

struct chorusComm;

namespace chorus {

struct SplitResult {
  bool member = false;  // false for CHORUS_SPLIT_NOCOLOR
  int rank = 0;
  int nranks = 0;
  chorusUniqueId id{};
};

chorusResult_t splitRendezvous(chorusComm* parent, int color, int key, SplitResult* out);

}  // namespace chorus
