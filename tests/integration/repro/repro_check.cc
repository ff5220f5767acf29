// repro_check.cc — reproducible mode's checker (docs/REPRODUCIBLE.md): are reductions bit for
// bit the rank-order result ((x0 OP x1) OP x2) OP ... ?
//
//   chorusrun -np N repro_check [--expect exact|report|differ] [--threads N] [--seed S]
//       [--types float32,float64,bfloat16,float16] [--ops sum,avg,prod]
//       [--colls all_reduce,reduce,reduce_scatter] [--counts 1,7,1000,...]
//       [--registered both|yes|no] [--repeat N] [--verbose]
//
// A plain Chorus program (public API and environment only: CHORUS_REPRODUCIBLE, CHORUS_ALGO,
// ... come from the environment, so it runs under chorusrun, over tcp between namespaced
// hosts, or with --threads N as N thread ranks of one process). Every input element is a
// function of (seed, case, rank, index) of mixed magnitude (about 1e-8 .. 1e8 with both
// signs; 16-bit floats within their range), so every rank computes every rank's input and
// the rank-order reference locally, with its own arithmetic (below), and compares the
// library's result bit for bit.
//   --expect exact   (default) any differing bit fails: the case, the first differing
//                    element, both values; exit 1 on every rank.
//   --expect report  counts the cases that differ from the reference and exits 0.
//   --expect differ  the same, but fails when no case differs: a default-mode run that shows
//                    the check can see a different order (so an exact pass means something).
//   --repeat N       runs each case N times on the same inputs and fails unless every call's
//                    result equals the first's bit for bit (the schedule may change between
//                    calls: CHORUS_REPRO_SCHEDULE=random); the first is checked as above.
// Every run prints a digest (FNV-1a of every rank's results, in rank order) so two runs can
// be compared.
//
// The reference's arithmetic, the library's definition (kernels/reduce.h): float32/float64
// one IEEE operation per add or multiply, round to nearest even, no FMA; float16/bfloat16
// widened to float exactly, one float operation, rounded once back to 16 bits (nearest even).
// avg is a sum of pre-multiplied inputs: pre(x) = x * s rounded to the type, s = 1/n rounded
// to float and then to the type (the library's scalar).
#include <chorus.h>

#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/bit_digest.h"

namespace {

// ---------------------------------------------------------------------- options ----------
struct Options {
  bool exact = true;
  bool differ = false;  // --expect differ: fail unless some result differs
  int threads = 0;      // > 0: ranks as threads of this process
  uint64_t seed = 12345;
  std::vector<std::string> types{"float32", "float64", "bfloat16", "float16"};
  std::vector<std::string> ops{"sum", "avg", "prod"};
  std::vector<std::string> colls{"all_reduce", "reduce", "reduce_scatter"};
  std::vector<size_t> counts{1, 7, 1000, 4099, 16384, 70001};
  int registered = 2;  // 0 no, 1 yes, 2 both
  int repeat = 1;      // calls per case (--repeat)
  bool verbose = false;
};

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
               "repro_check: %s\nusage: repro_check [--expect exact|report|differ] [--threads N] "
               "[--seed S] [--types LIST] [--ops sum,avg,prod] [--colls LIST] [--counts LIST] "
               "[--registered both|yes|no] [--repeat N] [--verbose]\n",
               msg);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--expect") {
      const std::string v = val();
      if (v != "exact" && v != "report" && v != "differ")
        usage("--expect takes exact, report or differ");
      o.exact = v == "exact";
      o.differ = v == "differ";
    } else if (a == "--threads") {
      o.threads = std::atoi(val().c_str());
    } else if (a == "--seed") {
      o.seed = std::strtoull(val().c_str(), nullptr, 10);
    } else if (a == "--types") {
      o.types = splitList(val());
    } else if (a == "--ops") {
      o.ops = splitList(val());
    } else if (a == "--colls") {
      o.colls = splitList(val());
    } else if (a == "--counts") {
      o.counts.clear();
      for (const std::string& c : splitList(val()))
        o.counts.push_back(std::strtoull(c.c_str(), nullptr, 10));
    } else if (a == "--registered") {
      const std::string v = val();
      o.registered = v == "no" ? 0 : v == "yes" ? 1 : v == "both" ? 2 : -1;
      if (o.registered < 0) usage("--registered takes both, yes or no");
    } else if (a == "--repeat") {
      o.repeat = std::atoi(val().c_str());
      if (o.repeat < 1) usage("--repeat takes a count >= 1");
    } else if (a == "--verbose") {
      o.verbose = true;
    } else {
      usage(("unknown option " + a).c_str());
    }
  }
  return o;
}

// ------------------------------------------------------------ the reference's numbers ----
uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// 16-bit floats, written independently of the library: bfloat16 by rounding the float's bits
// (nearest even; no NaN can occur here), float16 through the compiler's _Float16 conversion.
uint16_t toBf16(float f) {
  const uint32_t u = floatBits(f);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float fromBf16(uint16_t h) { return bitsFloat(static_cast<uint32_t>(h) << 16); }
uint16_t toHalf(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}
float fromHalf(uint16_t u) {
  _Float16 h;
  std::memcpy(&h, &u, 2);
  return static_cast<float>(h);
}

enum class Ty { F32, F64, Bf16, F16 };
enum class Op { Sum, Avg, Prod };

size_t sizeOf(Ty t) { return t == Ty::F64 ? 8 : t == Ty::F32 ? 4 : 2; }
chorusDataType_t chorusType(Ty t) {
  switch (t) {
    case Ty::F32: return chorusFloat32;
    case Ty::F64: return chorusFloat64;
    case Ty::Bf16: return chorusBfloat16;
    case Ty::F16: return chorusFloat16;
  }
  return chorusFloat32;
}
chorusRedOp_t chorusOp(Op o) {
  return o == Op::Sum ? chorusSum : o == Op::Avg ? chorusAvg : chorusProd;
}

// Input element (case, rank, i) as a double: sign, mantissa in [1, 2), a binary exponent of
// mixed magnitude (sum, avg: 2^-27 .. 2^27 ~ 1e-8 .. 1e8; float16: 2^-14 .. 2^10, its normal
// range with room for n sums; prod: 2^-2 .. 2^2 so products stay finite).
double inputValue(uint64_t seed, uint64_t cs, int rank, size_t i, Ty t, Op op) {
  const uint64_t h = mix(seed ^ mix(cs * 0x100000001b3ull + static_cast<uint64_t>(rank)) ^ mix(i));
  int lo = -27, hi = 27;
  if (t == Ty::F16) lo = -14, hi = 10;
  if (op == Op::Prod) lo = -2, hi = 2;
  const int e = lo + static_cast<int>((h >> 8) % static_cast<uint64_t>(hi - lo + 1));
  const double m = 1.0 + static_cast<double>(h >> 12) / 4503599627370496.0;  // 52 bits
  return std::ldexp((h & 1) ? -m : m, e);
}

// Stores v (rounded to the type) at p.
void store(Ty t, void* p, double v) {
  switch (t) {
    case Ty::F64: std::memcpy(p, &v, 8); return;
    case Ty::F32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case Ty::Bf16: {
      const uint16_t u = toBf16(static_cast<float>(v));
      std::memcpy(p, &u, 2);
      return;
    }
    case Ty::F16: {
      const uint16_t u = toHalf(static_cast<float>(v));
      std::memcpy(p, &u, 2);
      return;
    }
  }
}

// The reference for one element: x[r] are the stored inputs (the type's bits, widened).
struct Arith {
  Ty t;
  Op op;
  int n;
  // One rounding to the type.
  double round(double v) const {
    switch (t) {
      case Ty::F64: return v;
      case Ty::F32: return static_cast<float>(v);
      case Ty::Bf16: return fromBf16(toBf16(static_cast<float>(v)));
      case Ty::F16: return fromHalf(toHalf(static_cast<float>(v)));
    }
    return v;
  }
  // a OP b in the type's arithmetic: float32 and 16-bit in float (exact widening), float64
  // in double; volatile keeps the compiler from contracting or reassociating.
  double apply(double a, double b) const {
    if (t == Ty::F64) {
      volatile double r = op == Op::Prod ? a * b : a + b;
      return r;
    }
    const float fa = static_cast<float>(a), fb = static_cast<float>(b);
    volatile float r = op == Op::Prod ? fa * fb : fa + fb;
    return round(r);
  }
  double scalar() const {  // the library's 1/n: double -> float -> the type
    const float f = static_cast<float>(1.0 / n);
    return t == Ty::F64 ? 1.0 / n : round(f);
  }
  double pre(double x) const {
    if (op != Op::Avg) return x;
    if (t == Ty::F64) {
      volatile double r = x * scalar();
      return r;
    }
    volatile float r = static_cast<float>(x) * static_cast<float>(scalar());
    return round(r);
  }
};

const char* typeName(Ty t) {
  return t == Ty::F32    ? "float32"
         : t == Ty::F64  ? "float64"
         : t == Ty::Bf16 ? "bfloat16"
                         : "float16";
}
const char* opName(Op o) { return o == Op::Sum ? "sum" : o == Op::Avg ? "avg" : "prod"; }

// --------------------------------------------------------------------------- a case ------
enum class Coll { AllReduce, Reduce, ReduceScatter };
const char* collName(Coll c) {
  return c == Coll::AllReduce ? "all_reduce" : c == Coll::Reduce ? "reduce" : "reduce_scatter";
}

struct Case {
  Coll coll;
  Ty type;
  Op op;
  size_t count;  // per rank's result (reduce-scatter: the block)
  bool registered;
  bool inPlace;
  int root;
};

std::string caseText(const Case& c) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s %s %s count %zu%s%s root %d", collName(c.coll),
                typeName(c.type), opName(c.op), c.count, c.registered ? " registered" : "",
                c.inPlace ? " in-place" : "", c.root);
  return buf;
}

struct Buffer {  // plain (malloc) or chorusMemAlloc'd and registered on the communicator
  void* p = nullptr;
  void* handle = nullptr;
  bool shared = false;
  chorusComm_t comm = nullptr;
  bool make(chorusComm_t c, size_t bytes, bool registered) {
    comm = c;
    bytes = bytes ? bytes : 64;
    if (!registered) {
      p = std::malloc(bytes);
      return p != nullptr;
    }
    shared = true;
    if (chorusMemAlloc(&p, bytes) != chorusSuccess) return false;
    return chorusCommRegister(c, p, bytes, &handle) == chorusSuccess;
  }
  ~Buffer() {
    if (!shared) {
      std::free(p);
      return;
    }
    if (handle) chorusCommDeregister(comm, handle);
    if (p) chorusMemFree(p);
  }
};

struct Rank {
  chorusComm_t comm = nullptr;
  int rank = 0, n = 1;
  uint64_t digest = kFnvStart;
  long cases = 0, differing = 0, failures = 0;
  std::string firstDiff;
};

// Runs one case on this rank and compares its part of the result with the reference.
bool runCase(Rank& me, const Options& o, uint64_t caseId, const Case& c) {
  const int n = me.n, rank = me.rank;
  const size_t es = sizeOf(c.type);
  const size_t inCount = c.coll == Coll::ReduceScatter ? c.count * static_cast<size_t>(n) : c.count;
  const size_t outCount = c.count;
  Buffer in, out;
  if (!in.make(me.comm, inCount * es, c.registered) ||
      (!c.inPlace && !out.make(me.comm, outCount * es, c.registered))) {
    std::fprintf(stderr, "repro_check: rank %d: cannot allocate buffers for %s: %s\n", rank,
                 caseText(c).c_str(), chorusGetLastError(nullptr));
    return false;
  }
  char* inp = static_cast<char*>(in.p);
  char* outp =
      c.inPlace
          ? (c.coll == Coll::ReduceScatter ? inp + static_cast<size_t>(rank) * c.count * es : inp)
          : static_cast<char*>(out.p);
  chorusResult_t r = chorusSuccess;
  const chorusDataType_t dt = chorusType(c.type);
  std::vector<char> first;  // --repeat: the first call's result
  for (int rep = 0; rep < o.repeat; ++rep) {
    for (size_t i = 0; i < inCount; ++i)
      store(c.type, inp + i * es, inputValue(o.seed, caseId, rank, i, c.type, c.op));
    switch (c.coll) {
      case Coll::AllReduce:
        r = chorusAllReduce(inp, outp, c.count, dt, chorusOp(c.op), me.comm, nullptr);
        break;
      case Coll::Reduce:
        r = chorusReduce(inp, outp, c.count, dt, chorusOp(c.op), c.root, me.comm, nullptr);
        break;
      case Coll::ReduceScatter:
        r = chorusReduceScatter(inp, outp, c.count, dt, chorusOp(c.op), me.comm, nullptr);
        break;
    }
    if (r != chorusSuccess) {
      std::fprintf(stderr, "repro_check: rank %d: %s failed: %s: %s\n", rank, caseText(c).c_str(),
                   chorusGetErrorString(r), chorusGetLastError(me.comm));
      return false;
    }
    if (c.coll == Coll::Reduce && rank != c.root) continue;
    if (rep == 0) {
      first.assign(outp, outp + outCount * es);
    } else if (std::memcmp(first.data(), outp, outCount * es) != 0) {
      std::fprintf(stderr, "repro_check: rank %d: %s: call %d of %d differs from the first\n", rank,
                   caseText(c).c_str(), rep + 1, o.repeat);
      ++me.failures;
    }
  }
  if (!first.empty()) std::memcpy(outp, first.data(), first.size());
  if (c.coll == Coll::Reduce && rank != c.root) return true;  // nothing of ours to check
  ++me.cases;
  me.digest = fnv(me.digest, outp, outCount * es);
  // The rank-order reference of every element we hold.
  const Arith ar{c.type, c.op, n};
  const size_t base = c.coll == Coll::ReduceScatter ? static_cast<size_t>(rank) * c.count : 0;
  std::vector<char> want(es);
  for (size_t i = 0; i < outCount; ++i) {
    double acc = 0;
    for (int k = 0; k < n; ++k) {
      // The stored input of rank k (rounded to the type), then pre-multiplied.
      store(c.type, want.data(), inputValue(o.seed, caseId, k, base + i, c.type, c.op));
      double x;
      switch (c.type) {
        case Ty::F64: std::memcpy(&x, want.data(), 8); break;
        case Ty::F32: {
          float f;
          std::memcpy(&f, want.data(), 4);
          x = f;
          break;
        }
        case Ty::Bf16: {
          uint16_t u;
          std::memcpy(&u, want.data(), 2);
          x = fromBf16(u);
          break;
        }
        default: {
          uint16_t u;
          std::memcpy(&u, want.data(), 2);
          x = fromHalf(u);
          break;
        }
      }
      x = ar.pre(x);
      acc = k == 0 ? x : ar.apply(acc, x);
    }
    store(c.type, want.data(), acc);
    if (std::memcmp(want.data(), outp + i * es, es) == 0) continue;
    ++me.differing;
    if (me.firstDiff.empty() || o.verbose) {
      double got = 0;
      switch (c.type) {
        case Ty::F64: std::memcpy(&got, outp + i * es, 8); break;
        case Ty::F32: {
          float f;
          std::memcpy(&f, outp + i * es, 4);
          got = f;
          break;
        }
        case Ty::Bf16: {
          uint16_t u;
          std::memcpy(&u, outp + i * es, 2);
          got = fromBf16(u);
          break;
        }
        default: {
          uint16_t u;
          std::memcpy(&u, outp + i * es, 2);
          got = fromHalf(u);
          break;
        }
      }
      char buf[400];
      std::snprintf(buf, sizeof buf,
                    "rank %d: %s on %d ranks: element %zu is %.17g, the rank-order reference is "
                    "%.17g (bits differ)",
                    rank, caseText(c).c_str(), n, base + i, got, acc);
      if (me.firstDiff.empty()) me.firstDiff = buf;
      if (o.verbose) std::fprintf(stderr, "repro_check: %s\n", buf);
    }
    if (o.exact) ++me.failures;
    return true;  // one element per case is enough to name it
  }
  return true;
}

bool parseType(const std::string& s, Ty* t) {
  if (s == "float32")
    *t = Ty::F32;
  else if (s == "float64")
    *t = Ty::F64;
  else if (s == "bfloat16")
    *t = Ty::Bf16;
  else if (s == "float16")
    *t = Ty::F16;
  else
    return false;
  return true;
}
bool parseOp(const std::string& s, Op* op) {
  if (s == "sum")
    *op = Op::Sum;
  else if (s == "avg")
    *op = Op::Avg;
  else if (s == "prod")
    *op = Op::Prod;
  else
    return false;
  return true;
}
bool parseColl(const std::string& s, Coll* c) {
  if (s == "all_reduce")
    *c = Coll::AllReduce;
  else if (s == "reduce")
    *c = Coll::Reduce;
  else if (s == "reduce_scatter")
    *c = Coll::ReduceScatter;
  else
    return false;
  return true;
}

std::vector<Case> buildCases(const Options& o, int n) {
  std::vector<Case> out;
  int k = 0;
  for (const std::string& cs : o.colls) {
    Coll c;
    if (!parseColl(cs, &c)) usage(("unknown collective " + cs).c_str());
    for (const std::string& ts : o.types) {
      Ty t;
      if (!parseType(ts, &t)) usage(("unknown type " + ts).c_str());
      for (const std::string& os : o.ops) {
        Op op;
        if (!parseOp(os, &op)) usage(("unknown op " + os).c_str());
        for (size_t count : o.counts)
          for (int reg = 0; reg < 2; ++reg) {
            if ((o.registered == 0 && reg) || (o.registered == 1 && !reg)) continue;
            // In place every other case; the root walks the ranks.
            ++k;
            out.push_back(Case{c, t, op, count, reg == 1, k % 2 == 0, k % n});
          }
      }
    }
  }
  return out;
}

// One rank's whole run; returns its failure count (-1: the run broke off).
long runRank(Rank& me, const Options& o) {
  const std::vector<Case> cases = buildCases(o, me.n);
  for (size_t i = 0; i < cases.size(); ++i)
    if (!runCase(me, o, i, cases[i])) return -1;
  return me.failures;
}

// Agrees on the outcome (every rank's failures and digest) and prints it on rank 0.
int finish(Rank& me, const Options& o, long fails) {
  std::vector<uint64_t> digests(static_cast<size_t>(me.n), 0);
  digests[static_cast<size_t>(me.rank)] = me.digest;
  long long counts[3] = {fails < 0 ? 1000000 : fails, me.differing, me.cases};
  long long sums[3] = {0, 0, 0};
  if (chorusAllGather(&digests[static_cast<size_t>(me.rank)], digests.data(), 8, chorusUint8,
                      me.comm, nullptr) != chorusSuccess ||
      chorusAllReduce(counts, sums, 3, chorusInt64, chorusSum, me.comm, nullptr) != chorusSuccess) {
    std::fprintf(stderr, "repro_check: rank %d: the closing exchange failed: %s\n", me.rank,
                 chorusGetLastError(me.comm));
    return 1;
  }
  if (!me.firstDiff.empty() && (o.exact || me.rank == 0))
    std::fprintf(stderr, "repro_check: %s%s\n",
                 o.exact ? "FAIL: " : "first difference: ", me.firstDiff.c_str());
  const uint64_t all = fnv(kFnvStart, digests.data(), digests.size() * 8);
  if (me.rank == 0) {
    const char* env = std::getenv("CHORUS_REPRODUCIBLE");
    std::printf(
        "repro_check: %d ranks, %lld checked results, %lld differ from the rank-order "
        "reference (CHORUS_REPRODUCIBLE=%s, expect %s); digest %016" PRIx64 "\n",
        me.n, sums[2], sums[1], env ? env : "",
        o.exact    ? "exact"
        : o.differ ? "differ"
                   : "report",
        all);
    if (o.differ && sums[1] == 0)
      std::printf("repro_check: FAIL: --expect differ, yet every result is the rank-order one\n");
    std::fflush(stdout);
  }
  if (o.differ && sums[1] == 0) return 1;
  return sums[0] != 0 ? 1 : 0;
}

}  // namespace

// --check-config: chorusConfig_t.reproducible outside {0, 1, CHORUS_CONFIG_UNDEF_INT} is
// refused with chorusInvalidArgument and a message naming the field; 1 is accepted (1 rank).
int checkConfig() {
  chorusUniqueId id;
  chorusComm_t c = nullptr;
  chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
  cfg.reproducible = 2;
  if (chorusGetUniqueId(&id) != chorusSuccess) return 1;
  const chorusResult_t r = chorusCommInitRankConfig(&c, 1, id, 0, &cfg);
  const std::string msg = chorusGetLastError(nullptr);
  if (r != chorusInvalidArgument || msg.find("config->reproducible is 2") == std::string::npos) {
    std::fprintf(stderr, "repro_check: reproducible = 2 gave %s (%s)\n", chorusGetErrorString(r),
                 msg.c_str());
    return 1;
  }
  cfg.reproducible = 1;
  if (chorusGetUniqueId(&id) != chorusSuccess ||
      chorusCommInitRankConfig(&c, 1, id, 0, &cfg) != chorusSuccess) {
    std::fprintf(stderr, "repro_check: reproducible = 1 refused: %s\n",
                 chorusGetLastError(nullptr));
    return 1;
  }
  chorusCommDestroy(c);
  std::printf("repro_check: config checks passed (2 refused: %s)\n", msg.c_str());
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--check-config") == 0) return checkConfig();
  const Options o = parse(argc, argv);
  if (o.threads > 0) {
    chorusUniqueId id;
    if (chorusGetUniqueId(&id) != chorusSuccess) {
      std::fprintf(stderr, "repro_check: chorusGetUniqueId: %s\n", chorusGetLastError(nullptr));
      return 1;
    }
    std::vector<int> rc(static_cast<size_t>(o.threads), 1);
    std::vector<std::thread> th;
    for (int r = 0; r < o.threads; ++r)
      th.emplace_back([&, r]() {
        Rank me;
        chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;  // reproducible: the environment's
        if (chorusCommInitRankConfig(&me.comm, o.threads, id, r, &cfg) != chorusSuccess) {
          std::fprintf(stderr, "repro_check: thread rank %d: init: %s\n", r,
                       chorusGetLastError(nullptr));
          return;
        }
        me.rank = r;
        me.n = o.threads;
        const long f = runRank(me, o);
        rc[static_cast<size_t>(r)] = finish(me, o, f);
        chorusCommDestroy(me.comm);
      });
    for (auto& t : th) t.join();
    for (int v : rc)
      if (v) return 1;
    return 0;
  }
  Rank me;
  if (chorusCommInitFromEnv(&me.comm, nullptr) != chorusSuccess) {
    std::fprintf(stderr, "repro_check: init: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  chorusCommUserRank(me.comm, &me.rank);
  chorusCommCount(me.comm, &me.n);
  const long f = runRank(me, o);
  const int rc = finish(me, o, f);
  chorusCommDestroy(me.comm);
  return rc;
}
