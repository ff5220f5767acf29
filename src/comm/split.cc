#include "src/comm/split.h"

#include <algorithm>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/comm/comm.h"
#include "src/core/checks.h"

namespace chorus {

namespace {
constexpr int kSplitTag = 0x5e1;
struct Entry {
  int color;
  int key;
  int rank;
};
}  // namespace

chorusResult_t splitRendezvous(chorusComm* parent, int color, int key, SplitResult* out) {
  const int n = parent->nranks;
  std::vector<Entry> all(static_cast<size_t>(n));
  all[static_cast<size_t>(parent->rank)] = {color, key, parent->rank};
  CHORUS_CHECK(parent->bootstrap->allGather(all.data(), sizeof(Entry)));
  if (color == CHORUS_SPLIT_NOCOLOR) return chorusSuccess;
  std::vector<Entry> group;
  for (const Entry& e : all)
    if (e.color == color) group.push_back(e);
  std::stable_sort(group.begin(), group.end(), [](const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  out->member = true;
  out->nranks = static_cast<int>(group.size());
  for (size_t i = 0; i < group.size(); ++i)
    if (group[i].rank == parent->rank) out->rank = static_cast<int>(i);
  // The group's new rank 0 makes the id and sends it to the others.
  const int leader = group[0].rank;
  if (leader == parent->rank) {
    CHORUS_CHECK(bootstrapCreateRoot(&out->id));
    for (size_t i = 1; i < group.size(); ++i)
      CHORUS_CHECK(parent->bootstrap->send(group[i].rank, kSplitTag, &out->id, sizeof(out->id)));
  } else {
    CHORUS_CHECK(parent->bootstrap->recv(leader, kSplitTag, &out->id, sizeof(out->id)));
  }
  return chorusSuccess;
}

}  // namespace chorus
