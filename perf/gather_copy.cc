// chorus_gather_copy: the np-2 gather's root side with no library in between. A sender
// process writes its block into a ring of shared slots (DEPTH of them) and publishes each;
// the root copies its own block into its output and then the sender's block out of the
// slot, the way gatherRun does on the FIFO (src/algorithms/alltoall.cc). Variants of the
// root's copy out of the slot, of the slots' depth and of the sender's stores run
// interleaved in short cells (ITERS calls each), each cell after a cache-line ping-pong
// that says where the two CPUs sat (over 300 ns: "far"); per variant, size and window it
// prints the median time per call. No hardware counters are needed (the KVM guests of
// docs/PERF.md have none). x86-64 with AVX-512 (docs/PERF.md#perf-gather4).
//
//   chorus_gather_copy ROUNDS ITERS BLOCK...   (BLOCK: bytes per rank, K suffix)
//   VARIANTS=memcpy,avx512  runs only those (names: kVariants below)
#include <immintrin.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
void pinTo(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}

enum class Kernel { Memcpy, Avx512, Avx2, Movsb, Nt, PrefetchNta };

struct Variant {
  const char* name;
  Kernel rootCopy;  // the root's copy out of the slot
  int depth;        // slots in the ring
  bool senderNt;    // the sender's slot stores streaming
  bool ownNt;       // the root's own copy with streaming stores
};

const Variant kVariants[] = {
    {"memcpy", Kernel::Memcpy, 8, false, false},   {"avx512", Kernel::Avx512, 8, false, false},
    {"avx2", Kernel::Avx2, 8, false, false},       {"movsb", Kernel::Movsb, 8, false, false},
    {"nt", Kernel::Nt, 8, false, false},           {"pfnta", Kernel::PrefetchNta, 8, false, false},
    {"depth2", Kernel::Memcpy, 2, false, false},   {"depth4", Kernel::Memcpy, 4, false, false},
    {"sendnt", Kernel::Memcpy, 8, true, false},    {"allnt", Kernel::Nt, 8, false, true},
    {"avx512d2", Kernel::Avx512, 2, false, false},
};

// Temporal AVX-512 copy, 256 bytes a step; kPrefetchNta also prefetches 1 KiB ahead with the
// non-temporal hint (the "pfnta" kernel), the rest is the same loop.
template <bool kPrefetchNta>
__attribute__((target("avx512f"))) void copyAvx512Loop(char* d, const char* s, size_t n) {
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    if (kPrefetchNta)
      for (int k = 0; k < 4; ++k) _mm_prefetch(s + i + 1024 + 64 * k, _MM_HINT_NTA);
    __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64);
    __m512i c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
    _mm512_storeu_si512(d + i, a);
    _mm512_storeu_si512(d + i + 64, b);
    _mm512_storeu_si512(d + i + 128, c);
    _mm512_storeu_si512(d + i + 192, e);
  }
  std::memcpy(d + i, s + i, n - i);
}
void copyAvx512(char* d, const char* s, size_t n) { copyAvx512Loop<false>(d, s, n); }
__attribute__((target("avx2"))) void copyAvx2(char* d, const char* s, size_t n) {
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
  }
  std::memcpy(d + i, s + i, n - i);
}
void copyMovsb(char* d, const char* s, size_t n) {
  asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}
__attribute__((target("avx512f"))) void copyNt(char* d, const char* s,
                                               size_t n) {  // d 64-byte aligned here
  size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64);
    __m512i c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 192), e);
  }
  std::memcpy(d + i, s + i, n - i);
  _mm_sfence();
}
void copyPfNta(char* d, const char* s, size_t n) { copyAvx512Loop<true>(d, s, n); }
void copyWith(Kernel k, char* d, const char* s, size_t n) {
  switch (k) {
    case Kernel::Memcpy: std::memcpy(d, s, n); return;
    case Kernel::Avx512: copyAvx512(d, s, n); return;
    case Kernel::Avx2: copyAvx2(d, s, n); return;
    case Kernel::Movsb: copyMovsb(d, s, n); return;
    case Kernel::Nt: copyNt(d, s, n); return;
    case Kernel::PrefetchNta: copyPfNta(d, s, n); return;
  }
}

constexpr int kMaxDepth = 8;
constexpr size_t kSlot = 1 << 20;

struct alignas(64) Line {
  std::atomic<uint64_t> v{0};
  char pad[56];
};
struct Shared {
  Line head, tail, ping, pong, cmd, done;
  std::atomic<int> variant, iters;
  std::atomic<size_t> block;
};

void spinUntil(const std::atomic<uint64_t>& a, uint64_t v) {
  while (a.load(std::memory_order_acquire) < v) _mm_pause();
}

// The sender: per command, ITERS blocks into the ring, each after a free slot.
void sender(Shared* sh, char* slots) {
  pinTo(1);
  char* in = static_cast<char*>(aligned_alloc(4096, kSlot));
  std::memset(in, 7, kSlot);
  uint64_t cmd = 0, head = 0;
  for (;;) {
    spinUntil(sh->cmd.v, cmd + 1);
    ++cmd;
    const int vi = sh->variant.load();
    if (vi < 0) break;
    if (vi == 1000) {  // ping-pong probe: 2000 round trips
      for (uint64_t i = 1; i <= 2000; ++i) {
        spinUntil(sh->ping.v, sh->pong.v.load() + 1);
        sh->pong.v.fetch_add(1, std::memory_order_release);
      }
      sh->done.v.fetch_add(1, std::memory_order_release);
      continue;
    }
    const Variant& v = kVariants[vi];
    const size_t b = sh->block.load();
    const int it = sh->iters.load();
    for (int i = 0; i < it; ++i) {
      spinUntil(sh->tail.v, head + 1 > static_cast<uint64_t>(v.depth) ? head + 1 - v.depth : 0);
      char* slot = slots + (head % v.depth) * kSlot;
      if (v.senderNt)
        copyNt(slot, in, b);
      else
        std::memcpy(slot, in, b);
      ++head;
      sh->head.v.store(head, std::memory_order_release);
    }
  }
  std::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s ROUNDS ITERS BLOCK...\n", argv[0]);
    return 2;
  }
  const int rounds = std::atoi(argv[1]), iters = std::atoi(argv[2]);
  std::vector<size_t> blocks;
  for (int i = 3; i < argc; ++i) {
    char* end;
    size_t b = std::strtoull(argv[i], &end, 10);
    if (*end == 'K' || *end == 'k') b <<= 10;
    if (*end == 'M' || *end == 'm') b <<= 20;
    blocks.push_back(std::min(b, kSlot));
  }
  if (!__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr, "%s: needs AVX-512 (its avx512, nt, pfnta variants)\n", argv[0]);
    return 2;
  }
  std::vector<int> chosen;
  const char* only = std::getenv("VARIANTS");
  for (int i = 0; i < static_cast<int>(sizeof kVariants / sizeof kVariants[0]); ++i)
    if (!only || (std::string(",") + only + ",").find(std::string(",") + kVariants[i].name + ",") !=
                     std::string::npos)
      chosen.push_back(i);

  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (sh) Shared();
  auto* slots = static_cast<char*>(
      mmap(nullptr, kMaxDepth * kSlot, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(slots, 0, kMaxDepth * kSlot);
  const pid_t child = fork();
  if (child == 0) sender(sh, slots);
  pinTo(0);
  const size_t maxB = *std::max_element(blocks.begin(), blocks.end());
  char* own = static_cast<char*>(aligned_alloc(4096, maxB));
  char* out = static_cast<char*>(aligned_alloc(4096, 2 * maxB));
  std::memset(own, 3, maxB);
  std::memset(out, 0, 2 * maxB);
  uint64_t cmd = 0, tail = 0, probes = 0;
  // times[variant][block][far] -> per-call seconds
  std::map<std::string, std::vector<double>> times;
  for (int r = 0; r < rounds; ++r) {
    for (size_t b : blocks) {
      for (size_t k = 0; k < chosen.size(); ++k) {
        const int vi = chosen[(k + static_cast<size_t>(r)) % chosen.size()];
        // probe
        sh->variant.store(1000);
        sh->cmd.v.store(++cmd, std::memory_order_release);
        const uint64_t p0 = sh->ping.v.load();
        const double t0 = now();
        for (uint64_t i = 1; i <= 2000; ++i) {
          sh->ping.v.store(p0 + i, std::memory_order_release);
          spinUntil(sh->pong.v, p0 + i);
        }
        const double rtt = (now() - t0) / 2000 * 1e9;
        spinUntil(sh->done.v, ++probes);
        const bool far = rtt > 300;
        const Variant& v = kVariants[vi];
        sh->variant.store(vi);
        sh->block.store(b);
        sh->iters.store(iters);
        sh->cmd.v.store(++cmd, std::memory_order_release);
        std::vector<double> per;
        double t = now();
        for (int i = 0; i < iters; ++i) {
          if (v.ownNt)
            copyNt(out, own, b);
          else
            std::memcpy(out, own, b);
          spinUntil(sh->head.v, tail + 1);
          copyWith(v.rootCopy, out + b, slots + (tail % v.depth) * kSlot, b);
          ++tail;
          sh->tail.v.store(tail, std::memory_order_release);
        }
        const double per1 = (now() - t) / iters;
        char key[128];
        std::snprintf(key, sizeof key, "%-9s %7zu %s", v.name, b, far ? "far " : "near");
        times[key].push_back(per1 * 1e6);
        std::fprintf(stderr, "r%d %s %.2f us (probe %.0f ns)\n", r, key, per1 * 1e6, rtt);
      }
    }
  }
  sh->variant.store(-1);
  sh->cmd.v.store(++cmd, std::memory_order_release);
  waitpid(child, nullptr, 0);
  std::printf("%-9s %7s %-4s %8s %3s\n", "variant", "block", "win", "median", "n");
  for (auto& [k, v] : times) {
    std::sort(v.begin(), v.end());
    std::printf("%s %8.2f %3zu\n", k.c_str(), v[v.size() / 2], v.size());
  }
  return 0;
}
