#include "tuning/tuning.h"

#include <algorithm>
#include <string>

#include "comm/comm.h"
#include "core/debug.h"

namespace chorus {

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllGather: return "all_gather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::Scatter: return "scatter";
    case Coll::Gather: return "gather";
    case Coll::AllToAll: return "all_to_all";
    case Coll::Barrier: return "barrier";
    case Coll::Send: return "send";
    case Coll::Recv: return "recv";
  }
  return "?";
}

const char* algoName(Algo a) {
  switch (a) {
    case Algo::Direct: return "direct";
    case Algo::Ring: return "ring";
    case Algo::Tree: return "tree";
  }
  return "?";
}

namespace {

// "ring", "^ring", "" -> whether `name` is allowed by the override string.
bool allowed(const std::string& spec, const char* name) {
  if (spec.empty()) return true;
  if (spec[0] == '^') return spec.compare(1, std::string::npos, name) != 0;
  return spec == name;
}

bool forced(const std::string& spec, const char* name) { return !spec.empty() && spec == name; }

// Smaller pieces pipeline better (the receiver starts sooner), larger ones pay the
// per-slot synchronization less often. Aim for a few pieces per rank's share, never
// below 16 KiB nor above the slot.
size_t pieceFor(const chorusComm* comm, size_t bytes) {
  size_t share = bytes / static_cast<size_t>(comm->nranks);
  size_t piece = std::max<size_t>(share / 4, 16 << 10);
  piece = std::min(piece, comm->tuning.slotBytes);
  return piece & ~static_cast<size_t>(63);
}

}  // namespace

Plan choosePlan(const chorusComm* comm, Coll coll, size_t bytes) {
  const CommTuning& t = comm->tuning;
  Plan p{Algo::Ring, Proto::Simple, pieceFor(comm, bytes), bytes >= t.ntBytes};
  const bool llOk = allowed(t.proto, "LL") && !forced(t.proto, "Simple");
  const bool small = bytes <= t.llBytes && llOk;
  switch (coll) {
    case Coll::AllReduce:
      if (forced(t.algo, "tree")) {
        p.algo = Algo::Tree;
      } else if (forced(t.algo, "ring")) {
        p.algo = Algo::Ring;
      } else if (small && allowed(t.algo, "direct")) {
        p.algo = Algo::Direct;
        p.proto = Proto::LL;
      } else if (bytes <= t.treeBytes && allowed(t.algo, "tree")) {
        p.algo = Algo::Tree;
      } else if (!allowed(t.algo, "ring")) {
        p.algo = Algo::Tree;
      }
      break;
    case Coll::Broadcast:
    case Coll::AllGather:
      if (small && !forced(t.algo, "ring")) {
        p.algo = Algo::Direct;
        p.proto = Proto::LL;
      }
      break;
    case Coll::Scatter:
    case Coll::Gather:
    case Coll::AllToAll:
    case Coll::Send:
    case Coll::Recv:
      p.algo = Algo::Direct;
      p.pieceBytes = t.slotBytes;
      break;
    default:
      break;
  }
  if (p.pieceBytes < 64) p.pieceBytes = 64;
  CHORUS_TRACE(kLogTuning, "%s %zu B on %d ranks: %s/%s, pieces of %zu B%s", collName(coll), bytes,
               comm->nranks, algoName(p.algo), p.proto == Proto::LL ? "LL" : "Simple",
               p.pieceBytes, p.streaming ? ", streaming stores" : "");
  return p;
}

}  // namespace chorus
