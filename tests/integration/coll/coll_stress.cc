// coll_stress.cc — 10,000 random collectives over 4 ranks (threads of one process, so the
// whole run is visible to ThreadSanitizer), each checked by coll_check's reference.
//
//   coll_stress [--calls N] [--ranks R] [--seed S] [--max-bytes B]
//   coll_stress --from-env [--calls N] [--seed S] [--max-bytes B]
//   (COLL_STRESS_CALLS and COLL_STRESS_SEED in the environment override --calls and the seed)
//
// With --from-env the process is one rank (chorusCommInitFromEnv: chorusrun, or the
// CHORUS_RANK/CHORUS_WORLD_SIZE/CHORUS_INIT a test sets) and runs the same sequence; the
// multinode suite uses it under packet loss and with a link taken down. A call that
// returns an error prints "rank R: ERROR <result> after <s> s: <last error>" and exits 3;
// wrong data exits 1; success prints "rank R: PASS ..." and exits 0.
//
// Every rank thread draws the same sequence of cases from one seeded generator: collective
// (all ten kinds, send/recv patterns included), datatype (all ten), op (all six, NaN cases
// for float types now and then), root, in-place or not, and a size whose distribution leans
// small (so that 10,000 calls fit in CI under TSan) but reaches the maximum: about 70% up to
// 64 elements, 20% up to 4 Ki, 8% up to 64 Ki, 2% up to B bytes (default 4 MiB) of output.
// Size 0 is drawn too. Each case is prepared, launched and verified by collcheck::runCase
// (guard regions, untouched bytes, exact/tolerance comparison). The first failure (wrong
// data or an error return) stops the run and exits 1, naming the case and the call number.
#include <chorus.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/coll/coll_check.h"

using namespace collcheck;

namespace {

Case drawCase(std::mt19937_64& g, int nranks, size_t maxBytes, uint32_t index) {
  auto pick = [&](uint64_t n) { return static_cast<uint64_t>(g() % n); };
  Case c;
  c.coll = static_cast<Coll>(pick(static_cast<uint64_t>(Coll::kCount)));
  c.type = kAllTypes[pick(kAllTypes.size())];
  c.op = static_cast<Op>(pick(static_cast<uint64_t>(Op::kCount)));
  c.root = static_cast<int>(pick(static_cast<uint64_t>(nranks)));
  c.inplace = pick(2) == 1;
  c.seed = index + 1;
  c.nan = isReducing(c.coll) && isFloatType(c.type) && c.op != Op::Avg && pick(20) == 0;
  c.p2p = static_cast<P2P>(pick(static_cast<uint64_t>(P2P::kCount)));
  if (c.coll == Coll::SendRecv && c.p2p == P2P::RingUngrouped && nranks < 2) c.p2p = P2P::Ring;
  const uint64_t r = pick(100);
  uint64_t count;
  if (r < 70)
    count = pick(65);
  else if (r < 90)
    count = 65 + pick(4096 - 64);
  else if (r < 98)
    count = 4097 + pick(65536 - 4096);
  else
    count = 65537 + pick(1u << 20);
  // Cap the bytes a call moves: the buffer of gather-like collectives holds nranks blocks.
  const size_t ts = typeSize(c.type);
  const bool blocks = c.coll == Coll::AllGather || c.coll == Coll::ReduceScatter ||
                      c.coll == Coll::Scatter || c.coll == Coll::Gather ||
                      c.coll == Coll::AllToAll ||
                      (c.coll == Coll::SendRecv && c.p2p == P2P::Pairwise);
  const size_t per = ts * (blocks ? static_cast<size_t>(nranks) : 1);
  if (count * per > maxBytes) count = maxBytes / per;
  c.count = count;
  if (c.coll == Coll::Barrier) c.count = 0;
  return c;
}

int runFromEnv(long calls, uint64_t seed, size_t maxBytes) {
  chorusComm_t comm = nullptr;
  if (chorusCommInitFromEnv(&comm, nullptr) != chorusSuccess) {
    std::printf("INIT-FAILED: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  std::mt19937_64 g(seed);
  const double t0 = nowSeconds();
  for (long i = 0; i < calls; ++i) {
    const Case c = drawCase(g, n, maxBytes, static_cast<uint32_t>(i));
    std::string err;
    bool callFailed = false;
    const double start = nowSeconds();
    if (!runCase(c, comm, nullptr, &err, &callFailed)) {
      std::printf("rank %d: %s at call %ld after %.2f s: %s\n", rank,
                  callFailed ? "ERROR" : "WRONG", i, nowSeconds() - start, err.c_str());
      std::fflush(stdout);
      chorusCommAbort(comm);
      return callFailed ? 3 : 1;
    }
    if (i % 100 == 99) {
      std::printf("rank %d: %ld calls ok\n", rank, i + 1);
      std::fflush(stdout);
    }
  }
  const chorusResult_t r = chorusCommDestroy(comm);
  std::printf("rank %d: PASS %ld random collectives checked in %.1f s%s\n", rank, calls,
              nowSeconds() - t0, r == chorusSuccess ? "" : " (destroy failed)");
  return r == chorusSuccess ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 10000;
  int nranks = 4;
  uint64_t seed = 20240601;
  size_t maxBytes = 4u << 20;
  bool fromEnv = false;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--from-env")) {
      fromEnv = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--calls"))
      calls = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--ranks"))
      nranks = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seed"))
      seed = std::strtoull(argv[i + 1], nullptr, 0);
    else if (!std::strcmp(argv[i], "--max-bytes"))
      maxBytes = std::strtoull(argv[i + 1], nullptr, 0);
    else {
      std::fprintf(stderr,
                   "usage: coll_stress [--from-env] [--calls N] [--ranks R] [--seed S] "
                   "[--max-bytes B]\n");
      return 2;
    }
  }
  if (const char* s = std::getenv("COLL_STRESS_SEED")) seed = std::strtoull(s, nullptr, 0);
  // A tree where every call is slow (TSan) may ask for fewer calls than the test's own.
  if (const char* s = std::getenv("COLL_STRESS_CALLS")) calls = std::atol(s);
  if (fromEnv) return runFromEnv(calls, seed, maxBytes);
  std::vector<chorusComm_t> comms(static_cast<size_t>(nranks), nullptr);
  if (chorusCommInitAll(comms.data(), nranks, nullptr) != chorusSuccess) {
    std::fprintf(stderr, "coll_stress: chorusCommInitAll: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  std::atomic<bool> stop{false};
  std::atomic<long> done{0};
  std::vector<std::string> errors(static_cast<size_t>(nranks));
  std::vector<long> counts(static_cast<size_t>(Coll::kCount), 0);
  const double t0 = nowSeconds();
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 g(seed);
      for (long i = 0; i < calls; ++i) {
        const Case c = drawCase(g, nranks, maxBytes, static_cast<uint32_t>(i));
        if (r == 0) ++counts[static_cast<size_t>(c.coll)];
        // All ranks stop at the same call once one has failed: a rank that failed returns
        // without entering the next call, so the others would wait for it until timeout.
        if (stop.load()) return;
        std::string err;
        bool callFailed = false;
        if (!runCase(c, comms[static_cast<size_t>(r)], nullptr, &err, &callFailed)) {
          errors[static_cast<size_t>(r)] =
              "call " + std::to_string(i) + " (seed " + std::to_string(seed) + "): " + err;
          stop.store(true);
          // Unblock the peers waiting for us inside a collective.
          for (chorusComm_t comm : comms) chorusCommAbort(comm);
          return;
        }
        if (r == 0) done.store(i + 1);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double took = nowSeconds() - t0;
  bool ok = true;
  for (int r = 0; r < nranks; ++r)
    if (!errors[static_cast<size_t>(r)].empty()) {
      std::fprintf(stderr, "coll_stress: rank %d: %s\n", r, errors[static_cast<size_t>(r)].c_str());
      ok = false;
    }
  if (ok) {
    for (chorusComm_t c : comms)
      if (chorusCommDestroy(c) != chorusSuccess) {
        std::fprintf(stderr, "coll_stress: destroy: %s\n", chorusGetLastError(c));
        ok = false;
      }
  }
  std::printf(
      "coll_stress: %ld of %ld random collectives on %d ranks checked in %.1f s (seed %llu):",
      done.load(), calls, nranks, took, static_cast<unsigned long long>(seed));
  for (int k = 0; k < static_cast<int>(Coll::kCount); ++k)
    std::printf(" %s %ld", collName(static_cast<Coll>(k)), counts[static_cast<size_t>(k)]);
  std::printf(" -> %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
