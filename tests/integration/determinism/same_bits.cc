// same_bits.cc — default mode's promise (issue 36, acceptance 2): the same call on the same
// data gives the same bits, every time it runs in a job and in every launch with the same
// world size, settings and layout, whatever the timed choosers (CHORUS_SLOT_STORES=auto,
// CHORUS_CMA_MAX=auto) pick on the way.
//
//   chorusrun -np N same_bits [--reps R] [--max BYTES] [--seed S] [--verbose]
//
// For float32, float64, bfloat16 and float16 sums of mixed magnitude (exponents far apart,
// so any change in the order of the additions shows in the bits), all-reduce (out of place
// and in place), reduce (root 0) and reduce-scatter at sizes from 8 B to BYTES (default
// 4 MiB, x4 apart, plus an odd count above each), every case runs R times (default 12) on
// the same input. The timed choosers try each way on a size's first calls (the copy path:
// three FIFO calls, then three CMA calls; under auto only where the init probe did not find
// the kernel's copy slow, always under CHORUS_CMA_MAX=timed) and pick by time after that,
// so 12 calls take every way they try. Each repetition must give the bits of the first
// (exit 1, naming the case, where one does not). Rank 0 prints `digest <hex>`: FNV-1a over
// every rank's first results in rank order, so two launches can be compared; --verbose adds
// one line per case (`case <coll> <type> <bytes> <digest>`) to find the size where two
// launches part.
#include <chorus.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/integration/bit_digest.h"

namespace {

struct Type {
  const char* name;
  chorusDataType_t type;
  size_t bytes;
};
const Type kTypes[] = {{"float32", chorusFloat32, 4},
                       {"float64", chorusFloat64, 8},
                       {"bfloat16", chorusBfloat16, 2},
                       {"float16", chorusFloat16, 2}};

enum class Coll { AllReduce, AllReduceInPlace, Reduce, ReduceScatter };
const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "all_reduce";
    case Coll::AllReduceInPlace: return "all_reduce_in_place";
    case Coll::Reduce: return "reduce";
    case Coll::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

// Element i of `rank`'s input: sign, a mantissa the type holds exactly, and an exponent
// drawn from a wide range (half's is narrow: sums of 8 ranks must stay finite).
void fill(const Type& t, void* buf, size_t count, uint64_t seed, int rank) {
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = mix(seed * 1000003u + static_cast<uint64_t>(rank) * 0x10000001ull + i);
    const bool neg = r & 1;
    const int e = static_cast<int>((r >> 8) % 25) - 12;  // 2^-12 .. 2^12
    const uint32_t m = static_cast<uint32_t>(r >> 32);
    if (t.type == chorusFloat16) {
      const uint16_t h = static_cast<uint16_t>((neg ? 0x8000 : 0) | ((e / 2 + 15) << 10) |
                                               (m & 0x3ff));  // 2^-6 .. 2^6
      std::memcpy(static_cast<char*>(buf) + 2 * i, &h, 2);
      continue;
    }
    const double v = (neg ? -1.0 : 1.0) * (1.0 + (m & 0x7f) / 128.0) * std::ldexp(1.0, e);
    if (t.type == chorusFloat64) {
      const double d = v * (1.0 + (m >> 7) / 4294967296.0);
      std::memcpy(static_cast<char*>(buf) + 8 * i, &d, 8);
    } else {
      float f = static_cast<float>(v);  // 8 significant bits: bfloat16 holds it exactly
      if (t.type == chorusFloat32) {
        f = static_cast<float>(v * (1.0 + (m >> 16) / 16777216.0));
        std::memcpy(static_cast<char*>(buf) + 4 * i, &f, 4);
      } else {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        const uint16_t b = static_cast<uint16_t>(bits >> 16);
        std::memcpy(static_cast<char*>(buf) + 2 * i, &b, 2);
      }
    }
  }
}

struct Options {
  int reps = 12;
  size_t maxBytes = 4u << 20;
  uint64_t seed = 36;
  bool verbose = false;
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--verbose") {
      o->verbose = true;
    } else if (a == "--reps" && hasValue) {
      o->reps = std::atoi(argv[++i]);
    } else if (a == "--max" && hasValue) {
      o->maxBytes = std::strtoull(argv[++i], nullptr, 0);
    } else if (a == "--seed" && hasValue) {
      o->seed = std::strtoull(argv[++i], nullptr, 0);
    } else {
      std::fprintf(stderr, "same_bits: unknown or incomplete option %s\n", a.c_str());
      return false;
    }
  }
  if (o->reps < 2 || o->maxBytes < 8) {
    std::fprintf(stderr, "same_bits: want --reps >= 2 and --max >= 8\n");
    return false;
  }
  return true;
}

class Job {
 public:
  Job(chorusComm_t comm, int rank, int n, const Options& o)
      : comm_(comm), rank_(rank), n_(n), o_(o) {}

  // Runs one case reps times (all of them even after a change of bits: the peers make the
  // same calls); false on an error or on bits that changed.
  bool runCase(Coll c, const Type& t, size_t count, uint64_t* digest) {
    bool same = true;
    const size_t n = static_cast<size_t>(n_);
    const size_t inCount = c == Coll::ReduceScatter ? count * n : count;
    std::vector<char> in(inCount * t.bytes), out(count * t.bytes), first;
    fill(t, in.data(), inCount, o_.seed + count, rank_);
    for (int rep = 0; rep < o_.reps; ++rep) {
      std::memset(out.data(), 0xa5, out.size());
      chorusResult_t r = chorusSuccess;
      switch (c) {
        case Coll::AllReduce:
          r = chorusAllReduce(in.data(), out.data(), count, t.type, chorusSum, comm_, nullptr);
          break;
        case Coll::AllReduceInPlace:
          fill(t, out.data(), count, o_.seed + count, rank_);
          r = chorusAllReduce(out.data(), out.data(), count, t.type, chorusSum, comm_, nullptr);
          break;
        case Coll::Reduce:
          r = chorusReduce(in.data(), out.data(), count, t.type, chorusSum, 0, comm_, nullptr);
          break;
        case Coll::ReduceScatter:
          r = chorusReduceScatter(in.data(), out.data(), count, t.type, chorusSum, comm_, nullptr);
          break;
      }
      if (r != chorusSuccess) {
        std::fprintf(stderr, "rank %d: %s %s of %zu B failed: %s\n", rank_, collName(c), t.name,
                     count * t.bytes, chorusGetLastError(comm_));
        std::exit(1);  // the peers' calls fail too (chorusrun stops the job)
      }
      if (c == Coll::Reduce && rank_ != 0) continue;  // only the root's output is defined
      if (rep == 0) {
        first = out;
        continue;
      }
      if (same && std::memcmp(first.data(), out.data(), out.size()) != 0) {
        size_t i = 0;
        while (std::memcmp(&first[i * t.bytes], &out[i * t.bytes], t.bytes) == 0) ++i;
        std::fprintf(stderr,
                     "rank %d: %s %s of %zu B: call %d gave other bits than call 1 (first at "
                     "element %zu of %zu)\n",
                     rank_, collName(c), t.name, count * t.bytes, rep + 1, i, count);
        same = false;
      }
    }
    *digest = fnv(*digest, first.data(), first.size());
    return same;
  }

  // Every case; prints the digest. Returns the exit status.
  int run() {
    const Coll colls[] = {Coll::AllReduce, Coll::AllReduceInPlace, Coll::Reduce,
                          Coll::ReduceScatter};
    uint64_t all = kFnvStart;
    int bad = 0;
    for (const Type& t : kTypes) {
      for (Coll c : colls) {
        for (size_t bytes = 8; bytes <= o_.maxBytes; bytes *= 4) {
          for (size_t count : {bytes / t.bytes, bytes / t.bytes + 3}) {
            uint64_t d = kFnvStart;
            if (!runCase(c, t, count, &d)) ++bad;
            all = fnv(all, &d, sizeof d);
            if (o_.verbose && (d = gathered(d)) != 0 && rank_ == 0)
              std::printf("case %s %s %zu %016llx\n", collName(c), t.name, count * t.bytes,
                          static_cast<unsigned long long>(d));
          }
        }
      }
    }
    const uint64_t d = gathered(all);
    if (rank_ == 0) std::printf("digest %016llx\n", static_cast<unsigned long long>(d));
    if (bad) std::fprintf(stderr, "rank %d: %d case(s) failed\n", rank_, bad);
    return bad ? 1 : 0;
  }

 private:
  // FNV-1a over every rank's value in rank order (0 if the all-gather failed).
  uint64_t gathered(uint64_t mine) {
    std::vector<uint64_t> every(static_cast<size_t>(n_));
    if (chorusAllGather(&mine, every.data(), 1, chorusUint64, comm_, nullptr) != chorusSuccess)
      return 0;
    return fnv(kFnvStart, every.data(), every.size() * sizeof(uint64_t));
  }

  chorusComm_t comm_;
  int rank_, n_;
  Options o_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  chorusComm_t comm = nullptr;
  if (chorusCommInitFromEnv(&comm, nullptr) != chorusSuccess) {
    std::fprintf(stderr, "same_bits: init failed: %s\n", chorusGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  chorusCommUserRank(comm, &rank);
  chorusCommCount(comm, &n);
  const int rc = Job(comm, rank, n, o).run();
  chorusCommDestroy(comm);
  return rc;
}
