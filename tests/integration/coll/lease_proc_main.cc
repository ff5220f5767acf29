// lease_proc_main.cc — many calls in a row of one same-host collective, as training loops and
// benchmarks make them, with every result checked against a reference.
//
//   chorusrun -np N lease_proc_main
//
// The single-copy route's FIFO lease (src/algorithms/single_copy.cc, singleCopyLeased) lets
// the calls after one that fell back to the FIFO skip the descriptor swap: a rank that
// disagreed with another about whether a call is leased would hang or mix up bytes. So each
// collective that can copy once (gather, scatter, all-gather, all-to-all, broadcast,
// all-reduce) runs long runs of calls of one size, in phases that change what a lease must
// follow: out of place from root 0; in place; from another root, out of and in place; with
// a call of another size between every few; on registered chorusMemAlloc buffers (the
// single copy proper must come back within a lease); and ordinary buffers again. Sizes: odd element
// counts, from just over the single-copy threshold (8 KiB) to past the all-reduce's 64 KiB. Every
// call's output is compared with what it must hold; the failure count is all-reduced and a
// rank exits 1 when any rank saw a wrong byte.
#include <chorus.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/api/test_hooks.h"

namespace {

int gRank = 0, gN = 1;
chorusComm_t gComm = nullptr;
long gWrong = 0;

// A buffer of int32 elements, from malloc or (registered) chorusMemAlloc + chorusCommRegister.
struct Buf {
  int32_t* p = nullptr;
  size_t n = 0;
  bool reg = false;
  void* handle = nullptr;
  Buf(size_t elems, bool registered) : n(elems), reg(registered) {
    const size_t bytes = (elems ? elems : 1) * sizeof(int32_t);
    if (reg) {
      void* m = nullptr;
      if (chorusMemAlloc(&m, bytes) != chorusSuccess ||
          chorusCommRegister(gComm, m, bytes, &handle) != chorusSuccess) {
        std::fprintf(stderr, "rank %d: registering %zu bytes: %s\n", gRank, bytes,
                     chorusGetLastError(nullptr));
        std::exit(1);
      }
      p = static_cast<int32_t*>(m);
    } else {
      p = static_cast<int32_t*>(std::malloc(bytes));
    }
  }
  ~Buf() {
    if (reg) {
      chorusCommDeregister(gComm, handle);
      chorusMemFree(p);
    } else {
      std::free(p);
    }
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

// Element i of rank r's input in call k (small: the all-reduce's sum cannot overflow).
int32_t val(long k, int r, size_t i) {
  return static_cast<int32_t>(
      (static_cast<uint64_t>(k) * 131 + static_cast<uint64_t>(r) * 7919 + i * 17) % 1000003);
}

void check(const char* what, long k, const int32_t* got, const int32_t* want, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) {
      if (gWrong < 10)
        std::fprintf(stderr, "rank %d: %s call %ld: element %zu is %d, expected %d\n", gRank, what,
                     k, i, got[i], want[i]);
      ++gWrong;
      return;
    }
}

void must(chorusResult_t r, const char* what, long k) {
  if (r == chorusSuccess) return;
  std::fprintf(stderr, "rank %d: %s call %ld failed: %s\n", gRank, what, k,
               chorusGetLastError(gComm));
  std::exit(1);
}

// One call of `coll` on `count` elements per block, input in A and output in B (in place:
// both in one of them, as the API defines it); checks the output.
void oneCall(const std::string& coll, size_t count, long k, int root, bool inPlace, Buf& A,
             Buf& B) {
  const size_t n = static_cast<size_t>(gN), me = static_cast<size_t>(gRank);
  const char* what = coll.c_str();
  std::vector<int32_t> want;
  if (coll == "gather") {
    Buf &in = A, &out = B;
    int32_t* src = in.p;
    if (inPlace && gRank == root) src = out.p + me * count;
    for (size_t i = 0; i < count; ++i) src[i] = val(k, gRank, i);
    must(chorusGather(src, out.p, count, chorusInt32, root, gComm, nullptr), what, k);
    if (gRank != root) return;
    for (size_t r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) want.push_back(val(k, static_cast<int>(r), i));
    check(what, k, out.p, want.data(), count * n);
  } else if (coll == "scatter") {
    Buf &in = A, &out = B;
    for (size_t r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) in.p[r * count + i] = val(k, root, r * count + i);
    int32_t* dst = inPlace && gRank == root ? in.p + me * count : out.p;
    must(chorusScatter(in.p, dst, count, chorusInt32, root, gComm, nullptr), what, k);
    for (size_t i = 0; i < count; ++i) want.push_back(val(k, root, me * count + i));
    check(what, k, dst, want.data(), count);
  } else if (coll == "all_gather") {
    Buf &in = A, &out = B;
    int32_t* src = inPlace ? out.p + me * count : in.p;
    for (size_t i = 0; i < count; ++i) src[i] = val(k, gRank, i);
    must(chorusAllGather(src, out.p, count, chorusInt32, gComm, nullptr), what, k);
    for (size_t r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) want.push_back(val(k, static_cast<int>(r), i));
    check(what, k, out.p, want.data(), count * n);
  } else if (coll == "all_to_all") {
    Buf &in = A, &out = B;
    for (size_t i = 0; i < count * n; ++i) in.p[i] = val(k, gRank, i);
    int32_t* dst = inPlace ? in.p : out.p;
    must(chorusAllToAll(in.p, dst, count, chorusInt32, gComm, nullptr), what, k);
    for (size_t r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        want.push_back(val(k, static_cast<int>(r), me * count + i));
    check(what, k, dst, want.data(), count * n);
  } else if (coll == "broadcast") {
    Buf &in = A, &out = B;
    for (size_t i = 0; i < count; ++i) in.p[i] = gRank == root ? val(k, root, i) : -1;
    int32_t* dst = inPlace ? in.p : out.p;
    must(chorusBroadcast(in.p, dst, count, chorusInt32, root, gComm, nullptr), what, k);
    for (size_t i = 0; i < count; ++i) want.push_back(val(k, root, i));
    check(what, k, dst, want.data(), count);
  } else {  // all_reduce
    Buf &in = A, &out = B;
    for (size_t i = 0; i < count; ++i) in.p[i] = val(k, gRank, i);
    int32_t* dst = inPlace ? in.p : out.p;
    must(chorusAllReduce(in.p, dst, count, chorusInt32, chorusSum, gComm, nullptr), what, k);
    for (size_t i = 0; i < count; ++i) {
      int32_t s = 0;
      for (size_t r = 0; r < n; ++r) s += val(k, static_cast<int>(r), i);
      want.push_back(s);
    }
    check(what, k, dst, want.data(), count);
  }
}

}  // namespace

int main() {
  if (chorusCommInitFromEnv(&gComm, nullptr) != chorusSuccess) {
    std::fprintf(stderr, "lease_proc_main: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  chorusCommUserRank(gComm, &gRank);
  chorusCommCount(gComm, &gN);
  const int other = gN > 1 ? 1 : 0;
  // Phases: calls, root, in place, registered, a call of another size every `mix` calls.
  struct Phase {
    int calls, root;
    bool inPlace, registered;
    int mix;
  };
  const Phase phases[] = {{150, 0, false, false, 0},    {70, 0, true, false, 0},
                          {70, other, false, false, 0}, {70, other, true, false, 0},
                          {70, 0, false, false, 9},     {70, 0, false, true, 0},
                          {70, 0, false, false, 0}};
  const char* colls[] = {"gather",     "scatter",   "all_gather",
                         "all_to_all", "broadcast", "all_reduce"};
  long k = 0;
  for (const char* coll : colls)
    for (size_t count : {size_t{2053}, size_t{8191}, size_t{20011}}) {
      for (const Phase& ph : phases) {
        // The buffers stay for the phase (a training loop's do), room for the larger size.
        const size_t room = (count + 64) * static_cast<size_t>(gN);
        Buf A(room, ph.registered), B(room, ph.registered);
        for (int c = 0; c < ph.calls; ++c, ++k) {
          if (ph.mix && c % ph.mix == ph.mix - 1)
            oneCall(coll, count + 64, k, ph.root, false, A, B);
          else
            oneCall(coll, count, k, ph.root, ph.inPlace, A, B);
        }
        // Registered buffers: a lease ends within its 63 calls, and the single copy runs.
        chorusTestPlanRecord r{};
        if (ph.registered && chorusTestLastPlan(gComm, &r) == chorusSuccess &&
            std::string(r.planRoute) == "single copy" && std::string(r.ranPath) == "FIFO") {
          std::fprintf(stderr,
                       "rank %d: %s of %zu B on registered buffers still on the FIFO "
                       "after %d calls\n",
                       gRank, coll, r.bytes, ph.calls);
          ++gWrong;
        }
      }
    }
  long total = gWrong;
  if (chorusAllReduce(&gWrong, &total, 1, chorusInt64, chorusSum, gComm, nullptr) != chorusSuccess)
    return 1;
  chorusCommDestroy(gComm);
  if (gRank == 0)
    std::printf("lease_proc_main: %ld calls per rank, %ld wrong (all ranks)\n", k, total);
  return total == 0 ? 0 : 1;
}
