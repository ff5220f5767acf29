// chorus_two_rank_copy: two processes pinned to CPUs 0 and 1 swap a block through shared
// memory the way a two-rank all-gather does (copy the own block into a shared slot, publish,
// wait for the peer's, copy it out), in variants of the copies and of the hand-off, with no
// library in between. The variants run interleaved in short cells (ITERS calls each), each
// cell after a cache-line ping-pong between the two processes that says where the CPUs sat
// (over 300 ns: on different dies, "far"); per variant and size it prints the median time
// per call of the near and the far cells. It is how the pair cells were found
// (docs/PERF.md#perf-farlab): "base" is the FIFO's shape (slots per direction, a credit
// back), "swap" the pair cells' (each rank writes the cell it read last).
//
//   chorus_two_rank_copy ROUNDS ITERS SIZE...   (SIZE: the block in bytes, K suffix)
//   VARIANTS=base,swap  runs only those (names: the table in main)
//   OOP=1               also copies the own block to the output (out of place)
//   FIRSTTOUCH=reader   the slots' pages first touched by their reader, not their writer
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

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static void pinTo(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}

constexpr size_t kMaxBlock = 1 << 20;
constexpr int kMaxDepth = 8;
constexpr size_t kSlot = kMaxBlock + 4096;

struct alignas(128) Line {
  std::atomic<uint64_t> v;
  char pad[120];
};

struct Ctrl {
  Line head[2][256];  // [dir][chunk]: chunks published (count, per call) ; dir = writer rank
  Line tail[2];       // calls consumed by the reader of dir
  Line bar[2];        // barrier
  Line ping, pong;
  Line cmd;  // variant/size/iters broadcast by rank 0
  Line cmdSize, cmdIters, cmdGo;
  Line result;
};

struct Shared {
  Ctrl c;
  alignas(4096) char slots[2][kMaxDepth][kSlot];
};

static Shared* S;
static int me;

static void barrier(uint64_t& gen) {
  ++gen;
  S->c.bar[me].v.store(gen, std::memory_order_release);
  while (S->c.bar[1 - me].v.load(std::memory_order_acquire) < gen) _mm_pause();
}

// Copies.
static inline void repMovsb(void* d, const void* s, size_t n) {
  asm volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}
__attribute__((target("avx512f"))) static void avxCopy(char* d, const char* s, size_t n,
                                                       size_t pfDist) {
  for (size_t i = 0; i < n; i += 256) {
    if (pfDist) {
      _mm_prefetch(s + i + pfDist, _MM_HINT_T0);
      _mm_prefetch(s + i + pfDist + 64, _MM_HINT_T0);
      _mm_prefetch(s + i + pfDist + 128, _MM_HINT_T0);
      _mm_prefetch(s + i + pfDist + 192, _MM_HINT_T0);
    }
    __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64),
            c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
    _mm512_storeu_si512(d + i, a);
    _mm512_storeu_si512(d + i + 64, b);
    _mm512_storeu_si512(d + i + 128, c);
    _mm512_storeu_si512(d + i + 192, e);
  }
}
__attribute__((target("avx512f"))) static void ntCopy(char* d, const char* s, size_t n) {
  for (size_t i = 0; i < n; i += 256) {
    __m512i a = _mm512_loadu_si512(s + i), b = _mm512_loadu_si512(s + i + 64),
            c = _mm512_loadu_si512(s + i + 128), e = _mm512_loadu_si512(s + i + 192);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), a);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 64), b);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 128), c);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i + 192), e);
  }
  _mm_sfence();
}
__attribute__((target("clwb"))) static void clwbRange(const char* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) _mm_clwb(const_cast<char*>(p + i));
  _mm_sfence();
}
__attribute__((target("clflushopt"))) static void flushRange(const char* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) _mm_clflushopt(const_cast<char*>(p + i));
  _mm_sfence();
}
static void prefetchwRange(const char* p, size_t n) {
  for (size_t i = 0; i < n; i += 64) __builtin_prefetch(p + i, 1, 3);
}

struct Variant {
  const char* name;
  int depth = 8;
  size_t chunk = 0;  // 0: one flag per call
  int wr = 0;        // 0 memcpy, 1 rep movsb, 2 avx, 3 nt, 4 memcpy+clwb, 5 memcpy+clflushopt, 6
                     // prefetchw+memcpy
  int rd = 0;        // 0 memcpy, 1 rep movsb, 2 avx, 3 avx+pf
  size_t pf = 0;
  int rdFlush = 0;  // reader flushes the slot after reading
  int inPlace = 1;  // 0: own block also copied to out (out of place)
  int swap = 0;  // 1: two cells per pair; each rank writes the cell it read last call (no credit)
  size_t cellOff = 0;  // data offset in the cell
};

static void writeChunk(const Variant& v, char* d, const char* s, size_t n) {
  switch (v.wr) {
    case 0: memcpy(d, s, n); break;
    case 1: repMovsb(d, s, n); break;
    case 2: avxCopy(d, s, n, 0); break;
    case 3: ntCopy(d, s, n); break;
    case 4:
      memcpy(d, s, n);
      clwbRange(d, n);
      break;
    case 5:
      memcpy(d, s, n);
      flushRange(d, n);
      break;
    case 6:
      prefetchwRange(d, n);
      memcpy(d, s, n);
      break;
  }
}
static void readChunk(const Variant& v, char* d, const char* s, size_t n) {
  switch (v.rd) {
    case 0: memcpy(d, s, n); break;
    case 1: repMovsb(d, s, n); break;
    case 2: avxCopy(d, s, n, 0); break;
    case 3: avxCopy(d, s, n, v.pf); break;
    case 4: {  // prefetch the whole block first, then copy
      for (size_t i = 0; i < n; i += 64) _mm_prefetch(s + i, _MM_HINT_T0);
      memcpy(d, s, n);
      break;
    }
  }
  if (v.rdFlush) flushRange(s, n);
}

// One call: returns nothing; call number k (1-based).
static void oneCall(const Variant& v, uint64_t k, size_t bytes, const char* src, char* out) {
  const int peer = 1 - me;
  const int depth = v.depth;
  // credit: slot k-depth consumed by the peer
  char* mySlot;
  const char* peerSlot;
  if (v.swap) {
    mySlot = S->slots[0][(k + me) & 1] + v.cellOff;
    peerSlot = S->slots[0][(k + peer) & 1] + v.cellOff;
  } else {
    if (k > static_cast<uint64_t>(depth)) {
      while (S->c.tail[me].v.load(std::memory_order_acquire) < k - depth) _mm_pause();
    }
    mySlot = S->slots[me][k % depth] + v.cellOff;
    peerSlot = S->slots[peer][k % depth] + v.cellOff;
  }
  const size_t chunk = v.chunk ? v.chunk : bytes;
  const size_t nch = (bytes + chunk - 1) / chunk;
  if (v.chunk == 0) {
    writeChunk(v, mySlot, src, bytes);
    S->c.head[me][0].v.store(k, std::memory_order_release);
    if (!v.inPlace) memcpy(out + me * bytes, src, bytes);
    while (S->c.head[peer][0].v.load(std::memory_order_acquire) < k) _mm_pause();
    readChunk(v, out + peer * bytes, peerSlot, bytes);
  } else {
    // interleave: write chunk i, then read whatever of the peer's chunks are ready (at
    // least chunk i-1)
    size_t rdone = 0;
    for (size_t i = 0; i < nch; ++i) {
      const size_t o = i * chunk, n = std::min(chunk, bytes - o);
      writeChunk(v, mySlot + o, src + o, n);
      S->c.head[me][i].v.store(k, std::memory_order_release);
      while (rdone < i && S->c.head[peer][rdone].v.load(std::memory_order_acquire) >= k) {
        const size_t ro = rdone * chunk, rn = std::min(chunk, bytes - ro);
        readChunk(v, out + peer * bytes + ro, peerSlot + ro, rn);
        ++rdone;
      }
    }
    if (!v.inPlace) memcpy(out + me * bytes, src, bytes);
    for (; rdone < nch; ++rdone) {
      while (S->c.head[peer][rdone].v.load(std::memory_order_acquire) < k) _mm_pause();
      const size_t ro = rdone * chunk, rn = std::min(chunk, bytes - ro);
      readChunk(v, out + peer * bytes + ro, peerSlot + ro, rn);
    }
  }
  if (!v.swap) S->c.tail[peer].v.store(k, std::memory_order_release);
}

static double pingPong(uint64_t& gen) {
  barrier(gen);
  constexpr int kTrips = 2000;
  double t0 = now();
  for (int i = 1; i <= kTrips; ++i) {
    if (me == 0) {
      S->c.ping.v.store(gen * 100000 + i, std::memory_order_release);
      while (S->c.pong.v.load(std::memory_order_acquire) != gen * 100000 + i) _mm_pause();
    } else {
      while (S->c.ping.v.load(std::memory_order_acquire) != gen * 100000 + i) _mm_pause();
      S->c.pong.v.store(gen * 100000 + i, std::memory_order_release);
    }
  }
  return (now() - t0) * 1e9 / kTrips;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "chorus_two_rank_copy ROUNDS ITERS SIZE...\n");
    return 2;
  }
  const int rounds = atoi(argv[1]);
  const int iters = atoi(argv[2]);
  std::vector<size_t> sizes;
  for (int i = 3; i < argc; ++i) {
    size_t v = strtoull(argv[i], nullptr, 10);
    if (strchr(argv[i], 'K')) v <<= 10;
    sizes.push_back(v);
  }
  // name, depth, chunk, wr, rd, pf, rdFlush, inPlace, swap, cellOff (struct Variant)
  std::vector<Variant> vs = {
      {"base", 8, 0, 0, 0, 0, 0, 1, 0, 0},         {"repmovsb", 8, 0, 1, 1, 0, 0, 1, 0, 0},
      {"avx", 8, 0, 2, 2, 0, 0, 1, 0, 0},          {"w-nt", 8, 0, 3, 0, 0, 0, 1, 0, 0},
      {"w-clwb", 8, 0, 4, 0, 0, 0, 1, 0, 0},       {"w-flush", 8, 0, 5, 0, 0, 0, 1, 0, 0},
      {"w-prefw", 8, 0, 6, 0, 0, 0, 1, 0, 0},      {"r-pf2K", 8, 0, 0, 3, 2048, 0, 1, 0, 0},
      {"r-pf8K", 8, 0, 0, 3, 8192, 0, 1, 0, 0},    {"r-pf32K", 8, 0, 0, 3, 32768, 0, 1, 0, 0},
      {"r-pfall", 8, 0, 0, 4, 0, 0, 1, 0, 0},      {"r-flush", 8, 0, 0, 0, 0, 1, 1, 0, 0},
      {"depth1", 1, 0, 0, 0, 0, 0, 1, 0, 0},       {"depth2", 2, 0, 0, 0, 0, 0, 1, 0, 0},
      {"chunk4K", 8, 4096, 0, 0, 0, 0, 1, 0, 0},   {"chunk16K", 8, 16384, 0, 0, 0, 0, 1, 0, 0},
      {"swap", 8, 0, 0, 0, 0, 0, 1, 1, 0},         {"swap256", 8, 0, 0, 0, 0, 0, 1, 1, 256},
      {"swapc12K", 8, 12288, 0, 0, 0, 0, 1, 1, 0}, {"swapc32K", 8, 32768, 0, 0, 0, 0, 1, 1, 0},
      {"off256", 8, 0, 0, 0, 0, 0, 1, 0, 256},
  };
  const char* only = getenv("VARIANTS");
  if (only) {
    std::vector<Variant> keep;
    std::string o = std::string(",") + only + ",";
    for (auto& v : vs)
      if (o.find(std::string(",") + v.name + ",") != std::string::npos) keep.push_back(v);
    vs = keep;
  }
  const bool outOfPlace = getenv("OOP") && atoi(getenv("OOP"));
  for (auto& v : vs) v.inPlace = !outOfPlace;

  S = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (S == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  // An anonymous mapping starts zeroed: every counter at 0.
  // Slot pages first touched by their writer (FIRSTTOUCH=reader: by their reader).
  const bool readerTouch = getenv("FIRSTTOUCH") && !strcmp(getenv("FIRSTTOUCH"), "reader");
  pid_t child = fork();
  me = child == 0 ? 1 : 0;
  pinTo(me);
  uint64_t gen = 0;
  {
    int owner = readerTouch ? 1 - me : me;
    memset(S->slots[owner], 0, sizeof S->slots[owner]);
  }
  barrier(gen);
  char* src = static_cast<char*>(aligned_alloc(4096, kMaxBlock));
  char* out = static_cast<char*>(aligned_alloc(4096, 2 * kMaxBlock));
  memset(src, me + 1, kMaxBlock);
  memset(out, 0, 2 * kMaxBlock);
  uint64_t callNo = 0;  // shared sequence for head/tail (every variant continues it)
  // results[variant][size] -> list of (ns per call, pingpong)
  std::map<std::pair<int, size_t>, std::vector<std::pair<double, double>>> res;
  for (int r = 0; r < rounds; ++r) {
    for (size_t vi0 = 0; vi0 < vs.size(); ++vi0) {
      const size_t vi = (r % 2 == 0) ? vi0 : vs.size() - 1 - vi0;
      const Variant& v = vs[vi];
      for (size_t sz : sizes) {
        double pp = pingPong(gen);
        // the head/tail counters must be continuous; chunked heads are per chunk: reset
        // by using callNo; depth changes: drain first (the barrier below ensures every
        // previous call's tail was stored).
        barrier(gen);
        for (int i = 0; i < iters / 10; ++i) oneCall(v, ++callNo, sz, src, out);
        barrier(gen);
        double t0 = now();
        for (int i = 0; i < iters; ++i) oneCall(v, ++callNo, sz, src, out);
        double t = now() - t0;
        // Every call so far is consumed (the swap variants send no credit back): the next
        // variant's credits start from here.
        S->c.tail[1 - me].v.store(callNo, std::memory_order_release);
        barrier(gen);
        if (me == 0) res[{static_cast<int>(vi), sz}].push_back({t * 1e9 / iters, pp});
        // check bytes once per cell
        if (out[(1 - me) * sz + sz - 1] != static_cast<char>(2 - me)) {
          fprintf(stderr, "rank %d: wrong byte, variant %s size %zu\n", me, v.name, sz);
          return 1;
        }
      }
    }
  }
  if (me == 1) return 0;
  waitpid(child, nullptr, 0);
  // Per variant, size: median ns of near cells (pp < 300) and far cells.
  printf("%-10s %8s %14s %14s   cells (ns/call@pingpong)\n", "variant", "size", "near med us",
         "far med us");
  for (size_t vi = 0; vi < vs.size(); ++vi)
    for (size_t sz : sizes) {
      auto& l = res[{static_cast<int>(vi), sz}];
      std::vector<double> nearT, farT;
      for (auto& e : l) (e.second < 300 ? nearT : farT).push_back(e.first);
      auto med = [](std::vector<double> x) {
        if (x.empty()) return 0.0;
        std::sort(x.begin(), x.end());
        return x[x.size() / 2] / 1e3;
      };
      printf("%-10s %8zu %8.3f (%2zu) %8.3f (%2zu)  ", vs[vi].name, sz, med(nearT), nearT.size(),
             med(farT), farT.size());
      for (auto& e : l) printf(" %.0f@%.0f", e.first, e.second);
      printf("\n");
    }
  return 0;
}
