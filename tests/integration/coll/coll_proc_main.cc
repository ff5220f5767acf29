// coll_proc_main.cc — the collective matrix with ranks as real processes.
//
//   chorusrun -np N coll_proc_main [--coll all_reduce,broadcast,...|all] [--types int8,...]
//       [--ops sum,avg,...] [--sizes 0,1,7,1023] [--mid 100003|none]
//       [--big none|subset|all] [--rotation 0|1] [--no-nan] [--no-inplace]
//       [--no-outofplace] [--max-messages K] [--registered] [--expect-board]
//       [--expect-pair-halving] [--list]
//
// Every rank joins through perf/launch_init.h (the environment, or MPI under mpirun), builds the
// same case list (coll_check.h: buildCases, the same coverage as the thread suite for the chosen
// slice, except that the 1 Mi + 3 subset uses rotation 1 by default: the other half of the (type,
// op, in-place) combinations, see coll_check.h), runs it, prints every failure (first K per
// collective) prefixed with its rank, and exits 1 if anything failed on any rank (the failure count
// is all-reduced at the end; if that call fails the rank exits 1 on its own result). Besides the
// collectives of kAllColls, "split" and "stream" run runSplitCheck / runStreamCheck; "all" includes
// both.
#include <chorus.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/coll/coll_check.h"
#include "perf/launch_init.h"

using namespace collcheck;

namespace {

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "coll_proc_main: %s\n"
               "usage: coll_proc_main [--coll LIST|all] [--types LIST] [--ops LIST] "
               "[--sizes LIST] [--mid LIST|none] [--big none|subset|all] [--rotation 0|1] "
               "[--no-nan] [--no-inplace] "
               "[--no-outofplace] [--max-messages K] [--registered] [--expect-board] "
               "[--expect-pair-halving] [--list]\n"
               "  collectives: all_reduce broadcast reduce all_gather reduce_scatter scatter "
               "gather all_to_all send_recv barrier split stream\n",
               msg);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> colls;  // empty: all
  MatrixOptions opts;
  opts.rotation = 1;  // the thread suite runs rotation 0
  size_t maxMessages = 20;
  bool listOnly = false;
  bool expectBoard = false;
  bool expectPairHalving = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--coll") {
      const std::string v = next();
      if (v != "all") colls = splitList(v);
    } else if (a == "--types") {
      opts.types.clear();
      for (const std::string& t : splitList(next())) {
        chorusDataType_t dt;
        if (!parseType(t, &dt)) usage(("unknown type " + t).c_str());
        opts.types.push_back(dt);
      }
    } else if (a == "--ops") {
      opts.ops.clear();
      for (const std::string& o : splitList(next())) {
        Op op;
        if (!parseOp(o, &op)) usage(("unknown op " + o).c_str());
        opts.ops.push_back(op);
      }
    } else if (a == "--sizes") {
      opts.sizes.clear();
      for (const std::string& s : splitList(next())) {
        char* end = nullptr;
        unsigned long long v = std::strtoull(s.c_str(), &end, 10);
        if (!end || *end) usage(("bad size " + s).c_str());
        opts.sizes.push_back(size_t(v));
      }
    } else if (a == "--mid") {
      opts.midSizes.clear();
      const std::string v = next();
      if (v != "none")
        for (const std::string& s : splitList(v)) {
          char* end = nullptr;
          unsigned long long m = std::strtoull(s.c_str(), &end, 10);
          if (!end || *end) usage(("bad size " + s).c_str());
          opts.midSizes.push_back(size_t(m));
        }
    } else if (a == "--rotation") {
      const std::string v = next();
      if (v != "0" && v != "1") usage("--rotation takes 0 or 1");
      opts.rotation = v == "1" ? 1 : 0;
    } else if (a == "--big") {
      const std::string v = next();
      if (v == "none")
        opts.big = BigMode::None;
      else if (v == "subset")
        opts.big = BigMode::Subset;
      else if (v == "all")
        opts.big = BigMode::All;
      else
        usage("--big takes none, subset or all");
    } else if (a == "--no-nan") {
      opts.nanCases = false;
    } else if (a == "--no-inplace") {
      opts.inplace = false;
    } else if (a == "--no-outofplace") {
      opts.outOfPlace = false;
    } else if (a == "--max-messages") {
      maxMessages = size_t(std::strtoull(next().c_str(), nullptr, 10));
    } else if (a == "--registered") {
      setRegisteredBuffers(true);  // chorusMemAlloc + chorusCommRegister for every buffer
    } else if (a == "--expect-board") {
      expectBoard = true;  // fail unless the shared boards ran the collectives asked for
    } else if (a == "--expect-pair-halving") {
      expectPairHalving = true;  // fail unless halving on the pair cells ran all-reduces
    } else if (a == "--list") {
      listOnly = true;
    } else if (a == "-h" || a == "--help") {
      usage("help");
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (colls.empty()) {
    for (Coll c : kAllColls) colls.push_back(collName(c));
    colls.push_back("split");
    colls.push_back("stream");
  }
  for (const std::string& c : colls) {
    Coll cc;
    if (c != "split" && c != "stream" && !parseColl(c, &cc))
      usage(("unknown collective " + c).c_str());
  }

  if (listOnly) {
    const char* ws = std::getenv("CHORUS_WORLD_SIZE");
    const int n = ws ? std::atoi(ws) : 1;
    for (const std::string& name : colls) {
      Coll cc;
      if (!parseColl(name, &cc)) {
        std::printf("%s\n", name.c_str());
        continue;
      }
      for (const Case& c : buildCases(cc, n, opts)) std::printf("%s\n", describe(c).c_str());
    }
    return 0;
  }

  const double t0 = nowSeconds();
  chorusComm_t comm = nullptr;
  const char* how = "";
  chorusResult_t res = perf::launchInit(&comm, &argc, &argv, &how);
  if (res != chorusSuccess) {
    std::fprintf(stderr, "coll_proc_main: init (%s) failed: %s: %s\n", how,
                 chorusGetErrorString(res), chorusGetLastError(nullptr));
    return 1;
  }
  int n = 0, rank = -1;
  if (chorusCommCount(comm, &n) != chorusSuccess ||
      chorusCommUserRank(comm, &rank) != chorusSuccess) {
    std::fprintf(stderr, "coll_proc_main: chorusCommCount/UserRank failed: %s\n",
                 chorusGetLastError(comm));
    return 1;
  }
  const char* envRank = std::getenv("CHORUS_RANK");
  const char* envSize = std::getenv("CHORUS_WORLD_SIZE");
  if (envRank && envSize && (std::atoi(envRank) != rank || std::atoi(envSize) != n)) {
    std::fprintf(stderr,
                 "coll_proc_main: communicator says rank %d of %d, CHORUS_RANK/WORLD_SIZE say "
                 "%s of %s\n",
                 rank, n, envRank, envSize);
    return 1;
  }
  const double tInit = nowSeconds() - t0;

  size_t totalCases = 0, totalFailed = 0;
  bool stopped = false;
  for (const std::string& name : colls) {
    const double ts = nowSeconds();
    Coll cc;
    if (name == "split" || name == "stream") {
      std::string err;
      const bool ok = name == "split" ? runSplitCheck(comm, &err) : runStreamCheck(comm, &err);
      ++totalCases;
      if (!ok) {
        ++totalFailed;
        std::fprintf(stderr, "rank %d: FAIL %s%s\n", rank, name.c_str(), err.c_str());
      }
      std::printf("rank %d: %-14s %s in %.2f s\n", rank, name.c_str(), ok ? "ok" : "FAILED",
                  nowSeconds() - ts);
      std::fflush(stdout);
      continue;
    }
    parseColl(name, &cc);
    const std::vector<Case> cases = buildCases(cc, n, opts);
    RunStats st = runCases(cases, comm, maxMessages);
    totalCases += st.cases;
    totalFailed += st.failed;
    for (const std::string& m : st.messages)
      std::fprintf(stderr, "rank %d: FAIL %s\n", rank, m.c_str());
    std::printf("rank %d: %-14s %zu cases, %zu failed in %.2f s\n", rank, name.c_str(), st.cases,
                st.failed, st.seconds);
    std::fflush(stdout);
    if (st.stopped) {
      stopped = true;  // the ranks are out of step: do not start more collectives
      break;
    }
  }

  // --expect-board: the run was set up so that the boards should run (ranks crowding their
  // CPUs on one host); a run where they never did checked nothing of them.
  for (Coll want : {Coll::AllGather, Coll::AllReduce, Coll::Broadcast}) {
    const bool asked = std::find(colls.begin(), colls.end(), collName(want)) != colls.end();
    if (expectBoard && asked && boardRunsSeen(want) == 0 && !stopped) {
      std::fprintf(stderr, "rank %d: FAIL --expect-board: no %s ran on the shared boards\n", rank,
                   collName(want));
      ++totalFailed;
    }
  }
  // --expect-pair-halving: likewise for the all-reduce by halving on the pair cells
  // (src/algorithms/pair_halving.cc).
  const bool askedAllReduce =
      std::find(colls.begin(), colls.end(), collName(Coll::AllReduce)) != colls.end();
  if (expectPairHalving && askedAllReduce && pairHalvingRunsSeen() == 0 && !stopped) {
    std::fprintf(
        stderr, "rank %d: FAIL --expect-pair-halving: no all_reduce ran on the pair cells\n", rank);
    ++totalFailed;
  }
  if (totalCases == 0) {
    std::fprintf(stderr, "rank %d: the arguments selected no case\n", rank);
    stopped = true;  // fail, and skip the final all-reduce like the other ranks
  }
  int64_t anyFailed = (totalFailed || stopped) ? 1 : 0;
  int64_t globalFailed = anyFailed;
  if (!stopped) {
    res = chorusAllReduce(&anyFailed, &globalFailed, 1, chorusInt64, chorusSum, comm, nullptr);
    if (res != chorusSuccess) {
      std::fprintf(stderr, "rank %d: final all-reduce of the failure count failed: %s: %s\n", rank,
                   chorusGetErrorString(res), chorusGetLastError(comm));
      globalFailed = 1;
    }
    res = chorusCommFinalize(comm);
    if (res != chorusSuccess) {
      std::fprintf(stderr, "rank %d: chorusCommFinalize: %s: %s\n", rank, chorusGetErrorString(res),
                   chorusGetLastError(comm));
      globalFailed = 1;
    }
  }
  res = chorusCommDestroy(comm);
  if (res != chorusSuccess) {
    std::fprintf(stderr, "rank %d: chorusCommDestroy: %s\n", rank, chorusGetErrorString(res));
    globalFailed = 1;
  }
  std::printf("rank %d of %d: %zu cases, %zu failed%s; init %.2f s, total %.2f s -> %s\n", rank, n,
              totalCases, totalFailed, stopped ? " (stopped at a call error)" : "", tInit,
              nowSeconds() - t0, globalFailed ? "FAIL" : "PASS");
  perf::launchFinalize();
  return globalFailed ? 1 : 0;
}
