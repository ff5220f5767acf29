// coll_matrix.cc — see coll_matrix.h.
#include "tests/unit/cuda/coll_matrix.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "tests/unit/kernels/reference.h"

namespace collmatrix {
namespace {

enum class C {
  AllReduce,
  Reduce,
  ReduceScatter,
  Broadcast,
  AllGather,
  Scatter,
  Gather,
  AllToAll,
  SendRecv,
  Barrier,
  AllReduceInPlace,
  AllGatherInPlace,
  ReduceScatterInPlace
};
const char* name(C c) {
  static const char* n[] = {"all_reduce",
                            "reduce",
                            "reduce_scatter",
                            "broadcast",
                            "all_gather",
                            "scatter",
                            "gather",
                            "all_to_all",
                            "send_recv",
                            "barrier",
                            "all_reduce(in place)",
                            "all_gather(in place)",
                            "reduce_scatter(in place)"};
  return n[static_cast<int>(c)];
}

// The input value of rank r, block b, element i: small integers (1..5; 1..2 for prod).
double gen(int r, int b, size_t i, chorusRedOp_t op) {
  if (op == chorusProd) return 1 + static_cast<double>((r + b + i) % 2);
  return 1 + static_cast<double>((r * 7 + b * 5 + i * 3) % 5);
}

void put(chorusDataType_t t, double v, unsigned char* p) {
  switch (t) {
    case chorusInt8: {
      int8_t x = static_cast<int8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case chorusUint8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case chorusInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case chorusUint32: {
      uint32_t x = static_cast<uint32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case chorusInt64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case chorusUint64: {
      uint64_t x = static_cast<uint64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case chorusFloat16: {
      uint16_t x = ref::doubleToHalf(v);
      std::memcpy(p, &x, 2);
      break;
    }
    case chorusBfloat16: {
      uint16_t x = ref::doubleToBf16(v);
      std::memcpy(p, &x, 2);
      break;
    }
    case chorusFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case chorusFloat64: std::memcpy(p, &v, 8); break;
    default: break;
  }
}

double get(chorusDataType_t t, const unsigned char* p) {
  switch (t) {
    case chorusInt8: {
      int8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case chorusUint8: {
      uint8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case chorusInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case chorusUint32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case chorusInt64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case chorusUint64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case chorusFloat16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return ref::halfToDouble(x);
    }
    case chorusBfloat16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return ref::bf16ToDouble(x);
    }
    case chorusFloat32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case chorusFloat64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
    default: return NAN;
  }
}

bool isFloat(chorusDataType_t t) {
  return t == chorusFloat16 || t == chorusBfloat16 || t == chorusFloat32 || t == chorusFloat64;
}

// The reduction over ranks of block b, element i.
double reduced(int n, int b, size_t i, chorusRedOp_t op, chorusDataType_t t) {
  double acc = gen(0, b, i, op);
  for (int r = 1; r < n; ++r) {
    const double v = gen(r, b, i, op);
    if (op == chorusSum || op == chorusAvg) acc += v;
    if (op == chorusProd) acc *= v;
    if (op == chorusMax) acc = std::max(acc, v);
    if (op == chorusMin) acc = std::min(acc, v);
  }
  if (op == chorusAvg) acc = isFloat(t) ? acc / n : std::floor(acc / n);
  return acc;
}

bool close(chorusDataType_t t, chorusRedOp_t op, double got, double want) {
  if (op != chorusAvg || !isFloat(t)) return got == want;
  const double tol = (t == chorusFloat16 || t == chorusBfloat16) ? 2e-2
                     : t == chorusFloat32                        ? 1e-5
                                                                 : 1e-12;
  return std::fabs(got - want) <= tol * std::fabs(want);
}

struct Case {
  C coll;
  chorusDataType_t type;
  chorusRedOp_t op;
  int root;
};

class Checker {
 public:
  explicit Checker(std::vector<std::string>* errs) : errs_(errs) {}
  void add(const std::string& s) {
    std::lock_guard<std::mutex> lock(m_);
    if (errs_->size() < 40) errs_->push_back(s);
  }

 private:
  std::mutex m_;
  std::vector<std::string>* errs_;
};

void rankMain(DeviceEnv& env, chorusComm_t comm, int rank, int n, const std::vector<Case>& cases,
              size_t count, Checker& ck) {
  void* cs = env.newStream();
  chorusStream_t s = nullptr;
  if (chorusResult_t r = env.wrap(cs, &s); r != chorusSuccess) {
    ck.add("rank " + std::to_string(rank) + ": wrapping the stream: " + chorusGetErrorString(r) +
           ": " + chorusGetLastError(nullptr));
    env.deleteStream(cs);
    return;
  }
  const size_t maxBytes = count * 8 * static_cast<size_t>(n);
  void* dsend = env.alloc(maxBytes);
  void* drecv = env.alloc(maxBytes);
  std::vector<unsigned char> hin(maxBytes), hout(maxBytes);
  for (const Case& c : cases) {
    const size_t e = ref::size(c.type), blk = count * e;
    const bool isRoot = rank == c.root;
    // Inputs: send blocks b = 0..nb-1 hold gen(rank, b, i).
    const int sendBlocks = (c.coll == C::ReduceScatter || c.coll == C::ReduceScatterInPlace ||
                            c.coll == C::AllToAll || c.coll == C::Scatter)
                               ? n
                               : 1;
    for (int b = 0; b < sendBlocks; ++b)
      for (size_t i = 0; i < count; ++i) put(c.type, gen(rank, b, i, c.op), &hin[b * blk + i * e]);
    if (maxBytes != 0) std::memset(hout.data(), 0xEE, maxBytes);  // count 0: no buffer
    env.upload(drecv, hout.data(), maxBytes, cs);  // poison: stale output must not pass
    unsigned char* ds = static_cast<unsigned char*>(dsend);
    unsigned char* dr = static_cast<unsigned char*>(drecv);
    if (c.coll == C::AllReduceInPlace) ds = dr;
    if (c.coll == C::AllGatherInPlace) ds = dr + rank * blk;
    if (c.coll == C::ReduceScatterInPlace) {
      ds = dr;
    }
    env.upload(ds, hin.data(), sendBlocks * blk, cs);
    chorusResult_t r = chorusSuccess;
    switch (c.coll) {
      case C::AllReduce:
      case C::AllReduceInPlace: r = chorusAllReduce(ds, dr, count, c.type, c.op, comm, s); break;
      case C::Reduce: r = chorusReduce(ds, dr, count, c.type, c.op, c.root, comm, s); break;
      case C::ReduceScatter: r = chorusReduceScatter(ds, dr, count, c.type, c.op, comm, s); break;
      case C::ReduceScatterInPlace:
        r = chorusReduceScatter(ds, dr + rank * blk, count, c.type, c.op, comm, s);
        break;
      case C::Broadcast: r = chorusBroadcast(ds, dr, count, c.type, c.root, comm, s); break;
      case C::AllGather:
      case C::AllGatherInPlace: r = chorusAllGather(ds, dr, count, c.type, comm, s); break;
      case C::Scatter: r = chorusScatter(ds, dr, count, c.type, c.root, comm, s); break;
      case C::Gather: r = chorusGather(ds, dr, count, c.type, c.root, comm, s); break;
      case C::AllToAll: r = chorusAllToAll(ds, dr, count, c.type, comm, s); break;
      case C::SendRecv:
        chorusGroupStart();
        r = chorusSend(ds, count, c.type, (rank + 1) % n, comm, s);
        if (r == chorusSuccess) r = chorusRecv(dr, count, c.type, (rank + n - 1) % n, comm, s);
        if (chorusResult_t g = chorusGroupEnd(); r == chorusSuccess) r = g;
        break;
      case C::Barrier: r = chorusBarrier(comm, s); break;
    }
    const int outBlocks = (c.coll == C::AllGather || c.coll == C::AllGatherInPlace ||
                           c.coll == C::AllToAll || (c.coll == C::Gather && isRoot))
                              ? n
                              : 1;
    unsigned char* outAt = c.coll == C::ReduceScatterInPlace ? dr + rank * blk : dr;
    env.download(hout.data(), outAt, outBlocks * blk, cs);
    chorusResult_t sy = chorusStreamSynchronize(s);
    char what[160];
    std::snprintf(what, sizeof what, "np %d rank %d %s type %d op %d root %d", n, rank,
                  name(c.coll), static_cast<int>(c.type), static_cast<int>(c.op), c.root);
    if (r != chorusSuccess || sy != chorusSuccess) {
      ck.add(std::string(what) + ": call " + chorusGetErrorString(r) + ", sync " +
             chorusGetErrorString(sy) + ": " + chorusGetLastError(comm));
      continue;
    }
    if (c.coll == C::Barrier) continue;
    if ((c.coll == C::Reduce || c.coll == C::Gather) && !isRoot) continue;
    int wrong = 0;
    for (int b = 0; b < outBlocks; ++b)
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        switch (c.coll) {
          case C::AllReduce:
          case C::AllReduceInPlace:
          case C::Reduce: want = reduced(n, 0, i, c.op, c.type); break;
          case C::ReduceScatter:
          case C::ReduceScatterInPlace: want = reduced(n, rank, i, c.op, c.type); break;
          case C::Broadcast: want = gen(c.root, 0, i, c.op); break;
          case C::AllGather:
          case C::AllGatherInPlace:
          case C::Gather: want = gen(b, 0, i, c.op); break;
          case C::Scatter: want = gen(c.root, rank, i, c.op); break;
          case C::AllToAll: want = gen(b, rank, i, c.op); break;
          case C::SendRecv: want = gen((rank + n - 1) % n, 0, i, c.op); break;
          case C::Barrier: break;
        }
        const double got = get(c.type, &hout[b * blk + i * ref::size(c.type)]);
        if (!close(c.type, c.op, got, want) && wrong++ < 2)
          ck.add(std::string(what) + ": block " + std::to_string(b) + " element " +
                 std::to_string(i) + " is " + std::to_string(got) + ", want " +
                 std::to_string(want));
      }
  }
  chorusStreamDestroy(s);
  env.free(dsend);
  env.free(drecv);
  env.deleteStream(cs);
}

}  // namespace

std::vector<std::string> run(DeviceEnv& env, const Options& opt) {
  std::vector<std::string> errs;
  Checker ck(&errs);
  const chorusDataType_t allTypes[] = {chorusInt8,    chorusUint8,   chorusInt32,   chorusUint32,
                                       chorusInt64,   chorusUint64,  chorusFloat16, chorusFloat32,
                                       chorusFloat64, chorusBfloat16};
  const chorusRedOp_t allOps[] = {chorusSum, chorusProd, chorusMax, chorusMin, chorusAvg};
  for (int n : opt.nranks) {
    std::vector<Case> cases;
    const int root = n - 1;  // not 0: a root other than rank 0 is the harder case
    for (chorusDataType_t t : allTypes) {
      if (!opt.allTypesAndOps && t != chorusFloat32 && t != chorusInt8) continue;
      for (chorusRedOp_t op : allOps) {
        if (!opt.allTypesAndOps && op != chorusSum && op != chorusAvg) continue;
        for (C c : {C::AllReduce, C::Reduce, C::ReduceScatter}) cases.push_back({c, t, op, root});
      }
      for (C c : {C::Broadcast, C::AllGather, C::Scatter, C::Gather, C::AllToAll, C::SendRecv})
        if (c != C::SendRecv || opt.sendRecv) cases.push_back({c, t, chorusSum, root});
    }
    for (C c : {C::AllReduceInPlace, C::AllGatherInPlace, C::ReduceScatterInPlace})
      cases.push_back({c, chorusFloat32, chorusSum, 0});
    cases.push_back({C::Barrier, chorusFloat32, chorusSum, 0});

    std::vector<chorusComm_t> comms(n);
    if (chorusCommInitAll(comms.data(), n, nullptr) != chorusSuccess) {
      errs.push_back("chorusCommInitAll(" + std::to_string(n) +
                     ") failed: " + chorusGetLastError(nullptr));
      continue;
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] { rankMain(env, comms[r], r, n, cases, opt.count, ck); });
    for (auto& t : threads) t.join();
    for (chorusComm_t c : comms) chorusCommDestroy(c);
  }
  return errs;
}

}  // namespace collmatrix
