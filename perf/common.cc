// perf/common.cc — the nccl-tests-style driver: options, data patterns, timing, output.
// See common.h for the shape; this file knows neither Chorus nor MPI.
#include "perf/common.h"

#include "perf/colls.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace perf {

// ---------------------------------------------------------------------------------------
// Types and ops
// ---------------------------------------------------------------------------------------

static const char* const kTypeNames[kNumTypes] = {"int8",   "uint8", "int32", "uint32", "int64",
                                                  "uint64", "half",  "float", "double", "bfloat16"};
static const size_t kTypeSizes[kNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
static const char* const kOpNames[kNumOps] = {"sum", "prod", "max", "min", "avg"};

size_t typeSize(DataType t) { return kTypeSizes[t]; }
const char* typeName(DataType t) { return kTypeNames[t]; }
const char* opName(RedOp op) { return kOpNames[op]; }
bool isFloatType(DataType t) { return t == kHalf || t == kFloat || t == kDouble || t == kBfloat16; }
static bool isSignedType(DataType t) { return !(t == kUint8 || t == kUint32 || t == kUint64); }

// ---------------------------------------------------------------------------------------
// float16 / bfloat16, round to nearest even. Written from the IEEE 754 layouts; they only
// need plain float arithmetic in the default rounding mode (never fast-math).
// ---------------------------------------------------------------------------------------

static inline uint32_t floatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float bitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) {  // Inf or NaN (keep NaN quiet and non-zero)
    return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);
  }
  if (x >= 0x47800000u) return sign | 0x7c00u;  // >= 65536: certainly Inf
  if (x < 0x38800000u) {
    // Result is a half subnormal (or zero): value / 2^-24 rounded to an integer. Adding
    // 0.5f (2^-1) makes the FPU round at exactly the 2^-24 position (ulp of 0.5 is
    // 2^-24), with round-to-nearest-even; the low bits of the sum are the result.
    float sum = bitsFloat(x) + 0.5f;
    return sign | static_cast<uint16_t>(floatBits(sum) - floatBits(0.5f));
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t mantOdd = (x >> 13) & 1u;
  x += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + mantOdd;
  // A carry out of the top exponent turns 65520.. into Inf, as it should.
  return sign | static_cast<uint16_t>(std::min<uint32_t>(x >> 13, 0x7c00u));
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    float v = static_cast<float>(mant) * bitsFloat(0x33800000u);
    return sign ? -v : v;
  }
  if (exp == 31) return bitsFloat(sign | 0x7f800000u | (mant << 13));
  return bitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t floatToBfloat16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

// ---------------------------------------------------------------------------------------
// Data patterns (see common.h for why these values)
// ---------------------------------------------------------------------------------------

namespace {

struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

template <typename T>
struct Conv {
  static T from(int64_t v) { return static_cast<T>(v); }
  static double toDouble(T v) { return static_cast<double>(v); }
};
template <>
struct Conv<Half> {
  static Half from(int64_t v) { return Half{floatToHalf(static_cast<float>(v))}; }
  static double toDouble(Half v) { return halfToFloat(v.bits); }
};
template <>
struct Conv<Bf16> {
  static Bf16 from(int64_t v) { return Bf16{floatToBfloat16(static_cast<float>(v))}; }
  static double toDouble(Bf16 v) { return bfloat16ToFloat(v.bits); }
};

inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Largest |partial result| allowed for the type (leaves headroom below the exact limit).
int magnitudeLimit(DataType t) {
  switch (t) {
    case kInt8: return 120;
    case kUint8: return 240;
    case kHalf: return 2048;
    case kBfloat16: return 256;
    default: return 1 << 20;
  }
}

// Values for sum/min/max/avg are in [-K, K] (signed types) or [0, 2K] (unsigned types).
int patternK(DataType t, int nranks) {
  int n = std::max(nranks, 1);
  int k = isSignedType(t) ? magnitudeLimit(t) / n : magnitudeLimit(t) / (2 * n);
  return std::min(6, k);
}

int64_t patternValue(DataType t, RedOp op, int rank, int nranks, size_t j) {
  const uint32_t jj = static_cast<uint32_t>(j);
  if (op == kProd) {
    // One rank at most (chosen per element, or none) contributes a 2; signed types also
    // get some -1s. Products stay in {±1, ±2}: exact in every type.
    uint32_t who = mix32(jj * 0x9e3779b1u + 0x51ed27u) % static_cast<uint32_t>(nranks + 2);
    int64_t v = (who == static_cast<uint32_t>(rank)) ? 2 : 1;
    if (isSignedType(t) &&
        mix32(jj * 0x85ebca77u + static_cast<uint32_t>(rank) * 0xc2b2ae3du + 7u) % 4u == 0)
      v = -v;
    return v;
  }
  const int k = patternK(t, nranks);
  uint32_t h = mix32(jj * 0x9e3779b1u + static_cast<uint32_t>(rank) * 0x85ebca77u + 0x165667b1u);
  int64_t v = static_cast<int64_t>(h % static_cast<uint32_t>(2 * k + 1));
  return isSignedType(t) ? v - k : v;
}

// Exact reduction of all ranks' inputs at pattern index j, as an integer (avg: the exact
// sum; the caller divides).
int64_t reducedValue(DataType t, RedOp op, int nranks, size_t j) {
  int64_t acc = patternValue(t, op, 0, nranks, j);
  for (int r = 1; r < nranks; ++r) {
    int64_t v = patternValue(t, op, r, nranks, j);
    switch (op) {
      case kSum:
      case kAvg: acc += v; break;
      case kProd: acc *= v; break;
      case kMax: acc = std::max(acc, v); break;
      case kMin: acc = std::min(acc, v); break;
      default: break;
    }
  }
  return acc;
}

double unitRoundoff(DataType t) {
  switch (t) {
    case kHalf: return std::ldexp(1.0, -10);
    case kBfloat16: return std::ldexp(1.0, -7);
    case kFloat: return std::ldexp(1.0, -23);
    case kDouble: return std::ldexp(1.0, -52);
    default: return 0;
  }
}

template <typename T>
void fillT(void* buf, size_t count, DataType t, RedOp op, int rank, int nranks, size_t offset) {
  std::vector<T> tab(kPatternPeriod);
  for (size_t j = 0; j < kPatternPeriod; ++j)
    tab[j] = Conv<T>::from(patternValue(t, op, rank, nranks, j));
  T* out = static_cast<T*>(buf);
  size_t j = offset % kPatternPeriod;
  for (size_t i = 0; i < count; ++i) {
    out[i] = tab[j];
    if (++j == kPatternPeriod) j = 0;
  }
}

template <typename T>
size_t countExact(const T* got, size_t count, const std::vector<T>& tab, size_t offset) {
  size_t wrong = 0;
  size_t j = offset % kPatternPeriod;
  for (size_t i = 0; i < count; ++i) {
    wrong += memcmp(&got[i], &tab[j], sizeof(T)) != 0;
    if (++j == kPatternPeriod) j = 0;
  }
  return wrong;
}

template <typename T>
size_t countReducedT(const void* buf, size_t count, DataType t, RedOp op, int nranks,
                     size_t offset) {
  const T* got = static_cast<const T*>(buf);
  if (op == kAvg && isFloatType(t)) {
    // The library may divide the exact sum or pre-scale each input by 1/n before summing:
    // allow the rounding of n+1 operations on values of magnitude <= K.
    const double tol = 2.0 * (nranks + 1) * unitRoundoff(t) * std::max(1, patternK(t, nranks));
    std::vector<double> ref(kPatternPeriod);
    for (size_t j = 0; j < kPatternPeriod; ++j)
      ref[j] = static_cast<double>(reducedValue(t, op, nranks, j)) / nranks;
    size_t wrong = 0;
    size_t j = offset % kPatternPeriod;
    for (size_t i = 0; i < count; ++i) {
      double d = std::fabs(Conv<T>::toDouble(got[i]) - ref[j]);
      wrong += !(d <= tol);  // NaN counts as wrong
      if (++j == kPatternPeriod) j = 0;
    }
    return wrong;
  }
  std::vector<T> tab(kPatternPeriod);
  for (size_t j = 0; j < kPatternPeriod; ++j) {
    int64_t v = reducedValue(t, op, nranks, j);
    if (op == kAvg) v /= nranks;  // integer types: truncating division of the exact sum
    tab[j] = Conv<T>::from(v);
  }
  return countExact(got, count, tab, offset);
}

template <typename T>
size_t countPatternT(const void* buf, size_t count, DataType t, RedOp op, int rank, int nranks,
                     size_t offset) {
  std::vector<T> tab(kPatternPeriod);
  for (size_t j = 0; j < kPatternPeriod; ++j)
    tab[j] = Conv<T>::from(patternValue(t, op, rank, nranks, j));
  return countExact(static_cast<const T*>(buf), count, tab, offset);
}

}  // namespace

#define PERF_DISPATCH_TYPE(t, FN, ...)              \
  switch (t) {                                      \
    case kInt8: return FN<int8_t>(__VA_ARGS__);     \
    case kUint8: return FN<uint8_t>(__VA_ARGS__);   \
    case kInt32: return FN<int32_t>(__VA_ARGS__);   \
    case kUint32: return FN<uint32_t>(__VA_ARGS__); \
    case kInt64: return FN<int64_t>(__VA_ARGS__);   \
    case kUint64: return FN<uint64_t>(__VA_ARGS__); \
    case kHalf: return FN<Half>(__VA_ARGS__);       \
    case kFloat: return FN<float>(__VA_ARGS__);     \
    case kDouble: return FN<double>(__VA_ARGS__);   \
    case kBfloat16: return FN<Bf16>(__VA_ARGS__);   \
    default: break;                                 \
  }

void fillPattern(void* buf, size_t count, DataType t, RedOp op, int rank, int nranks,
                 size_t offset) {
  PERF_DISPATCH_TYPE(t, fillT, buf, count, t, op, rank, nranks, offset);
}

size_t countWrongReduced(const void* buf, size_t count, DataType t, RedOp op, int nranks,
                         size_t offset) {
  PERF_DISPATCH_TYPE(t, countReducedT, buf, count, t, op, nranks, offset);
  return count;
}

size_t countWrongPattern(const void* buf, size_t count, DataType t, RedOp op, int rank, int nranks,
                         size_t offset) {
  PERF_DISPATCH_TYPE(t, countPatternT, buf, count, t, op, rank, nranks, offset);
  return count;
}

size_t countWrongBlocks(const void* buf, size_t count, DataType t, RedOp op, int nranks,
                        size_t offset) {
  size_t wrong = 0;
  for (int r = 0; r < nranks; ++r)
    wrong += countWrongPattern(elemPtr(buf, static_cast<size_t>(r) * count, t), count, t, op, r,
                               nranks, offset);
  return wrong;
}

void getSameCounts(size_t bytes, size_t typeSize, int /*nranks*/, CollCounts* c) {
  const size_t count = bytes / typeSize;
  *c = CollCounts{count, count, count, 0, 0};
}

void poison(void* buf, size_t count, DataType t) { memset(buf, 0xa5, count * typeSize(t)); }

void setBw(double bytes, double sec, double factor, double* algBw, double* busBw) {
  *algBw = sec > 0 ? bytes / 1.0e9 / sec : 0.0;
  *busBw = *algBw * factor;
}

void getBwPerRankBlocks(size_t count, size_t typeSize, double sec, int nranks, double* algBw,
                        double* busBw) {
  setBw(static_cast<double>(count * typeSize) * nranks, sec,
        static_cast<double>(nranks - 1) / nranks, algBw, busBw);
}

void initOwnBlock(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace) {
  const size_t per = a.counts.paramCount;
  poison(recvbuf, a.counts.recvCount, a.type);
  void* in = inPlace ? elemPtr(recvbuf, static_cast<size_t>(a.rank) * per, a.type) : sendbuf;
  fillPattern(in, per, a.type, a.op, a.rank, a.nranks, 0);
}

// ---------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------

namespace {

struct Options {
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  size_t stepFactor = 1;
  int iters = 20;
  int warmupIters = 5;
  int aggIters = 1;
  int check = 1;
  int average = 1;  // 0: rank 0, 1: mean, 2: min, 3: max (nccl-tests -a)
  int root = 0;
  int blocking = 0;    // accepted for compatibility; every call here completes on return
  int registered = 0;  // -R 1: library-allocated, registered buffers (nccl-tests' -R)
  std::vector<DataType> types{kFloat};
  std::vector<RedOp> ops{kSum};
  bool allTypes = false;
  bool allOps = false;
  std::string csvPath;
  std::string jsonPath;
};

bool parseSize(const char* s, size_t* out) {
  char* end = nullptr;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno != 0 || v < 0) return false;
  double unit = 1;
  switch (*end) {
    case 'G':
    case 'g':
      unit = 1024.0 * 1024 * 1024;
      ++end;
      break;
    case 'M':
    case 'm':
      unit = 1024.0 * 1024;
      ++end;
      break;
    case 'K':
    case 'k':
      unit = 1024.0;
      ++end;
      break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v * unit);
  return true;
}

bool parseInt(const char* s, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v < -2147483647L || v > 2147483647L) return false;
  *out = static_cast<int>(v);
  return true;
}

void usage(const char* prog, FILE* f) {
  fprintf(f,
          "USAGE: %s\n"
          "  -b,--minbytes <min size in bytes, K/M/G suffixes>   default 32M\n"
          "  -e,--maxbytes <max size in bytes>                   default 32M\n"
          "  -i,--stepbytes <increment size>                     default 1M\n"
          "  -f,--stepfactor <increment factor>                  default 1 (use -i)\n"
          "  -n,--iters <iteration count>                        default 20\n"
          "  -w,--warmup_iters <warmup iteration count>          default 5\n"
          "  -m,--agg_iters <operations aggregated in a group>   default 1\n"
          "  -c,--check <0/1: check results>                     default 1\n"
          "  -o,--op <sum/prod/min/max/avg/all>                  default sum\n"
          "  -d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/\n"
          "                 bfloat16/all>                        default float\n"
          "  -r,--root <root>                                    default 0\n"
          "  -z,--blocking <0/1> (accepted; calls are blocking)   default 0\n"
          "  -a,--average <0:rank0/1:avg/2:min/3:max>            default 1\n"
          "  -R,--local_register <0/1: registered buffers>        default 0\n"
          "  -t,--nthreads 1  -g,--ngpus 1 (only 1 is supported)\n"
          "  --csv <file>    also write the rows as CSV (rank 0)\n"
          "  --json <file>   also write the rows as JSON (rank 0)\n"
          "  -h,--help\n",
          prog);
}

enum { kOptCsv = 1000, kOptJson = 1001 };

// Returns 0 on success, 1 for -h, -1 on a bad option (message already printed).
int parseOptions(int argc, char** argv, Options* o, bool quiet) {
  static const struct option longOpts[] = {{"nthreads", required_argument, nullptr, 't'},
                                           {"ngpus", required_argument, nullptr, 'g'},
                                           {"minbytes", required_argument, nullptr, 'b'},
                                           {"maxbytes", required_argument, nullptr, 'e'},
                                           {"stepbytes", required_argument, nullptr, 'i'},
                                           {"stepfactor", required_argument, nullptr, 'f'},
                                           {"iters", required_argument, nullptr, 'n'},
                                           {"agg_iters", required_argument, nullptr, 'm'},
                                           {"warmup_iters", required_argument, nullptr, 'w'},
                                           {"parallel_init", required_argument, nullptr, 'p'},
                                           {"check", required_argument, nullptr, 'c'},
                                           {"op", required_argument, nullptr, 'o'},
                                           {"datatype", required_argument, nullptr, 'd'},
                                           {"root", required_argument, nullptr, 'r'},
                                           {"blocking", required_argument, nullptr, 'z'},
                                           {"stream_null", required_argument, nullptr, 'y'},
                                           {"timeout", required_argument, nullptr, 'T'},
                                           {"cudagraph", required_argument, nullptr, 'G'},
                                           {"average", required_argument, nullptr, 'a'},
                                           {"local_register", required_argument, nullptr, 'R'},
                                           {"csv", required_argument, nullptr, kOptCsv},
                                           {"json", required_argument, nullptr, kOptJson},
                                           {"help", no_argument, nullptr, 'h'},
                                           {nullptr, 0, nullptr, 0}};
  auto bad = [&](const char* what, const char* val) {
    if (!quiet) fprintf(stderr, "%s: invalid %s '%s'\n", argv[0], what, val);
    return -1;
  };
  opterr = quiet ? 0 : 1;
  int c;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:G:a:R:h", longOpts,
                          nullptr)) != -1) {
    int iv = 0;
    switch (c) {
      case 't':
      case 'g':
        if (!parseInt(optarg, &iv) || iv != 1)
          return bad(
              c == 't' ? "thread count (only 1 is supported)" : "GPU count (only 1 is supported)",
              optarg);
        break;
      case 'b':
        if (!parseSize(optarg, &o->minBytes)) return bad("min size", optarg);
        break;
      case 'e':
        if (!parseSize(optarg, &o->maxBytes)) return bad("max size", optarg);
        break;
      case 'i':
        if (!parseSize(optarg, &o->stepBytes)) return bad("step size", optarg);
        break;
      case 'f':
        if (!parseInt(optarg, &iv) || iv < 1) return bad("step factor", optarg);
        o->stepFactor = static_cast<size_t>(iv);
        break;
      case 'n':
        if (!parseInt(optarg, &o->iters) || o->iters < 1) return bad("iteration count", optarg);
        break;
      case 'm':
        if (!parseInt(optarg, &o->aggIters) || o->aggIters < 1)
          return bad("aggregation count", optarg);
        break;
      case 'w':
        if (!parseInt(optarg, &o->warmupIters) || o->warmupIters < 0)
          return bad("warmup count", optarg);
        break;
      case 'c':
        if (!parseInt(optarg, &o->check)) return bad("check flag", optarg);
        o->check = o->check != 0;
        break;
      case 'a':
        if (!parseInt(optarg, &o->average) || o->average < 0 || o->average > 3)
          return bad("average mode", optarg);
        break;
      case 'R':
        if (!parseInt(optarg, &o->registered) || o->registered < 0 || o->registered > 1)
          return bad("registration flag (0 or 1)", optarg);
        break;
      case 'r':
        if (!parseInt(optarg, &o->root) || o->root < 0) return bad("root", optarg);
        break;
      case 'z':
        if (!parseInt(optarg, &o->blocking)) return bad("blocking flag", optarg);
        break;
      case 'p':
      case 'y':
      case 'T':
      case 'G':
        if (!parseInt(optarg, &iv)) return bad("flag value", optarg);
        break;  // GPU/thread options of nccl-tests: accepted, meaningless here
      case 'o': {
        o->ops.clear();
        o->allOps = strcmp(optarg, "all") == 0;
        for (int i = 0; i < kNumOps; ++i)
          if (o->allOps || strcmp(optarg, kOpNames[i]) == 0) o->ops.push_back(RedOp(i));
        if (o->ops.empty()) return bad("op", optarg);
        break;
      }
      case 'd': {
        o->types.clear();
        o->allTypes = strcmp(optarg, "all") == 0;
        for (int i = 0; i < kNumTypes; ++i)
          if (o->allTypes || strcmp(optarg, kTypeNames[i]) == 0) o->types.push_back(DataType(i));
        // nccl-tests spellings
        if (!strcmp(optarg, "char")) o->types.push_back(kInt8);
        if (!strcmp(optarg, "int")) o->types.push_back(kInt32);
        if (!strcmp(optarg, "bf16")) o->types.push_back(kBfloat16);
        if (!strcmp(optarg, "fp16") || !strcmp(optarg, "float16")) o->types.push_back(kHalf);
        if (!strcmp(optarg, "float32")) o->types.push_back(kFloat);
        if (!strcmp(optarg, "float64")) o->types.push_back(kDouble);
        if (o->types.empty()) return bad("datatype", optarg);
        break;
      }
      case kOptCsv: o->csvPath = optarg; break;
      case kOptJson: o->jsonPath = optarg; break;
      case 'h':
        if (!quiet) usage(argv[0], stdout);
        return 1;
      default:
        if (!quiet) usage(argv[0], stderr);
        return -1;
    }
  }
  if (optind < argc) {
    if (!quiet) fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
    return -1;
  }
  if (o->minBytes > o->maxBytes) {
    if (!quiet)
      fprintf(stderr, "%s: invalid sizes: minbytes %zu > maxbytes %zu\n", argv[0], o->minBytes,
              o->maxBytes);
    return -1;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// The sweep
// ---------------------------------------------------------------------------------------

struct RankInfo {
  int32_t pid;
  char host[64];
  char cpus[32];
  char model[64];
};

void cpuModel(char* out, size_t len) {
  snprintf(out, len, "cpu");
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      const char* p = strchr(line, ':');
      if (p) {
        p++;
        while (*p == ' ' || *p == '\t') p++;
        snprintf(out, len, "%s", p);
        out[strcspn(out, "\n")] = '\0';
      }
      break;
    }
  }
  fclose(f);
}

void cpuList(char* out, size_t len) {
  cpu_set_t set;
  CPU_ZERO(&set);
  out[0] = '\0';
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    snprintf(out, len, "?");
    return;
  }
  size_t used = 0;
  for (int c = 0; c < CPU_SETSIZE && used + 12 < len; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set)) ++e;
    used += snprintf(out + used, len - used, used ? ",%d" : "%d", c);
    if (e > c) used += snprintf(out + used, len - used, "-%d", e);
    c = e;
  }
}

struct Row {
  size_t bytes, count;
  DataType type;
  RedOp op;
  int root;
  bool inPlace;
  double timeUs, algBw, busBw;
  double wrong;  // < 0: not checked
};

double nowSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

class Driver {
 public:
  Driver(const CollDesc& coll, Backend* b, const Options& o) : coll_(coll), b_(b), o_(o) {
    const char* inject = getenv("CHORUS_PERF_INJECT_ERROR");
    injectError_ = inject && strcmp(inject, "1") == 0;
  }

  int run();

 private:
  // Any failed backend call ends the job: print the detail, abort the peers, exit 2.
  void check(int rc, const char* what) {
    if (rc == 0) return;
    fprintf(stderr, "%s: rank %d: %s failed: %s\n", coll_.name, b_->rank(), what,
            b_->errorString().c_str());
    fflush(stderr);
    b_->abortJob();
    exit(2);
  }
  void print(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void printHeader();
  void runTest(DataType t, RedOp op);
  void benchOne(CollArgs& args, size_t bytes, bool inPlace, Row* row);
  void writeCsv();
  void writeJson();

  const CollDesc& coll_;
  Backend* b_;
  Options o_;
  int rank_ = 0, nranks_ = 1;
  char* sendbuf_ = nullptr;
  void* sendHandle_ = nullptr;  // -R 1
  void* recvHandle_ = nullptr;
  char* recvbuf_ = nullptr;
  size_t sendBytesMax_ = 0, recvBytesMax_ = 0;
  std::vector<Row> rows_;
  double bwSum_ = 0;
  int bwCount_ = 0;
  int errors_ = 0;            // measurements with wrong elements (nccl-tests' "out of bounds")
  bool injectError_ = false;  // CHORUS_PERF_INJECT_ERROR=1: flip a bit before checking
};

void Driver::print(const char* fmt, ...) {
  if (rank_ != 0) return;
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

void Driver::printHeader() {
  print("# Collective test starting: %s\n", coll_.name);
  print("# Backend: %s %s, %d ranks\n", b_->name(), b_->version().c_str(), nranks_);
  print(
      "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
      "agg iters: %d validation: %d graph: 0\n",
      o_.minBytes, o_.maxBytes, o_.stepFactor > 1 ? o_.stepFactor : o_.stepBytes,
      o_.stepFactor > 1 ? "factor" : "bytes", o_.warmupIters, o_.iters, o_.aggIters, o_.check);
  if (o_.registered) print("# Registered buffers (-R 1): library-allocated, registered\n");
  print("#\n# Using devices\n");
  RankInfo mine;
  memset(&mine, 0, sizeof mine);
  mine.pid = static_cast<int32_t>(getpid());
  gethostname(mine.host, sizeof mine.host - 1);
  cpuList(mine.cpus, sizeof mine.cpus);
  cpuModel(mine.model, sizeof mine.model);
  std::vector<RankInfo> all(static_cast<size_t>(nranks_));
  check(b_->allGatherBytes(&mine, all.data(), sizeof mine), "allgather of rank info");
  for (int r = 0; r < nranks_; ++r) {
    const RankInfo& ri = all[static_cast<size_t>(r)];
    print("#  Rank %2d Group  0 Pid %6d on %10s device  - [cpus %s] %s\n", r, ri.pid, ri.host,
          ri.cpus, ri.model);
  }
  print("#\n");
  print(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
      "\n",
      "", "", "", "", "");
  print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
        "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
        "#wrong");
  print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
        "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

void Driver::benchOne(CollArgs& args, size_t bytes, bool inPlace, Row* row) {
  const size_t ts = typeSize(args.type);
  const size_t r = static_cast<size_t>(rank_);
  char* send = inPlace ? recvbuf_ + args.counts.sendInplaceOffset * ts * r : sendbuf_;
  char* recv = inPlace ? recvbuf_ + args.counts.recvInplaceOffset * ts * r : recvbuf_;

  if (o_.check) coll_.initData(args, sendbuf_, recvbuf_, inPlace);

  // Warm up, then line everyone up so the clock starts together.
  for (int i = 0; i < o_.warmupIters; ++i) check(coll_.run(args, send, recv), "warmup call");
  check(b_->sync(), "sync");
  check(b_->barrier(), "barrier");

  // Time the whole loop, never a single call: for tiny sizes a call is shorter than the
  // cost of reading the clock.
  const double t0 = nowSeconds();
  for (int it = 0; it < o_.iters; ++it) {
    if (o_.aggIters > 1) check(b_->groupStart(), "group start");
    for (int a = 0; a < o_.aggIters; ++a) check(coll_.run(args, send, recv), "timed call");
    if (o_.aggIters > 1) check(b_->groupEnd(), "group end");
  }
  check(b_->sync(), "sync");
  double sec = (nowSeconds() - t0) / (static_cast<double>(o_.iters) * o_.aggIters);

  switch (o_.average) {
    case 1:
      check(b_->allReduceDoubles(&sec, 1, kSum), "time reduction");
      sec /= nranks_;
      break;
    case 2: check(b_->allReduceDoubles(&sec, 1, kMin), "time reduction"); break;
    case 3: check(b_->allReduceDoubles(&sec, 1, kMax), "time reduction"); break;
    default: break;  // 0: rank 0's own time
  }

  double wrong = -1;
  const bool checked = o_.check && !(inPlace && coll_.inPlaceUnchecked);
  if (checked) {
    coll_.initData(args, sendbuf_, recvbuf_, inPlace);
    check(coll_.run(args, send, recv), "checked call");
    check(b_->sync(), "sync");
    // Test hook: proves the check can fail (tests/integration/perf expects #wrong == 1).
    // Rooted collectives flip on the root: elsewhere the output may not be checked.
    const int victim = coll_.usesRoot ? args.root : nranks_ - 1;
    if (injectError_ && rank_ == victim && args.counts.recvCount > 0) recv[0] ^= 0x40;
    wrong = static_cast<double>(coll_.check(args, sendbuf_, recvbuf_, inPlace));
    check(b_->allReduceDoubles(&wrong, 1, kSum), "error count reduction");
    if (wrong > 0) errors_++;
  }

  double algBw = 0, busBw = 0;
  coll_.getBw(args.counts.paramCount, ts, sec, nranks_, &algBw, &busBw);
  bwSum_ += busBw;
  bwCount_++;

  const double us = sec * 1e6;
  char timeStr[32];
  if (us >= 10000.0)
    snprintf(timeStr, sizeof timeStr, "%7.0f", us);
  else if (us >= 100.0)
    snprintf(timeStr, sizeof timeStr, "%7.1f", us);
  else
    snprintf(timeStr, sizeof timeStr, "%7.2f", us);
  if (checked)
    print("  %7s  %6.2f  %6.2f  %5g", timeStr, algBw, busBw, wrong);
  else
    print("  %7s  %6.2f  %6.2f  %5s", timeStr, algBw, busBw, "N/A");

  *row = Row{bytes,
             args.counts.paramCount,
             args.type,
             args.op,
             coll_.usesRoot ? args.root : -1,
             inPlace,
             us,
             algBw,
             busBw,
             wrong};
}

void Driver::runTest(DataType t, RedOp op) {
  const size_t ts = typeSize(t);
  const int root = coll_.usesRoot ? o_.root : -1;
  const char* opStr = coll_.usesOp ? opName(op) : "none";
  size_t size = o_.minBytes;
  for (;;) {
    CollArgs args{b_, t, op, coll_.usesRoot ? o_.root : 0, rank_, nranks_, CollCounts{}};
    coll_.getCounts(size, ts, nranks_, &args.counts);
    const size_t bytes = std::max(args.counts.sendCount, args.counts.recvCount) * ts;
    print("%12zu  %12zu  %8s  %6s  %6d", bytes, args.counts.paramCount, typeName(t), opStr, root);
    Row outRow, inRow;
    benchOne(args, bytes, false, &outRow);
    benchOne(args, bytes, true, &inRow);
    print("\n");
    rows_.push_back(outRow);
    rows_.push_back(inRow);

    if (coll_.noData) break;  // barrier: one row, whatever the sizes
    size_t next = o_.stepFactor > 1 ? size * o_.stepFactor : size + o_.stepBytes;
    if (next <= size || next > o_.maxBytes) break;  // also stops 0 * factor and overflow
    size = next;
  }
}

void Driver::writeCsv() {
  FILE* f = fopen(o_.csvPath.c_str(), "w");
  if (!f) {
    fprintf(stderr, "%s: cannot write %s: %s\n", coll_.name, o_.csvPath.c_str(), strerror(errno));
    return;
  }
  fprintf(f,
          "collective,backend,nranks,size,count,type,redop,root,placement,time_us,algbw,busbw,"
          "wrong\n");
  for (const Row& r : rows_) {
    fprintf(f, "%s,%s,%d,%zu,%zu,%s,%s,%d,%s,%.4f,%.4f,%.4f,", coll_.name, b_->name(), nranks_,
            r.bytes, r.count, typeName(r.type), coll_.usesOp ? opName(r.op) : "none", r.root,
            r.inPlace ? "in-place" : "out-of-place", r.timeUs, r.algBw, r.busBw);
    if (r.wrong < 0)
      fprintf(f, "N/A\n");
    else
      fprintf(f, "%.0f\n", r.wrong);
  }
  fclose(f);
}

void Driver::writeJson() {
  FILE* f = fopen(o_.jsonPath.c_str(), "w");
  if (!f) {
    fprintf(stderr, "%s: cannot write %s: %s\n", coll_.name, o_.jsonPath.c_str(), strerror(errno));
    return;
  }
  fprintf(f,
          "{\n  \"collective\": \"%s\",\n  \"backend\": \"%s\",\n  \"version\": \"%s\",\n"
          "  \"nranks\": %d,\n  \"iters\": %d,\n  \"warmup_iters\": %d,\n  \"agg_iters\": %d,\n"
          "  \"check\": %d,\n  \"average\": %d,\n  \"rows\": [",
          coll_.name, b_->name(), b_->version().c_str(), nranks_, o_.iters, o_.warmupIters,
          o_.aggIters, o_.check, o_.average);
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    fprintf(f,
            "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
            "\"root\": %d, \"placement\": \"%s\", \"time_us\": %.4f, \"algbw\": %.4f, "
            "\"busbw\": %.4f, \"wrong\": ",
            i ? "," : "", r.bytes, r.count, typeName(r.type), coll_.usesOp ? opName(r.op) : "none",
            r.root, r.inPlace ? "in-place" : "out-of-place", r.timeUs, r.algBw, r.busBw);
    if (r.wrong < 0)
      fprintf(f, "null}");
    else
      fprintf(f, "%.0f}", r.wrong);
  }
  fprintf(f, "\n  ],\n  \"out_of_bounds\": %d,\n  \"avg_busbw\": %.6f\n}\n", errors_,
          bwCount_ ? bwSum_ / bwCount_ : 0.0);
  fclose(f);
}

int Driver::run() {
  rank_ = b_->rank();
  nranks_ = b_->nranks();
  if (coll_.usesRoot && o_.root >= nranks_) {
    if (rank_ == 0) fprintf(stderr, "%s: root %d >= %d ranks\n", coll_.name, o_.root, nranks_);
    return 2;
  }

  // Keep only what the backend can do; an explicit unsupported choice is an error.
  std::vector<std::pair<DataType, RedOp>> tests;
  for (DataType t : o_.types)
    for (RedOp op : (coll_.usesOp ? o_.ops : std::vector<RedOp>{kSum})) {
      if (b_->supports(t, op)) {
        tests.emplace_back(t, op);
      } else if (!o_.allTypes && !o_.allOps) {
        if (rank_ == 0)
          fprintf(stderr, "%s: %s does not support type %s with op %s\n", coll_.name, b_->name(),
                  typeName(t), opName(op));
        return 2;
      }
    }

  // One allocation sized for the largest test, touched here (first touch: this rank).
  CollCounts maxCounts{};
  coll_.getCounts(o_.maxBytes, 1, nranks_, &maxCounts);
  sendBytesMax_ = std::max<size_t>(maxCounts.sendCount, 1);
  // In-place runs use the receive allocation for both sides (reduce-scatter and scatter
  // read nranks blocks from it): size it like nccl-tests, max(send, recv).
  recvBytesMax_ = std::max<size_t>(std::max(maxCounts.recvCount, maxCounts.sendCount), 1);
  const size_t align = 4096;
  void* p = nullptr;
  if (o_.registered) {
    if (b_->allocRegistered(sendBytesMax_, &p, &sendHandle_) != 0) {
      const std::string why = b_->errorString();
      fprintf(stderr, "%s: rank %d: -R 1: %s\n", coll_.name, rank_,
              why.empty() ? (std::string(b_->name()) + " has no buffer registration").c_str()
                          : why.c_str());
      b_->abortJob();
      return 2;
    }
    sendbuf_ = static_cast<char*>(p);
    if (b_->allocRegistered(recvBytesMax_, &p, &recvHandle_) != 0) {
      fprintf(stderr, "%s: rank %d: -R 1: %s\n", coll_.name, rank_, b_->errorString().c_str());
      b_->abortJob();
      return 2;
    }
    recvbuf_ = static_cast<char*>(p);
  } else {
    if (posix_memalign(&p, align, (sendBytesMax_ + align - 1) / align * align) != 0) {
      fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes\n", coll_.name, rank_, sendBytesMax_);
      b_->abortJob();
      return 2;
    }
    sendbuf_ = static_cast<char*>(p);
    if (posix_memalign(&p, align, (recvBytesMax_ + align - 1) / align * align) != 0) {
      fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes\n", coll_.name, rank_, recvBytesMax_);
      b_->abortJob();
      return 2;
    }
    recvbuf_ = static_cast<char*>(p);
  }
  memset(sendbuf_, 0, sendBytesMax_);
  memset(recvbuf_, 0, recvBytesMax_);

  printHeader();
  for (const auto& test : tests) runTest(test.first, test.second);
  for (DataType t : o_.types)
    for (RedOp op : (coll_.usesOp ? o_.ops : std::vector<RedOp>{kSum}))
      if (!b_->supports(t, op))
        print("# skipped %s/%s: not supported by %s\n", typeName(t), opName(op), b_->name());

  const double avgBw = bwCount_ ? bwSum_ / bwCount_ : 0.0;
  print("# Out of bounds values : %d %s\n", errors_, errors_ ? "FAILED" : "OK");
  print("# Avg bus bandwidth    : %g \n", avgBw);
  print("#\n");

  if (rank_ == 0 && !o_.csvPath.empty()) writeCsv();
  if (rank_ == 0 && !o_.jsonPath.empty()) writeJson();
  // Nobody leaves before rank 0 has printed and written everything: with wrong results
  // the other ranks exit 1 at once, and the launcher then kills rank 0 mid-table.
  check(b_->barrier(), "final barrier");

  if (o_.registered) {
    check(b_->releaseRegistered(sendbuf_, sendHandle_), "releasing the registered send buffer");
    check(b_->releaseRegistered(recvbuf_, recvHandle_), "releasing the registered recv buffer");
  } else {
    free(sendbuf_);
    free(recvbuf_);
  }
  return errors_ ? 1 : 0;
}

// The rank the launcher gave this process, before any library is initialized (-1: none).
int launcherRank() {
  const char* vars[] = {"CHORUS_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
  for (const char* v : vars) {
    const char* s = getenv(v);
    if (s && *s) return atoi(s);
  }
  return -1;
}

}  // namespace

int perfMain(int argc, char** argv, const CollDesc& coll, Backend* backend) {
  // Parse once quietly before joining the job, so -h and bad flags never start a
  // communicator; the real messages come from rank 0 only.
  Options opts;
  int prc = parseOptions(argc, argv, &opts, /*quiet=*/true);
  if (prc == 1) {
    usage(argv[0], stdout);
    return 0;
  }
  if (prc != 0) {
    // Say why once per job, not once per rank.
    if (launcherRank() <= 0) {
      optind = 1;
      Options again;
      parseOptions(argc, argv, &again, /*quiet=*/false);
    }
    return 2;
  }
  if (backend->init(&argc, &argv) != 0) {
    fprintf(stderr, "%s: %s initialization failed: %s\n", coll.name, backend->name(),
            backend->errorString().c_str());
    return 2;
  }
  Driver driver(coll, backend, opts);
  int rc = driver.run();
  if (rc == 2) {
    backend->abortJob();
    return rc;
  }
  if (backend->finalize() != 0) {
    fprintf(stderr, "%s: rank %d: finalize failed: %s\n", coll.name, backend->rank(),
            backend->errorString().c_str());
    return 2;
  }
  return rc;
}

}  // namespace perf
