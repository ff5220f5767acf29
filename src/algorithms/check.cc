// check.cc — CHORUS_CHECK_MODE: before a collective runs, every rank checks that every
// other rank makes the same call.
//
// A rank that calls broadcast where the others call all_reduce, or passes another count,
// type, op or root, makes the others hang or compute garbage far from the mistake. In
// check mode each rank sends a 40-byte signature of its call (sequence number, collective,
// count, type, op, root) to every other rank on the low-latency path and compares all of
// them before touching any data. Every rank receives the same n signatures, so every rank
// reaches the same verdict and fails with the same message, naming the first rank whose
// call differs from rank 0's. It costs one small all-to-all per collective, which is why
// it is off by default. Every rank must run with the same CHORUS_CHECK_MODE.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "src/algorithms/algorithms.h"
#include "src/algorithms/primitives.h"
#include "src/comm/flight_recorder.h"
#include "src/core/checks.h"

namespace chorus {
namespace {

constexpr uint64_t kSigMagic = 0x43484b5349473031ull;  // "CHKSIG01"

struct CallSig {
  uint64_t magic;
  uint64_t seq;
  uint64_t count;
  int32_t coll;
  int32_t type;
  int32_t op;    // -1 unless reducing
  int32_t root;  // -1 unless rooted
};
static_assert(sizeof(CallSig) == 40, "a fixed wire size");

bool rooted(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Scatter || c == Coll::Gather;
}

bool same(const CallSig& a, const CallSig& b) {
  return a.seq == b.seq && a.count == b.count && a.coll == b.coll && a.type == b.type &&
         a.op == b.op && a.root == b.root;
}

// "all_reduce(count=1024, float32, sum)": the spelling tools/chorus-hang-report uses too.
std::string describe(const CallSig& s) {
  const Coll c = static_cast<Coll>(s.coll);
  if (c == Coll::Barrier) return "barrier()";
  std::string out = frCollName(s.coll);
  out += "(count=" + std::to_string(s.count) + ", " + frTypeName(s.type);
  if (s.op >= 0) out += ", " + frOpName(s.op);
  if (rooted(c)) out += ", root=" + std::to_string(s.root);
  return out + ")";
}

}  // namespace

chorusResult_t checkCallMatches(chorusComm* comm, const CollArgs& a, uint64_t seq) {
  const int n = comm->nranks, rank = comm->rank;
  CallSig mine;
  std::memset(&mine, 0, sizeof mine);
  mine.magic = kSigMagic;
  mine.seq = seq;
  mine.count = a.count;
  mine.coll = static_cast<int32_t>(a.coll);
  mine.type = static_cast<int32_t>(a.type);
  mine.op = a.op;
  mine.root = rooted(a.coll) ? a.root : -1;

  std::vector<CallSig> all(static_cast<size_t>(n));
  all[static_cast<size_t>(rank)] = mine;
  kernels::ReduceSpec bytes;
  bytes.type = chorusUint8;
  char what[80];
  std::snprintf(what, sizeof what, "check mode exchange before %s", collName(a.coll));
  Prims p(comm, bytes, what, seq, false);
  p.noteWaitsIn(comm->flight->waitSlot(a.frId));
  for (int k = 1; k < n; ++k) CHORUS_CHECK(p.sendLL((rank + k) % n, &mine, sizeof mine));
  for (int k = 1; k < n; ++k) {
    const int from = (rank - k + n) % n;
    CHORUS_CHECK(p.recvLL(from, &all[static_cast<size_t>(from)], sizeof mine));
  }
  for (int r = 0; r < n; ++r)
    if (all[static_cast<size_t>(r)].magic != kSigMagic)
      CHORUS_FAIL(chorusInvalidUsage,
                  "check mode: rank %d sent something else than a call signature before %s #%llu "
                  "(is CHORUS_CHECK_MODE=1 set on every rank?)",
                  r, collName(a.coll), static_cast<unsigned long long>(seq));
  for (int r = 1; r < n; ++r) {
    const CallSig& s = all[static_cast<size_t>(r)];
    if (same(s, all[0])) continue;
    CHORUS_FAIL(chorusInvalidUsage,
                "check mode: the ranks called different collectives: rank 0 called %s as #%llu, "
                "rank %d called %s as #%llu",
                describe(all[0]).c_str(), static_cast<unsigned long long>(all[0].seq), r,
                describe(s).c_str(), static_cast<unsigned long long>(s.seq));
  }
  return chorusSuccess;
}

}  // namespace chorus
