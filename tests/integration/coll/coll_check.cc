// coll_check.cc — see coll_check.h for what is checked and how the inputs are chosen.
#include "tests/integration/coll/coll_check.h"

#include "src/api/test_hooks.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace collcheck {

// ---------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------

const std::vector<chorusDataType_t> kAllTypes = {
    chorusInt8,   chorusUint8,   chorusInt32,    chorusUint32,  chorusInt64,
    chorusUint64, chorusFloat16, chorusBfloat16, chorusFloat32, chorusFloat64};
const std::vector<chorusDataType_t> kMatrixTypes = {chorusInt8,    chorusInt32,    chorusInt64,
                                                    chorusFloat16, chorusBfloat16, chorusFloat32,
                                                    chorusFloat64};
const std::vector<Op> kAllOps = {Op::Sum, Op::Prod, Op::Max, Op::Min, Op::Avg, Op::PreMulSum};
const std::vector<Coll> kAllColls = {
    Coll::AllReduce, Coll::Broadcast, Coll::Reduce,   Coll::AllGather, Coll::ReduceScatter,
    Coll::Scatter,   Coll::Gather,    Coll::AllToAll, Coll::SendRecv,  Coll::Barrier};

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
    case Coll::SendRecv: return "send_recv";
    case Coll::Barrier: return "barrier";
    default: return "?coll";
  }
}

const char* opName(Op o) {
  switch (o) {
    case Op::Sum: return "sum";
    case Op::Prod: return "prod";
    case Op::Max: return "max";
    case Op::Min: return "min";
    case Op::Avg: return "avg";
    case Op::PreMulSum: return "premulsum";
    default: return "?op";
  }
}

const char* typeName(chorusDataType_t t) {
  switch (t) {
    case chorusInt8: return "int8";
    case chorusUint8: return "uint8";
    case chorusInt32: return "int32";
    case chorusUint32: return "uint32";
    case chorusInt64: return "int64";
    case chorusUint64: return "uint64";
    case chorusFloat16: return "float16";
    case chorusBfloat16: return "bfloat16";
    case chorusFloat32: return "float32";
    case chorusFloat64: return "float64";
    default: return "?type";
  }
}

const char* p2pName(P2P p) {
  switch (p) {
    case P2P::Ring: return "ring";
    case P2P::RingUngrouped: return "ring_ungrouped";
    case P2P::Pairwise: return "pairwise";
    case P2P::Self: return "self";
    case P2P::MultiSamePeer: return "multi_same_peer";
    default: return "?p2p";
  }
}

bool parseColl(const std::string& s, Coll* out) {
  for (Coll c : kAllColls)
    if (s == collName(c)) {
      *out = c;
      return true;
    }
  return false;
}
bool parseOp(const std::string& s, Op* out) {
  for (Op o : kAllOps)
    if (s == opName(o)) {
      *out = o;
      return true;
    }
  return false;
}
bool parseType(const std::string& s, chorusDataType_t* out) {
  for (chorusDataType_t t : kAllTypes)
    if (s == typeName(t)) {
      *out = t;
      return true;
    }
  return false;
}

size_t typeSize(chorusDataType_t t) {
  switch (t) {
    case chorusInt8:
    case chorusUint8: return 1;
    case chorusFloat16:
    case chorusBfloat16: return 2;
    case chorusInt32:
    case chorusUint32:
    case chorusFloat32: return 4;
    case chorusInt64:
    case chorusUint64:
    case chorusFloat64: return 8;
    default: return 0;
  }
}

bool isFloatType(chorusDataType_t t) {
  return t == chorusFloat16 || t == chorusBfloat16 || t == chorusFloat32 || t == chorusFloat64;
}
static bool isSignedType(chorusDataType_t t) {
  return !(t == chorusUint8 || t == chorusUint32 || t == chorusUint64);
}
bool isReducing(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}
bool hasRoot(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Scatter || c == Coll::Gather;
}

static std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

static const char* resultName(chorusResult_t r) {
  switch (r) {
    case chorusSuccess: return "chorusSuccess";
    case chorusUnhandledError: return "chorusUnhandledError";
    case chorusSystemError: return "chorusSystemError";
    case chorusInternalError: return "chorusInternalError";
    case chorusInvalidArgument: return "chorusInvalidArgument";
    case chorusInvalidUsage: return "chorusInvalidUsage";
    case chorusRemoteError: return "chorusRemoteError";
    case chorusInProgress: return "chorusInProgress";
    case chorusTimeout: return "chorusTimeout";
    case chorusAborted: return "chorusAborted";
    default: return "(out-of-range result)";
  }
}

static std::string callError(const char* what, chorusResult_t r, chorusComm_t comm) {
  const char* es = chorusGetErrorString(r);
  const char* le = chorusGetLastError(comm);
  return fmt("%s returned %s (%d): \"%s\"; last error: \"%s\"", what, resultName(r), int(r),
             es ? es : "(NULL error string!)", le ? le : "(NULL last error!)");
}

std::string describe(const Case& c) {
  std::string s = collName(c.coll);
  if (c.coll == Coll::Barrier) {
    s += c.timedBarrier ? " timed" : "";
    s += fmt(" seed=%u", c.seed);
    return s;
  }
  s += " ";
  s += typeName(c.type);
  if (isReducing(c.coll)) {
    s += " ";
    s += opName(c.op);
    if (c.nan) s += " nan";
  }
  if (c.coll == Coll::SendRecv) {
    s += " ";
    s += p2pName(c.p2p);
  }
  s += fmt(" count=%zu", c.count);
  if (hasRoot(c.coll)) s += fmt(" root=%d", c.root);
  if (c.coll != Coll::SendRecv) s += c.inplace ? " in-place" : " out-of-place";
  s += fmt(" seed=%u", c.seed);
  return s;
}

double nowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ---------------------------------------------------------------------------------------
// Float conversions (independent of the library)
// ---------------------------------------------------------------------------------------

// Rounds a double to a binary format with E exponent bits and M stored mantissa bits,
// round to nearest, ties to even; handles subnormals, overflow (-> inf), NaN.
static uint32_t encodeSmallFloat(double x, int E, int M) {
  uint64_t b;
  std::memcpy(&b, &x, 8);
  const uint32_t sign = uint32_t(b >> 63) << (E + M);
  const int dexp = int((b >> 52) & 0x7ff);
  const uint64_t mant = b & ((uint64_t(1) << 52) - 1);
  const uint32_t expMask = ((1u << E) - 1) << M;
  if (dexp == 0x7ff) return mant ? (sign | expMask | (1u << (M - 1))) : (sign | expMask);
  if (dexp == 0 && mant == 0) return sign;
  uint64_t sig;
  int e;  // |x| = sig * 2^e exactly
  if (dexp == 0) {
    sig = mant;
    e = -1074;
  } else {
    sig = mant | (uint64_t(1) << 52);
    e = dexp - 1075;
  }
  const int bias = (1 << (E - 1)) - 1;
  const int lg = 63 - __builtin_clzll(sig) + e;  // floor(log2 |x|)
  int q = std::max(lg - M, 1 - bias - M);        // exponent of the target's ulp
  const int shift = q - e;
  uint64_t n;  // |x| / 2^q rounded to an integer
  if (shift <= 0) {
    n = sig << (-shift);
  } else if (shift >= 64) {
    n = 0;
  } else {
    n = sig >> shift;
    const uint64_t rem = sig & ((uint64_t(1) << shift) - 1);
    const uint64_t half = uint64_t(1) << (shift - 1);
    if (rem > half || (rem == half && (n & 1))) ++n;
  }
  if (n >= (uint64_t(1) << (M + 1))) {  // rounding carried into the next binade
    n >>= 1;
    ++q;
  }
  if (n < (uint64_t(1) << M)) return sign | uint32_t(n);  // subnormal or zero
  const int expField = q + M + bias;
  if (expField >= (1 << E) - 1) return sign | expMask;  // overflow -> infinity
  return sign | (uint32_t(expField) << M) | uint32_t(n & ((uint64_t(1) << M) - 1));
}

static double decodeSmallFloat(uint32_t h, int E, int M) {
  const uint32_t sign = (h >> (E + M)) & 1;
  const uint32_t ex = (h >> M) & ((1u << E) - 1);
  const uint32_t man = h & ((1u << M) - 1);
  const int bias = (1 << (E - 1)) - 1;
  double v;
  if (ex == (1u << E) - 1)
    v = man ? std::nan("") : HUGE_VAL;
  else if (ex == 0)
    v = std::ldexp(double(man), 1 - bias - M);
  else
    v = std::ldexp(double(man | (1u << M)), int(ex) - bias - M);
  return sign ? -v : v;
}

uint16_t doubleToHalf(double x) { return uint16_t(encodeSmallFloat(x, 5, 10)); }
double halfToDouble(uint16_t h) { return decodeSmallFloat(h, 5, 10); }
uint16_t doubleToBf16(double x) { return uint16_t(encodeSmallFloat(x, 8, 7)); }
double bf16ToDouble(uint16_t h) { return decodeSmallFloat(h, 8, 7); }

// ---------------------------------------------------------------------------------------
// Codecs: storage type <-> double, one per datatype
// ---------------------------------------------------------------------------------------

template <typename S>
struct IntCodec {
  using Storage = S;
  static constexpr bool kFloat = false;
  static constexpr int kMant = 0;
  static Storage enc(double v) { return Storage(int64_t(v)); }
  static double dec(Storage s) { return double(s); }
};
struct HalfCodec {
  using Storage = uint16_t;
  static constexpr bool kFloat = true;
  static constexpr int kMant = 10;
  static Storage enc(double v) { return doubleToHalf(v); }
  static double dec(Storage s) { return halfToDouble(s); }
};
struct Bf16Codec {
  using Storage = uint16_t;
  static constexpr bool kFloat = true;
  static constexpr int kMant = 7;
  static Storage enc(double v) { return doubleToBf16(v); }
  static double dec(Storage s) { return bf16ToDouble(s); }
};
struct F32Codec {
  using Storage = float;
  static constexpr bool kFloat = true;
  static constexpr int kMant = 23;
  static Storage enc(double v) { return float(v); }  // C++: round to nearest even
  static double dec(Storage s) { return double(s); }
};
struct F64Codec {
  using Storage = double;
  static constexpr bool kFloat = true;
  static constexpr int kMant = 52;
  static Storage enc(double v) { return v; }
  static double dec(Storage s) { return s; }
};

template <class F>
static void withCodec(chorusDataType_t t, F&& f) {
  switch (t) {
    case chorusInt8: f(IntCodec<int8_t>{}); break;
    case chorusUint8: f(IntCodec<uint8_t>{}); break;
    case chorusInt32: f(IntCodec<int32_t>{}); break;
    case chorusUint32: f(IntCodec<uint32_t>{}); break;
    case chorusInt64: f(IntCodec<int64_t>{}); break;
    case chorusUint64: f(IntCodec<uint64_t>{}); break;
    case chorusFloat16: f(HalfCodec{}); break;
    case chorusBfloat16: f(Bf16Codec{}); break;
    case chorusFloat32: f(F32Codec{}); break;
    case chorusFloat64: f(F64Codec{}); break;
    default: break;
  }
}

// ---------------------------------------------------------------------------------------
// Input patterns
// ---------------------------------------------------------------------------------------

// Value of element i on `rank` for the reducing collectives (see coll_check.h).
static inline int genValue(Op op, bool sgn, int rank, size_t i, uint32_t seed) {
  if (op == Op::Prod) {
    int v = ((i % 5) + unsigned(rank) + seed % 5) % 5 == 0 ? 2 : 1;
    if (sgn && ((i % 7) * 3 + unsigned(rank) * 5 + seed % 7) % 7 == 3) v = -v;
    return v;
  }
  int v = int(((i % 15) * 7 + unsigned(rank) * 13 + (seed % 15) * 3) % 15);
  return sgn ? v - 7 : v;
}

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// Byte b of rank's pattern: byte (b & 7) of word(b >> 3).
struct BytePattern {
  uint64_t key;
  BytePattern(int rank, uint32_t seed)
      : key(mix64((uint64_t(uint32_t(rank)) + 1) * 0x9E3779B97F4A7C15ull ^
                  (uint64_t(seed) << 32))) {}
  uint64_t word(size_t w) const { return mix64(key + uint64_t(w) * 0xD6E8FEB86659FD93ull); }
  uint8_t byte(size_t b) const { return uint8_t(word(b >> 3) >> (8 * (b & 7))); }
  // Writes pattern bytes [off, off+len) to dst.
  void fill(uint8_t* dst, size_t off, size_t len) const {
    size_t b = off;
    const size_t end = off + len;
    while (b < end && (b & 7)) *dst++ = byte(b++);
    while (b + 8 <= end) {
      uint64_t w = word(b >> 3);
      std::memcpy(dst, &w, 8);
      dst += 8;
      b += 8;
    }
    while (b < end) *dst++ = byte(b++);
  }
};

static void fillJunk(uint8_t* dst, size_t len, int rank, uint32_t seed) {
  BytePattern(rank + 1000, seed ^ 0x5eed5eedu).fill(dst, 0, len);
}

// ---------------------------------------------------------------------------------------
// Guarded buffers
// ---------------------------------------------------------------------------------------

static constexpr size_t kGuard = 64;
// setRegisteredBuffers: every buffer from chorusMemAlloc, registered on the case's comm.
static bool registeredBuffers = false;
void setRegisteredBuffers(bool on) { registeredBuffers = on; }
static inline uint8_t guardByte(size_t k) { return uint8_t(0xA5 ^ (k * 29)); }

struct GBuf {
  uint8_t* base = nullptr;
  uint8_t* data = nullptr;
  size_t bytes = 0;
  size_t pre = 0;
  std::vector<uint8_t> snap;  // contents after filling (for "unchanged" checks)
  bool hasSnap = false;
  const char* name = "";

  chorusComm_t regComm = nullptr;  // registered mode: chorusMemAlloc + chorusCommRegister
  void* regHandle = nullptr;

  GBuf(const char* nm, size_t n, size_t misalign, chorusComm_t comm)
      : bytes(n), pre(kGuard + misalign), name(nm) {
    void* p = nullptr;
    if (comm) {
      chorusResult_t r = chorusMemAlloc(&p, pre + n + kGuard);
      if (r == chorusSuccess) r = chorusCommRegister(comm, p, pre + n + kGuard, &regHandle);
      if (r != chorusSuccess) {
        std::fprintf(stderr, "coll_check: registered buffer of %zu bytes: %s\n", n,
                     chorusGetLastError(comm));
        std::abort();
      }
      regComm = comm;
    } else if (posix_memalign(&p, 64, pre + n + kGuard) != 0) {
      std::fprintf(stderr, "coll_check: out of memory allocating %zu bytes\n", n);
      std::abort();
    }
    base = static_cast<uint8_t*>(p);
    data = base + pre;
    for (size_t k = 0; k < pre; ++k) base[k] = guardByte(k);
    for (size_t k = 0; k < kGuard; ++k) data[n + k] = guardByte(k + 7);
  }
  ~GBuf() {
    // A library that still reads a buffer after its call returned (a send left queued on
    // it, a peer's single copy from it) now reads this instead, and that peer's check of
    // the case fails. The barrier keeps the compiler from dropping the stores before free.
    std::memset(data, 0xEE, bytes);
    __asm__ __volatile__("" : : "r"(data) : "memory");
    if (!regComm) {
      std::free(base);
      return;
    }
    if (chorusCommDeregister(regComm, regHandle) != chorusSuccess ||
        chorusMemFree(base) != chorusSuccess) {
      std::fprintf(stderr, "coll_check: releasing a registered buffer: %s\n",
                   chorusGetLastError(regComm));
      std::abort();
    }
  }
  GBuf(const GBuf&) = delete;
  GBuf& operator=(const GBuf&) = delete;

  void snapshot() {
    snap.assign(data, data + bytes);
    hasSnap = true;
  }
  // Empty string when the guards are intact, else where they were overwritten.
  std::string checkGuards() const {
    for (size_t k = 0; k < pre; ++k)
      if (base[k] != guardByte(k))
        return fmt("%s: guard byte %zd bytes BEFORE the buffer overwritten (0x%02x)", name,
                   ptrdiff_t(k) - ptrdiff_t(pre), base[k]);
    for (size_t k = 0; k < kGuard; ++k)
      if (data[bytes + k] != guardByte(k + 7))
        return fmt(
            "%s: guard byte %zu bytes AFTER the end of the buffer (%zu bytes) "
            "overwritten (0x%02x)",
            name, k, bytes, data[bytes + k]);
    return "";
  }
};

// ---------------------------------------------------------------------------------------
// CaseRun
// ---------------------------------------------------------------------------------------

struct Seg {  // expected bytes: pattern of `rank` at [off, off+len)
  int rank;
  size_t off, len;
};

struct CaseRun::Impl {
  std::vector<std::unique_ptr<GBuf>> bufs;
  const void* sendp = nullptr;
  void* recvp = nullptr;
  // Output region (checked by value); everything else must match its snapshot.
  GBuf* out = nullptr;
  size_t outOff = 0, outLen = 0;
  // Non-reducing: expected bytes of the output region, as pattern segments.
  std::vector<Seg> segs;
  // Reducing: output element j corresponds to global input index giBase + j.
  size_t giBase = 0;
  chorusRedOp_t redop = chorusSum;
  bool redopCreated = false;
  chorusComm_t comm = nullptr;
  unsigned char scalar[16] = {0};
  // Barrier timing.
  bool timed = false;
  double barrierSeconds = 0;
  int lateRank = 0;

  GBuf* add(const char* name, size_t bytes, size_t misalign) {
    bufs.emplace_back(new GBuf(name, bytes, misalign, registeredBuffers ? comm : nullptr));
    return bufs.back().get();
  }
  ~Impl() {
    if (redopCreated) chorusRedOpDestroy(redop, comm);
  }
};

CaseRun::CaseRun(const Case& c, chorusComm_t comm) : c_(c), comm_(comm), impl_(new Impl) {
  impl_->comm = comm;
}
CaseRun::~CaseRun() = default;

std::string CaseRun::header() const {
  return fmt("[%s nranks=%d rank=%d]", describe(c_).c_str(), nranks_, rank_);
}

static chorusRedOp_t builtinOp(Op o) {
  switch (o) {
    case Op::Sum: return chorusSum;
    case Op::Prod: return chorusProd;
    case Op::Max: return chorusMax;
    case Op::Min: return chorusMin;
    case Op::Avg: return chorusAvg;
    default: return chorusSum;
  }
}

// Fills elements [0, nelem) of dst with this rank's reducing pattern (global index
// giOff + i), NaNs included.
static void fillReduceInput(const Case& c, int rank, int nranks, uint8_t* dst, size_t nelem,
                            size_t giOff) {
  const bool sgn = isSignedType(c.type);
  withCodec(c.type, [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    S lut[32];
    for (int v = -16; v < 16; ++v) lut[v + 16] = C::enc(double(v));
    S* p = reinterpret_cast<S*>(dst);
    for (size_t i = 0; i < nelem; ++i) {
      S s = lut[genValue(c.op, sgn, rank, giOff + i, c.seed) + 16];
      std::memcpy(p + i, &s, sizeof(S));
    }
    if (c.nan && C::kFloat && rank == int(c.seed % unsigned(nranks))) {
      S nanv = C::enc(std::nan(""));
      for (size_t i = 0; i < nelem; ++i)
        if ((giOff + i) % 5 == 2) std::memcpy(p + i, &nanv, sizeof(S));
    }
  });
}

bool CaseRun::prepare(std::string* err) {
  chorusResult_t r1 = chorusCommCount(comm_, &nranks_);
  chorusResult_t r2 = chorusCommUserRank(comm_, &rank_);
  if (r1 != chorusSuccess || r2 != chorusSuccess || nranks_ <= 0 || rank_ < 0 || rank_ >= nranks_) {
    *err = header() +
           " chorusCommCount/UserRank failed: " + callError("chorusCommCount", r1, comm_) + "; " +
           callError("chorusCommUserRank", r2, comm_) + fmt(" (count=%d rank=%d)", nranks_, rank_);
    return false;
  }
  Impl& im = *impl_;
  const int n = nranks_, r = rank_;
  const size_t es = typeSize(c_.type);
  const size_t cnt = c_.count;
  const size_t cb = cnt * es;
  const size_t mis = ((c_.seed >> 1) % 4) * es;  // vary alignment (element-aligned)
  const bool isRoot = (r == c_.root);

  if (isReducing(c_.coll)) {
    if (c_.op == Op::PreMulSum) {
      withCodec(c_.type, [&](auto codec) {
        using C = decltype(codec);
        typename C::Storage s = C::enc(2.0);
        std::memcpy(im.scalar, &s, sizeof s);
      });
      chorusResult_t res = chorusRedOpCreatePreMulSum(&im.redop, im.scalar, c_.type,
                                                      chorusScalarHostImmediate, comm_);
      if (res != chorusSuccess) {
        *err = header() + " " + callError("chorusRedOpCreatePreMulSum", res, comm_);
        return false;
      }
      im.redopCreated = true;
    } else {
      im.redop = builtinOp(c_.op);
    }
  }

  auto reduceIn = [&](const char* name, size_t nelem) {
    GBuf* b = im.add(name, nelem * es, mis);
    fillReduceInput(c_, r, n, b->data, nelem, 0);
    return b;
  };
  auto junk = [&](const char* name, size_t bytes) {
    GBuf* b = im.add(name, bytes, mis);
    fillJunk(b->data, bytes, r, c_.seed);
    return b;
  };
  auto pattern = [&](const char* name, size_t bytes) {
    GBuf* b = im.add(name, bytes, mis);
    BytePattern(r, c_.seed).fill(b->data, 0, bytes);
    return b;
  };
  auto setOut = [&](GBuf* b, size_t off, size_t len) {
    im.out = b;
    im.outOff = off;
    im.outLen = len;
  };

  switch (c_.coll) {
    case Coll::AllReduce:
    case Coll::Reduce: {
      const bool gets = c_.coll == Coll::AllReduce || isRoot;
      if (c_.inplace) {
        GBuf* a = reduceIn("in-place buffer", cnt);
        im.sendp = im.recvp = a->data;
        if (gets) setOut(a, 0, cb);
      } else {
        GBuf* s = reduceIn("sendbuff", cnt);
        im.sendp = s->data;
        if (gets) {
          GBuf* rb = junk("recvbuff", cb);
          im.recvp = rb->data;
          setOut(rb, 0, cb);
        } else if (c_.seed & 1) {
          im.recvp = nullptr;  // "recvbuff may be NULL elsewhere"
        } else {
          GBuf* rb = junk("off-root recvbuff (must stay untouched)", cb);
          im.recvp = rb->data;
        }
      }
      im.giBase = 0;
      break;
    }
    case Coll::ReduceScatter: {
      if (c_.inplace) {
        GBuf* a = reduceIn("in-place buffer", size_t(n) * cnt);
        im.sendp = a->data;
        im.recvp = a->data + size_t(r) * cb;
        setOut(a, size_t(r) * cb, cb);
      } else {
        GBuf* s = reduceIn("sendbuff", size_t(n) * cnt);
        GBuf* rb = junk("recvbuff", cb);
        im.sendp = s->data;
        im.recvp = rb->data;
        setOut(rb, 0, cb);
      }
      im.giBase = size_t(r) * cnt;
      break;
    }
    case Coll::Broadcast: {
      if (c_.inplace) {
        GBuf* a = isRoot ? pattern("in-place buffer", cb) : junk("in-place buffer", cb);
        im.sendp = im.recvp = a->data;
        setOut(a, 0, cb);
      } else {
        GBuf* s = pattern(isRoot ? "sendbuff" : "off-root sendbuff", cb);
        GBuf* rb = junk("recvbuff", cb);
        im.sendp = s->data;
        im.recvp = rb->data;
        setOut(rb, 0, cb);
      }
      im.segs.push_back({c_.root, 0, cb});
      break;
    }
    case Coll::AllGather: {
      if (c_.inplace) {
        GBuf* a = junk("in-place recvbuff", size_t(n) * cb);
        BytePattern(r, c_.seed).fill(a->data + size_t(r) * cb, 0, cb);
        im.sendp = a->data + size_t(r) * cb;
        im.recvp = a->data;
        setOut(a, 0, size_t(n) * cb);
      } else {
        GBuf* s = pattern("sendbuff", cb);
        GBuf* rb = junk("recvbuff", size_t(n) * cb);
        im.sendp = s->data;
        im.recvp = rb->data;
        setOut(rb, 0, size_t(n) * cb);
      }
      for (int q = 0; q < n; ++q) im.segs.push_back({q, 0, cb});
      break;
    }
    case Coll::Scatter: {
      if (isRoot && c_.inplace) {
        GBuf* a = pattern("in-place sendbuff", size_t(n) * cb);
        im.sendp = a->data;
        im.recvp = a->data + size_t(r) * cb;
        setOut(a, size_t(r) * cb, cb);
      } else {
        if (isRoot) {
          im.sendp = pattern("sendbuff", size_t(n) * cb)->data;
        } else if (c_.seed & 1) {
          im.sendp = nullptr;  // "sendbuff is ignored off root"
        } else {
          im.sendp = pattern("off-root sendbuff (must stay untouched)", size_t(n) * cb)->data;
        }
        GBuf* rb = junk("recvbuff", cb);
        im.recvp = rb->data;
        setOut(rb, 0, cb);
      }
      im.segs.push_back({c_.root, size_t(r) * cb, cb});
      break;
    }
    case Coll::Gather: {
      if (isRoot) {
        if (c_.inplace) {
          GBuf* a = junk("in-place recvbuff", size_t(n) * cb);
          BytePattern(r, c_.seed).fill(a->data + size_t(r) * cb, 0, cb);
          im.sendp = a->data + size_t(r) * cb;
          im.recvp = a->data;
          setOut(a, 0, size_t(n) * cb);
        } else {
          im.sendp = pattern("sendbuff", cb)->data;
          GBuf* rb = junk("recvbuff", size_t(n) * cb);
          im.recvp = rb->data;
          setOut(rb, 0, size_t(n) * cb);
        }
        for (int q = 0; q < n; ++q) im.segs.push_back({q, 0, cb});
      } else {
        im.sendp = pattern("sendbuff", cb)->data;
        if (c_.seed & 1)
          im.recvp = nullptr;  // "recvbuff is ignored off root"
        else
          im.recvp = junk("off-root recvbuff (must stay untouched)", size_t(n) * cb)->data;
      }
      break;
    }
    case Coll::AllToAll: {
      if (c_.inplace) {
        GBuf* a = pattern("in-place buffer", size_t(n) * cb);
        im.sendp = im.recvp = a->data;
        setOut(a, 0, size_t(n) * cb);
      } else {
        im.sendp = pattern("sendbuff", size_t(n) * cb)->data;
        GBuf* rb = junk("recvbuff", size_t(n) * cb);
        im.recvp = rb->data;
        setOut(rb, 0, size_t(n) * cb);
      }
      for (int q = 0; q < n; ++q) im.segs.push_back({q, size_t(r) * cb, cb});
      break;
    }
    case Coll::SendRecv: {
      const int prev = (r + n - 1) % n;
      size_t blocks = 1;
      if (c_.p2p == P2P::Pairwise) blocks = size_t(n);
      if (c_.p2p == P2P::MultiSamePeer) blocks = 2;
      im.sendp = pattern("sendbuff", blocks * cb)->data;
      GBuf* rb = junk("recvbuff", blocks * cb);
      im.recvp = rb->data;
      setOut(rb, 0, blocks * cb);
      switch (c_.p2p) {
        case P2P::Ring:
        case P2P::RingUngrouped: im.segs.push_back({prev, 0, cb}); break;
        case P2P::Self: im.segs.push_back({r, 0, cb}); break;
        case P2P::MultiSamePeer: im.segs.push_back({prev, 0, 2 * cb}); break;
        case P2P::Pairwise:
          for (int q = 0; q < n; ++q) im.segs.push_back({q, size_t(r) * cb, cb});
          break;
        default: break;
      }
      break;
    }
    case Coll::Barrier: im.lateRank = int(c_.seed % unsigned(n)); break;
    default: *err = header() + " unknown collective"; return false;
  }
  for (auto& b : im.bufs)
    if (!(b.get() == im.out && im.outOff == 0 && im.outLen == b->bytes)) b->snapshot();
  return true;
}

chorusResult_t CaseRun::launch(chorusStream_t s) {
  Impl& im = *impl_;
  const chorusDataType_t t = c_.type;
  const size_t cnt = c_.count;
  switch (c_.coll) {
    case Coll::AllReduce: return chorusAllReduce(im.sendp, im.recvp, cnt, t, im.redop, comm_, s);
    case Coll::Broadcast: return chorusBroadcast(im.sendp, im.recvp, cnt, t, c_.root, comm_, s);
    case Coll::Reduce: return chorusReduce(im.sendp, im.recvp, cnt, t, im.redop, c_.root, comm_, s);
    case Coll::AllGather: return chorusAllGather(im.sendp, im.recvp, cnt, t, comm_, s);
    case Coll::ReduceScatter:
      return chorusReduceScatter(im.sendp, im.recvp, cnt, t, im.redop, comm_, s);
    case Coll::Scatter: return chorusScatter(im.sendp, im.recvp, cnt, t, c_.root, comm_, s);
    case Coll::Gather: return chorusGather(im.sendp, im.recvp, cnt, t, c_.root, comm_, s);
    case Coll::AllToAll: return chorusAllToAll(im.sendp, im.recvp, cnt, t, comm_, s);
    case Coll::Barrier: {
      if (!c_.timedBarrier || s != nullptr || nranks_ == 1) return chorusBarrier(comm_, s);
      chorusResult_t res = chorusBarrier(comm_, s);  // line everybody up first
      if (res != chorusSuccess) return res;
      const double t0 = nowSeconds();
      if (rank_ == im.lateRank) std::this_thread::sleep_for(std::chrono::milliseconds(150));
      res = chorusBarrier(comm_, s);
      im.barrierSeconds = nowSeconds() - t0;
      im.timed = true;
      return res;
    }
    case Coll::SendRecv: {
      const int n = nranks_, r = rank_;
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      const size_t cb = cnt * typeSize(t);
      const uint8_t* sb = static_cast<const uint8_t*>(im.sendp);
      uint8_t* rb = static_cast<uint8_t*>(im.recvp);
      chorusResult_t first = chorusSuccess;
      auto keep = [&](chorusResult_t res) {
        if (first == chorusSuccess && res != chorusSuccess) first = res;
      };
      if (c_.p2p == P2P::RingUngrouped) {
        if (r % 2 == 0) {
          keep(chorusSend(sb, cnt, t, next, comm_, s));
          if (first == chorusSuccess) keep(chorusRecv(rb, cnt, t, prev, comm_, s));
        } else {
          keep(chorusRecv(rb, cnt, t, prev, comm_, s));
          if (first == chorusSuccess) keep(chorusSend(sb, cnt, t, next, comm_, s));
        }
        return first;
      }
      keep(chorusGroupStart());
      if (first != chorusSuccess) return first;
      switch (c_.p2p) {
        case P2P::Ring:
          keep(chorusSend(sb, cnt, t, next, comm_, s));
          keep(chorusRecv(rb, cnt, t, prev, comm_, s));
          break;
        case P2P::Self:
          keep(chorusSend(sb, cnt, t, r, comm_, s));
          keep(chorusRecv(rb, cnt, t, r, comm_, s));
          break;
        case P2P::MultiSamePeer:
          keep(chorusRecv(rb, cnt, t, prev, comm_, s));
          keep(chorusRecv(rb + cb, cnt, t, prev, comm_, s));
          keep(chorusSend(sb, cnt, t, next, comm_, s));
          keep(chorusSend(sb + cb, cnt, t, next, comm_, s));
          break;
        case P2P::Pairwise:
          // Start with the next rank so not every rank talks to rank 0 first.
          for (int k = 0; k < n; ++k) {
            const int p = (r + 1 + k) % n;
            keep(chorusSend(sb + size_t(p) * cb, cnt, t, p, comm_, s));
            keep(chorusRecv(rb + size_t(p) * cb, cnt, t, p, comm_, s));
          }
          break;
        default: break;
      }
      keep(chorusGroupEnd());  // always close the group
      return first;
    }
    default: return chorusInvalidArgument;
  }
}

// Formats element j of a buffer of type t as "value (0xbits)".
static std::string fmtElem(chorusDataType_t t, const uint8_t* p) {
  std::string s;
  withCodec(t, [&](auto codec) {
    using C = decltype(codec);
    typename C::Storage v;
    std::memcpy(&v, p, sizeof v);
    uint64_t bits = 0;
    std::memcpy(&bits, p, sizeof v);
    if (C::kFloat)
      s = fmt("%.9g (0x%0*llx)", C::dec(v), int(2 * sizeof v), (unsigned long long)bits);
    else
      s = fmt("%lld (0x%0*llx)", (long long)(int64_t)C::dec(v), int(2 * sizeof v),
              (unsigned long long)bits);
  });
  return s;
}

static std::string fmtBytes(const uint8_t* p, size_t n) {
  std::string s = "0x";
  for (size_t k = 0; k < n; ++k) s += fmt("%02x", p[k]);
  return s;
}

static constexpr int kMaxShown = 5;

// Compares the output region of a reducing collective element by element.
static size_t checkReduced(const Case& c, int rank, int nranks, const uint8_t* out, size_t count,
                           size_t giBase, std::string* detail) {
  (void)rank;
  size_t bad = 0;
  const bool sgn = isSignedType(c.type);
  const int n = nranks;
  const bool pow2 = (n & (n - 1)) == 0;
  withCodec(c.type, [&](auto codec) {
    using C = decltype(codec);
    using S = typename C::Storage;
    const double u = C::kFloat ? std::ldexp(1.0, -(C::kMant + 1)) : 0.0;
    for (size_t j = 0; j < count; ++j) {
      const size_t gi = giBase + j;
      int64_t sum = 0, prod = 1, mx = INT64_MIN, mn = INT64_MAX, asum = 0;
      for (int q = 0; q < n; ++q) {
        const int64_t v = genValue(c.op, sgn, q, gi, c.seed);
        sum += v;
        prod *= v;
        mx = std::max(mx, v);
        mn = std::min(mn, v);
        asum += v < 0 ? -v : v;
      }
      const bool expNan = c.nan && C::kFloat && gi % 5 == 2;
      double exact = 0, tol = 0;
      switch (c.op) {
        case Op::Sum: exact = double(sum); break;
        case Op::Prod: exact = double(prod); break;
        case Op::Max: exact = double(mx); break;
        case Op::Min: exact = double(mn); break;
        case Op::PreMulSum: exact = double(2 * sum); break;
        case Op::Avg:
          if (!C::kFloat) {
            exact = double(sum / n);  // C++ integer division truncates toward zero
          } else {
            exact = double(sum) / n;
            if (!pow2) tol = 2.0 * (n + 3) * u * (double(asum) / n);
          }
          break;
        default: break;
      }
      S gotS;
      std::memcpy(&gotS, out + j * sizeof(S), sizeof(S));
      const double got = C::dec(gotS);
      bool ok;
      if (expNan) {
        ok = std::isnan(got);
      } else if (tol > 0) {
        ok = !std::isnan(got) && std::fabs(got - exact) <= tol;
      } else {
        S expS = C::enc(exact);  // exact values: rounding is the identity
        ok = (got == C::dec(expS));
      }
      if (!ok) {
        if (bad < size_t(kMaxShown)) {
          std::string e = expNan ? std::string("NaN")
                                 : (tol > 0 ? fmt("%.9g +- %.3g", exact, tol) : fmt("%.9g", exact));
          *detail += fmt("\n    element %zu: expected %s, got %s", j, e.c_str(),
                         fmtElem(c.type, out + j * sizeof(S)).c_str());
        }
        ++bad;
      }
    }
  });
  return bad;
}

bool CaseRun::verify(std::string* err) {
  Impl& im = *impl_;
  std::string detail;
  bool ok = true;
  // 1. Guards of every buffer.
  for (auto& b : im.bufs) {
    std::string g = b->checkGuards();
    if (!g.empty()) {
      ok = false;
      detail += "\n  " + g;
    }
  }
  // 2. Everything outside the output region unchanged.
  for (auto& b : im.bufs) {
    if (!b->hasSnap || b->bytes == 0) continue;
    size_t lo = 0, hi = 0;  // skip [lo, hi)
    if (b.get() == im.out) {
      lo = im.outOff;
      hi = im.outOff + im.outLen;
    }
    const bool same = std::memcmp(b->data, b->snap.data(), lo) == 0 &&
                      std::memcmp(b->data + hi, b->snap.data() + hi, b->bytes - hi) == 0;
    if (same) continue;
    size_t shown = 0, changed = 0;
    for (size_t k = 0; k < b->bytes; ++k) {
      if (k >= lo && k < hi) {
        k = hi - 1;
        continue;
      }
      if (b->data[k] != b->snap[k]) {
        ++changed;
        if (shown < 3) {
          detail += fmt("\n  %s: byte %zu (element %zu) changed: was 0x%02x, now 0x%02x", b->name,
                        k, k / typeSize(c_.type), b->snap[k], b->data[k]);
          ++shown;
        }
      }
    }
    if (changed) {
      ok = false;
      if (hi == 0)
        detail +=
            fmt("\n  %s: %zu of its %zu bytes changed; it is input only and must stay "
                "unchanged",
                b->name, changed, b->bytes);
      else
        detail += fmt("\n  %s: %zu bytes changed outside the output range [%zu, %zu) of %zu",
                      b->name, changed, lo, hi, b->bytes);
    }
  }
  // 3. The output region.
  if (im.out && im.outLen > 0) {
    const uint8_t* o = im.out->data + im.outOff;
    if (isReducing(c_.coll)) {
      std::string d;
      size_t bad = checkReduced(c_, rank_, nranks_, o, c_.count, im.giBase, &d);
      if (bad) {
        ok = false;
        detail += fmt("\n  %s: %zu of %zu elements wrong:", im.out->name, bad, c_.count) + d;
      }
    } else {
      std::unique_ptr<uint8_t[]> exp(new uint8_t[im.outLen]);
      size_t pos = 0;
      for (const Seg& sg : im.segs) {
        BytePattern(sg.rank, c_.seed).fill(exp.get() + pos, sg.off, sg.len);
        pos += sg.len;
      }
      if (pos != im.outLen) {
        ok = false;
        detail += fmt("\n  checker bug: expected %zu bytes, built %zu", im.outLen, pos);
      } else if (std::memcmp(exp.get(), o, im.outLen) != 0) {
        ok = false;
        const size_t es = typeSize(c_.type);
        const size_t cb = c_.count * es;
        size_t bad = 0;
        std::string d;
        for (size_t e = 0; e * es < im.outLen; ++e) {
          if (std::memcmp(exp.get() + e * es, o + e * es, es) != 0) {
            if (bad < size_t(kMaxShown)) {
              // Name the block (source rank) the element belongs to when there are blocks.
              std::string where;
              if (cb && im.outLen > cb)
                where = fmt(" (block %zu, element %zu)", e * es / cb, (e * es % cb) / es);
              // Which rank's data did we get? Try to identify a wrong source.
              d += fmt("\n    element %zu%s: expected %s, got %s", e, where.c_str(),
                       fmtBytes(exp.get() + e * es, es).c_str(), fmtBytes(o + e * es, es).c_str());
            }
            ++bad;
          }
        }
        detail += fmt("\n  %s: %zu of %zu elements wrong:", im.out->name, bad, im.outLen / es) + d;
      }
    }
  }
  // 4. Barrier timing.
  if (im.timed && nranks_ > 1 && rank_ != im.lateRank && im.barrierSeconds < 0.05) {
    ok = false;
    detail += fmt("\n  barrier returned after %.1f ms although rank %d entered it 150 ms late",
                  im.barrierSeconds * 1e3, im.lateRank);
  }
  if (!ok) *err = header() + detail;
  return ok;
}

// ---------------------------------------------------------------------------------------
// Case lists
// ---------------------------------------------------------------------------------------

static int nranksIndex(int n) {
  static const int kN[] = {1, 2, 3, 4, 5, 8};
  for (int k = 0; k < 6; ++k)
    if (kN[k] == n) return k;
  return n % 6;
}

template <typename T>
static bool contains(const std::vector<T>& v, T x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<Case> buildCases(Coll coll, int n, const MatrixOptions& o) {
  std::vector<Case> out;
  uint32_t idx = 0;
  auto push = [&](Case c) {
    c.coll = coll;
    c.seed = idx + 1;
    ++idx;
    out.push_back(c);
  };
  std::vector<bool> places;
  if (o.outOfPlace) places.push_back(false);
  if (o.inplace) places.push_back(true);
  const int k = nranksIndex(n);

  if (coll == Coll::Barrier) {
    if (n > 1)
      for (int i = 0; i < 3; ++i) {
        Case c;
        c.timedBarrier = true;
        push(c);
      }
    for (int i = 0; i < 20; ++i) push(Case{});
    return out;
  }

  if (isReducing(coll)) {
    for (chorusDataType_t t : o.types)
      for (Op op : o.ops)
        for (size_t sz : o.sizes)
          for (bool ip : places) {
            Case c;
            c.type = t;
            c.op = op;
            c.count = sz;
            c.inplace = ip;
            c.root = int(idx % unsigned(n));
            push(c);
          }
    if (o.big != BigMode::None) {
      for (size_t ti = 0; ti < kMatrixTypes.size(); ++ti) {
        const chorusDataType_t t = kMatrixTypes[ti];
        if (!contains(o.types, t)) continue;
        for (size_t oi = 0; oi < kAllOps.size(); ++oi) {
          const Op op = kAllOps[oi];
          if (!contains(o.ops, op)) continue;
          for (bool ip : {false, true}) {
            if (!contains(places, ip)) continue;
            if (o.big == BigMode::Subset && (oi != (ti + size_t(k) + 3 * size_t(o.rotation)) % 6 ||
                                             ip != bool((ti + size_t(o.rotation)) % 2)))
              continue;
            Case c;
            c.type = t;
            c.op = op;
            c.count = o.bigCount;
            c.inplace = ip;
            c.root = int((ti + k) % unsigned(n));
            push(c);
          }
        }
      }
    }
    for (size_t mid : o.midSizes) {
      for (size_t ti = 0; ti < o.types.size() && !o.ops.empty(); ++ti) {
        Case c;
        c.type = o.types[ti];
        c.op = o.ops[(ti + size_t(k) + 3 * size_t(o.rotation)) % o.ops.size()];
        c.count = mid;
        c.inplace = ((ti + size_t(k) + size_t(o.rotation)) % 2) ? o.inplace : !o.outOfPlace;
        c.root = int((ti + size_t(k)) % unsigned(n));
        push(c);
      }
    }
    if (o.nanCases) {
      for (chorusDataType_t t : o.types) {
        if (!isFloatType(t)) continue;
        for (size_t oi = 0; oi < o.ops.size(); ++oi) {
          Case c;
          c.type = t;
          c.op = o.ops[oi];
          c.count = 1023;
          c.nan = true;
          c.inplace = (oi % 2) && o.inplace;
          if (!o.outOfPlace) c.inplace = true;
          c.root = int(idx % unsigned(n));
          push(c);
        }
      }
    }
    return out;
  }

  if (coll == Coll::SendRecv) {
    for (chorusDataType_t t : o.types)
      for (size_t sz : o.sizes)
        for (int v = 0; v < int(P2P::kCount); ++v) {
          if (P2P(v) == P2P::RingUngrouped && n == 1) continue;  // would be a blocking self-send
          Case c;
          c.type = t;
          c.count = sz;
          c.p2p = P2P(v);
          push(c);
        }
    for (size_t mid : o.midSizes)
      for (size_t ti = 0; ti < o.types.size(); ++ti) {
        const P2P p = P2P((ti + size_t(k)) % size_t(P2P::kCount));
        if (p == P2P::RingUngrouped && n == 1) continue;
        Case c;
        c.type = o.types[ti];
        c.count = mid;
        c.p2p = p;
        push(c);
      }
    if (o.big != BigMode::None) {
      for (int v = 0; v < int(P2P::kCount); ++v) {
        const P2P p = P2P(v);
        if (p == P2P::RingUngrouped && n == 1) continue;
        const size_t slot = (p == P2P::Ring) ? 0 : (p == P2P::Pairwise ? 1 : 99);
        if (o.big == BigMode::Subset && slot == 99) continue;
        const size_t sl = slot == 99 ? size_t(v) : (o.rotation ? 1 - slot : slot);
        const chorusDataType_t t = kMatrixTypes[(2 * size_t(k) + sl) % 7];
        if (!contains(o.types, t)) continue;
        Case c;
        c.type = t;
        c.count = o.bigCount;
        c.p2p = p;
        push(c);
      }
    }
    return out;
  }

  // Non-reducing collectives: bytes of every type, every root.
  const int nroots = hasRoot(coll) ? n : 1;
  for (chorusDataType_t t : o.types)
    for (size_t sz : o.sizes)
      for (bool ip : places)
        for (int root = 0; root < nroots; ++root) {
          Case c;
          c.type = t;
          c.count = sz;
          c.inplace = ip;
          c.root = root;
          push(c);
        }
  for (size_t mid : o.midSizes)
    for (size_t ti = 0; ti < o.types.size(); ++ti) {
      Case c;
      c.type = o.types[ti];
      c.count = mid;
      c.inplace = ((ti + size_t(k) + size_t(o.rotation)) % 2) ? o.inplace : !o.outOfPlace;
      c.root = hasRoot(coll) ? int((ti + size_t(k)) % unsigned(n)) : 0;
      push(c);
    }
  if (o.big != BigMode::None) {
    for (size_t ti = 0; ti < kMatrixTypes.size(); ++ti) {
      const chorusDataType_t t = kMatrixTypes[ti];
      if (!contains(o.types, t)) continue;
      for (bool ip : {false, true}) {
        if (!contains(places, ip)) continue;
        if (o.big == BigMode::Subset) {
          // out-of-place with type (2k) % 7, in-place with type (2k+1) % 7
          const size_t want = (2 * size_t(k) + ((ip ? 1 : 0) ^ size_t(o.rotation))) % 7;
          if (ti != want) continue;
        }
        Case c;
        c.type = t;
        c.count = o.bigCount;
        c.inplace = ip;
        c.root = hasRoot(coll) ? (k + int(ti)) % n : 0;
        push(c);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Runners
// ---------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------
// The plan check: after every call runCase checks, through the library's test hook
// (src/api/test_hooks.h), that what ran is what the plan said, and that a forced
// CHORUS_ALGO / CHORUS_PROTO (one name) ran exactly that, or fell back only where this
// file's own table says it cannot run the call.
// ---------------------------------------------------------------------------------------

static std::string lowerText(const char* s) {
  std::string out = s ? s : "";
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// One algorithm or protocol forced by the environment ("" where none, or a list).
static std::string forcedName(const char* var) {
  const std::string v = lowerText(std::getenv(var));
  if (v.empty() || v.find_first_of(",^") != std::string::npos) return "";
  return v;
}

static size_t llThresholdBytes() {
  const char* e = std::getenv("CHORUS_LL_THRESHOLD");
  if (e == nullptr || *e == '\0') return 16 << 10;
  char* end = nullptr;
  size_t v = std::strtoull(e, &end, 10);
  if (end && (*end == 'K' || *end == 'k')) v <<= 10;
  if (end && (*end == 'M' || *end == 'm')) v <<= 20;
  return v;
}

// Whether algorithm `a` (forced) cannot run this call, by what the algorithms can do
// (docs/ARCHITECTURE.md "Algorithms"), independently of the library's planner.
// `allShm`, `net`: the communicator's facts (chorusTestPlanRecord): one host joined by shared
// memory; some pair joined over a network.
static bool algoCannotRun(const std::string& a, const std::string& coll, size_t bytes, int n,
                          bool allShm, bool net) {
  const size_t ll = llThresholdBytes();
  const bool pow2 = (n & (n - 1)) == 0;
  if (a == "ring")
    return coll == "scatter" || coll == "gather" || coll == "all_to_all" || coll == "barrier";
  if (a == "tree") return coll != "all_reduce";
  if (a == "doubling") return coll != "all_reduce" || bytes > ll;
  if (a == "halving") {
    if (coll == "all_reduce") return false;
    if (coll == "reduce_scatter" || coll == "all_gather")
      return !pow2 || (net && bytes > (128u << 10));
    return true;
  }
  if (a == "direct") {
    if (coll == "reduce") return true;
    if (coll == "all_reduce" || coll == "broadcast" || coll == "all_gather") return bytes > ll;
    if (coll == "reduce_scatter") return bytes > ll || !allShm;
    return false;  // scatter, gather, all-to-all, barrier run direct
  }
  return false;
}

static bool protoCannotRun(const std::string& p, const std::string& coll, size_t bytes,
                           bool allShm) {
  const size_t ll = llThresholdBytes();
  if (p == "simple") return coll == "barrier";
  if (p == "ll") {
    if (coll == "barrier") return false;
    if (coll == "reduce") return true;
    if (coll == "reduce_scatter" || coll == "all_to_all" || coll == "gather")
      return bytes > ll || !allShm;
    if (coll == "scatter") return bytes > std::min<size_t>(ll, 1024) || !allShm;
    return bytes > ll;
  }
  return false;
}

// all_gather, all_reduce, broadcast; atomic: thread ranks (coll_threads, coll_stress) count
// at once.
static std::atomic<size_t> boardRuns[3] = {{0}, {0}, {0}};

size_t boardRunsSeen(Coll c) {
  return c == Coll::AllGather   ? boardRuns[0].load()
         : c == Coll::AllReduce ? boardRuns[1].load()
         : c == Coll::Broadcast ? boardRuns[2].load()
                                : 0;
}

static std::atomic<size_t> pairHalvingRuns{0};

size_t pairHalvingRunsSeen() { return pairHalvingRuns.load(); }

bool checkPlanRan(const Case& c, chorusComm_t comm, int nranks, std::string* err) {
  if (nranks < 2 || c.coll == Coll::SendRecv || (c.count == 0 && c.coll != Coll::Barrier))
    return true;  // no plan: one rank, point-to-point, or nothing to move
  chorusTestPlanRecord r{};
  if (chorusTestLastPlan(comm, &r) != chorusSuccess) {
    *err = "chorusTestLastPlan failed";
    return false;
  }
  const std::string coll = collName(c.coll);
  const std::string what =
      fmt("plan of %s (%zu B): %s/%s route %s%s%s; ran %s/%s path %s", r.coll, r.bytes, r.planAlgo,
          r.planProto, r.planRoute, r.planCma ? " (CMA allowed)" : "",
          r.planFallback ? " (fallback)" : "", r.ranAlgo, r.ranProto, r.ranPath);
  if (coll != r.coll || !r.ran) {
    *err = "the last plan is not this call's, or nothing recorded running it: " + what;
    return false;
  }
  const std::string path = r.ranPath;
  // The shared boards: only where planned, only as direct/Simple, only these three.
  if (r.planBoard != r.ranBoard ||
      (r.ranBoard && (std::string(r.ranAlgo) != "direct" || std::string(r.ranProto) != "Simple" ||
                      (coll != "all_gather" && coll != "all_reduce" && coll != "broadcast")))) {
    *err = fmt("the shared boards (planned %d, ran %d) disagree with the plan: ", r.planBoard,
               r.ranBoard) +
           what;
    return false;
  }
  if (r.ranBoard) ++boardRuns[coll == "all_gather" ? 0 : coll == "all_reduce" ? 1 : 2];
  // Halving on the pair cells: only where planned, only as halving/Simple, only all-reduce.
  if (r.planPairCells != r.ranPairCells ||
      (r.ranPairCells && (std::string(r.ranAlgo) != "halving" ||
                          std::string(r.ranProto) != "Simple" || coll != "all_reduce"))) {
    *err = fmt("halving on the pair cells (planned %d, ran %d) disagrees with the plan: ",
               r.planPairCells, r.ranPairCells) +
           what;
    return false;
  }
  if (r.ranPairCells) ++pairHalvingRuns;
  // The ordered exchange (reproducible mode's plan, and the default crowded same-host
  // all-reduce): it runs exactly where planned.
  if (r.planOrdered != r.ranOrdered) {
    *err = fmt("the ordered exchange (planned %d, ran %d) disagrees with the plan: ", r.planOrdered,
               r.ranOrdered) +
           what;
    return false;
  }
  if (path == "FIFO") {
    if (std::string(r.ranAlgo) != r.planAlgo || std::string(r.ranProto) != r.planProto) {
      *err = "ran something else than the plan: " + what;
      return false;
    }
  } else if (std::string(r.planRoute) != "single copy" || std::string(r.ranAlgo) != "direct" ||
             (path == "CMA" && !r.planCma)) {
    *err = "single copy ran outside the plan: " + what;
    return false;
  }
  const std::string fa = forcedName("CHORUS_ALGO"), fp = forcedName("CHORUS_PROTO");
  const bool forced = !fa.empty() || !fp.empty() || std::getenv("CHORUS_ALGO") != nullptr;
  if (r.planFallback && !forced) {
    *err = "a fallback with no restriction set: " + what;
    return false;
  }
  if (!fa.empty()) {
    if (r.planFallback && !algoCannotRun(fa, coll, r.bytes, nranks, r.allShm, r.networkHops)) {
      *err = "CHORUS_ALGO=" + fa + " can run this call but the plan fell back: " + what;
      return false;
    }
    if (!r.planFallback && (lowerText(r.ranAlgo) != fa || (fa != "direct" && path != "FIFO"))) {
      *err = "CHORUS_ALGO=" + fa + " is not what ran: " + what;
      return false;
    }
  }
  if (!fp.empty()) {
    if (r.planFallback && !protoCannotRun(fp, coll, r.bytes, r.allShm)) {
      *err = "CHORUS_PROTO=" + fp + " can run this call but the plan fell back: " + what;
      return false;
    }
    if (!r.planFallback && lowerText(r.ranProto) != fp) {
      *err = "CHORUS_PROTO=" + fp + " is not what ran: " + what;
      return false;
    }
  }
  return true;
}

bool runCase(const Case& c, chorusComm_t comm, chorusStream_t stream, std::string* err,
             bool* callFailed) {
  *callFailed = false;
  CaseRun run(c, comm);
  if (!run.prepare(err)) {
    *callFailed = true;
    return false;
  }
  chorusResult_t res = run.launch(stream);
  if (res != chorusSuccess) {
    *err = run.header() + " " + callError("the call", res, comm);
    *callFailed = true;
    return false;
  }
  if (stream) {
    res = chorusStreamSynchronize(stream);
    if (res != chorusSuccess) {
      *err = run.header() + " " + callError("chorusStreamSynchronize", res, comm);
      *callFailed = true;
      return false;
    }
  }
  if (!run.verify(err)) return false;
  if (!checkPlanRan(c, comm, run.nranks(), err)) {
    *err = run.header() + " " + *err;
    return false;
  }
  return true;
}

RunStats runCases(const std::vector<Case>& cases, chorusComm_t comm, size_t maxMessages) {
  RunStats st;
  const double t0 = nowSeconds();
  for (const Case& c : cases) {
    std::string err;
    bool callFailed = false;
    ++st.cases;
    if (!runCase(c, comm, nullptr, &err, &callFailed)) {
      ++st.failed;
      if (st.messages.size() < maxMessages) st.messages.push_back(err);
      if (callFailed) {
        st.stopped = true;
        st.messages.push_back(fmt("(stopped after this call error; %zu of %zu cases not run)",
                                  cases.size() - st.cases, cases.size()));
        break;
      }
    }
  }
  st.seconds = nowSeconds() - t0;
  return st;
}

// ---------------------------------------------------------------------------------------
// Composite checks
// ---------------------------------------------------------------------------------------

// Runs a few cases on `comm`; appends failures to *err.
static bool runSome(const std::vector<Case>& cases, chorusComm_t comm, const char* what,
                    std::string* err) {
  bool ok = true;
  for (const Case& c : cases) {
    std::string e;
    bool callFailed = false;
    if (!runCase(c, comm, nullptr, &e, &callFailed)) {
      ok = false;
      *err += fmt("\n%s: ", what) + e;
      if (callFailed) return false;
    }
  }
  return ok;
}

static std::vector<Case> smallMix(int newRanks) {
  std::vector<Case> v;
  Case c;
  c.coll = Coll::AllReduce;
  c.type = chorusFloat32;
  c.op = Op::Sum;
  c.count = 1023;
  c.seed = 11;
  v.push_back(c);
  c.coll = Coll::AllReduce;
  c.type = chorusBfloat16;
  c.op = Op::Avg;
  c.count = 7;
  c.inplace = true;
  c.seed = 12;
  v.push_back(c);
  c = Case{};
  c.coll = Coll::Broadcast;
  c.type = chorusInt8;
  c.count = 1023;
  c.root = newRanks - 1;
  c.seed = 13;
  v.push_back(c);
  c = Case{};
  c.coll = Coll::AllGather;
  c.type = chorusInt64;
  c.count = 7;
  c.seed = 14;
  v.push_back(c);
  c = Case{};
  c.coll = Coll::SendRecv;
  c.type = chorusInt32;
  c.count = 1023;
  c.p2p = P2P::Pairwise;
  c.seed = 15;
  v.push_back(c);
  return v;
}

bool runSplitCheck(chorusComm_t comm, std::string* err) {
  int n = 0, r = -1;
  if (chorusCommCount(comm, &n) != chorusSuccess || chorusCommUserRank(comm, &r) != chorusSuccess) {
    *err = "split: chorusCommCount/UserRank failed";
    return false;
  }
  const std::string hdr = fmt("[split nranks=%d rank=%d]", n, r);
  bool ok = true;
  auto excludedRank = [&](int q) { return n >= 3 && q == n - 1; };
  const bool excluded = excludedRank(r);
  const int color = excluded ? CHORUS_SPLIT_NOCOLOR : r % 2;
  const int key = n - r;                                             // reversed order
  chorusComm_t nc = reinterpret_cast<chorusComm_t>(uintptr_t(0x1));  // must be overwritten
  chorusResult_t res = chorusCommSplit(comm, color, key, &nc, nullptr);
  if (res != chorusSuccess) {
    *err = hdr + " " + callError("chorusCommSplit(color even/odd, key reversed)", res, comm);
    return false;
  }
  if (excluded) {
    if (nc != nullptr) {
      *err += hdr + fmt(" CHORUS_SPLIT_NOCOLOR must give *newcomm == NULL, got %p", (void*)nc);
      ok = false;
    }
  } else if (nc == nullptr || nc == reinterpret_cast<chorusComm_t>(uintptr_t(0x1))) {
    *err += hdr + " chorusCommSplit returned success but no communicator";
    return false;
  } else {
    std::vector<int> members;  // old ranks in new-rank order: key ascending = old rank descending
    for (int q = n - 1; q >= 0; --q)
      if (!excludedRank(q) && q % 2 == color) members.push_back(q);
    const int expRank = int(std::find(members.begin(), members.end(), r) - members.begin());
    int nn = -1, nr = -1;
    chorusCommCount(nc, &nn);
    chorusCommUserRank(nc, &nr);
    if (nn != int(members.size()) || nr != expRank) {
      *err += hdr + fmt(" new communicator (color %d): size %d rank %d, expected size %zu rank %d",
                        color, nn, nr, members.size(), expRank);
      ok = false;
    } else {
      // All-reduce of the old ranks and all-gather of them (shows the order).
      int32_t mine = r, sum = -1;
      res = chorusAllReduce(&mine, &sum, 1, chorusInt32, chorusSum, nc, nullptr);
      int32_t expSum = 0;
      for (int q : members) expSum += q;
      if (res != chorusSuccess) {
        *err += hdr + " " + callError("chorusAllReduce on the split communicator", res, nc);
        ok = false;
      } else if (sum != expSum) {
        *err += hdr +
                fmt(" all-reduce of old ranks on the split comm: got %d expected %d", sum, expSum);
        ok = false;
      }
      std::vector<int32_t> all(members.size(), -1);
      res = chorusAllGather(&mine, all.data(), 1, chorusInt32, nc, nullptr);
      if (res != chorusSuccess) {
        *err += hdr + " " + callError("chorusAllGather on the split communicator", res, nc);
        ok = false;
      } else {
        for (size_t i = 0; i < members.size(); ++i)
          if (all[i] != members[i]) {
            *err += hdr + fmt(" all-gather of old ranks: new rank %zu holds old rank %d, expected "
                              "%d (key reversal)",
                              i, all[i], members[i]);
            ok = false;
            break;
          }
      }
      if (ok) ok = runSome(smallMix(nn), nc, hdr.c_str(), err);
    }
    res = chorusCommDestroy(nc);
    if (res != chorusSuccess) {
      *err += hdr + " " + callError("chorusCommDestroy(split comm)", res, nc);
      ok = false;
    }
  }
  // Second split: one color, equal keys -> same order as the parent.
  chorusComm_t same = nullptr;
  res = chorusCommSplit(comm, 7, 0, &same, nullptr);
  if (res != chorusSuccess || same == nullptr) {
    *err += hdr + " " + callError("chorusCommSplit(one color, equal keys)", res, comm);
    return false;
  }
  int nn = -1, nr = -1;
  chorusCommCount(same, &nn);
  chorusCommUserRank(same, &nr);
  if (nn != n || nr != r) {
    *err += hdr + fmt(" split with one color and equal keys: size %d rank %d, expected %d %d", nn,
                      nr, n, r);
    ok = false;
  } else {
    ok = runSome(smallMix(n), same, (hdr + " same-color split").c_str(), err) && ok;
  }
  res = chorusCommDestroy(same);
  if (res != chorusSuccess) {
    *err += hdr + " " + callError("chorusCommDestroy(same-color split)", res, same);
    ok = false;
  }
  return ok;
}

bool runStreamCheck(chorusComm_t comm, std::string* err) {
  int n = 0, r = -1;
  chorusCommCount(comm, &n);
  chorusCommUserRank(comm, &r);
  const std::string hdr = fmt("[stream nranks=%d rank=%d]", n, r);
  chorusStream_t s = nullptr;
  chorusResult_t res = chorusStreamCreate(&s);
  if (res != chorusSuccess || s == nullptr) {
    *err = hdr + " " + callError("chorusStreamCreate", res, comm);
    return false;
  }
  bool ok = true;
  auto runBatch = [&](const std::vector<Case>& cases, const char* what) {
    std::vector<std::unique_ptr<CaseRun>> runs;
    for (const Case& c : cases) {
      runs.emplace_back(new CaseRun(c, comm));
      std::string e;
      if (!runs.back()->prepare(&e)) {
        *err += "\n" + hdr + " " + what + ": " + e;
        return false;
      }
    }
    for (auto& run : runs) {
      res = run->launch(s);
      if (res != chorusSuccess) {
        *err += "\n" + hdr + " " + what + ": " + run->header() + " " +
                callError("queuing on a host stream", res, comm);
        chorusStreamSynchronize(s);
        return false;
      }
    }
    res = chorusStreamSynchronize(s);
    if (res != chorusSuccess) {
      *err += "\n" + hdr + " " + what + ": " + callError("chorusStreamSynchronize", res, comm);
      return false;
    }
    res = chorusStreamQuery(s);
    if (res != chorusSuccess) {
      *err += "\n" + hdr + " " + what + ": " +
              callError("chorusStreamQuery after synchronize (expected chorusSuccess)", res, comm);
      return false;
    }
    bool good = true;
    for (auto& run : runs) {
      std::string e;
      if (!run->verify(&e)) {
        *err += "\n" + hdr + " " + what + ": " + e;
        good = false;
      }
    }
    return good;
  };

  // 1. A mix of collectives on one stream.
  std::vector<Case> mix;
  uint32_t seed = 100;
  auto add = [&](Case c) {
    c.seed = seed++;
    mix.push_back(c);
  };
  {
    Case c;
    c.coll = Coll::AllReduce;
    c.type = chorusFloat32;
    c.op = Op::Sum;
    c.count = 1023;
    add(c);
    c.type = chorusBfloat16;
    c.op = Op::PreMulSum;
    c.count = 7;
    c.inplace = true;
    add(c);
    c = Case{};
    c.coll = Coll::Broadcast;
    c.type = chorusInt8;
    c.count = 1023;
    c.root = n - 1;
    add(c);
    c = Case{};
    c.coll = Coll::Reduce;
    c.type = chorusInt32;
    c.op = Op::Max;
    c.count = 1023;
    c.root = 0;
    add(c);
    c = Case{};
    c.coll = Coll::AllGather;
    c.type = chorusFloat16;
    c.count = 7;
    c.inplace = true;
    add(c);
    c = Case{};
    c.coll = Coll::ReduceScatter;
    c.type = chorusInt64;
    c.op = Op::Prod;
    c.count = 1023;
    add(c);
    c = Case{};
    c.coll = Coll::AllToAll;
    c.type = chorusFloat64;
    c.count = 7;
    add(c);
    c = Case{};
    c.coll = Coll::Scatter;
    c.type = chorusUint8;
    c.count = 33;
    c.root = n / 2;
    add(c);
    c = Case{};
    c.coll = Coll::Gather;
    c.type = chorusInt32;
    c.count = 33;
    c.root = (n - 1) / 2;
    add(c);
    // Gathers and scatters of every protocol in one stream: one-line and multi-line LL
    // messages (each block in one), a long LL one, and one past the LL threshold.
    c = Case{};
    c.coll = Coll::Gather;
    c.type = chorusFloat32;
    c.count = 1023;
    c.inplace = true;
    c.root = n - 1;
    add(c);
    c = Case{};
    c.coll = Coll::Scatter;
    c.type = chorusInt64;
    c.count = 1;
    c.inplace = true;
    c.root = 0;
    add(c);
    c = Case{};
    c.coll = Coll::Gather;
    c.type = chorusUint8;
    c.count = 65536 + 3;
    c.root = 0;
    add(c);
    c = Case{};
    c.coll = Coll::Scatter;
    c.type = chorusFloat64;
    c.count = 100;
    c.root = n - 1;
    add(c);
    c = Case{};
    c.coll = Coll::SendRecv;
    c.type = chorusInt8;
    c.count = 1023;
    c.p2p = P2P::Ring;
    add(c);
    c = Case{};
    c.coll = Coll::Barrier;
    add(c);
    c = Case{};
    c.coll = Coll::AllReduce;
    c.type = chorusFloat64;
    c.op = Op::Min;
    c.count = 65536 + 5;
    add(c);
  }
  ok = runBatch(mix, "mixed batch") && ok;

  // 2. Dependent operations: two in-place all-reduces of the same buffer.
  {
    std::vector<int32_t> buf(1023);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = int32_t((i * 7 + size_t(r) * 3) % 11);
    chorusResult_t a =
        chorusAllReduce(buf.data(), buf.data(), buf.size(), chorusInt32, chorusSum, comm, s);
    chorusResult_t b =
        chorusAllReduce(buf.data(), buf.data(), buf.size(), chorusInt32, chorusSum, comm, s);
    chorusResult_t c = chorusStreamSynchronize(s);
    if (a != chorusSuccess || b != chorusSuccess || c != chorusSuccess) {
      *err += "\n" + hdr + " dependent all-reduces: " + callError("first", a, comm) + "; " +
              callError("second", b, comm) + "; " + callError("synchronize", c, comm);
      ok = false;
    } else {
      size_t bad = 0;
      for (size_t i = 0; i < buf.size(); ++i) {
        int32_t sum = 0;
        for (int q = 0; q < n; ++q) sum += int32_t((i * 7 + size_t(q) * 3) % 11);
        if (buf[i] != n * sum) {
          if (bad < 3)
            *err += "\n" + hdr +
                    fmt(" dependent all-reduces: element %zu expected %d got %d "
                        "(ops on one stream must run in order)",
                        i, n * sum, buf[i]);
          ++bad;
        }
      }
      if (bad) ok = false;
    }
  }

  // 3. Many small operations queued at once.
  {
    std::vector<Case> many;
    for (int i = 0; i < 64; ++i) {
      Case c;
      c.coll = Coll::AllReduce;
      c.type = chorusInt32;
      c.op = (i % 3 == 0) ? Op::Max : Op::Sum;
      c.count = 7 + size_t(i);
      c.inplace = i % 2;
      c.seed = 200 + uint32_t(i);
      many.push_back(c);
    }
    ok = runBatch(many, "64 queued all-reduces") && ok;
  }

  res = chorusStreamDestroy(s);
  if (res != chorusSuccess) {
    *err += "\n" + hdr + " " + callError("chorusStreamDestroy", res, comm);
    ok = false;
  }
  return ok;
}

}  // namespace collcheck
