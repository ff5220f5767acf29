// membw_cma.cc — chorus_membw --cma: what the kernel's cross-process copy costs here.
//
// Unregistered buffers reach a peer through process_vm_readv/writev (CMA), which pins the
// peer's pages one 4 KiB page at a time before it copies them (docs/PERF.md "fifth stop").
// For each size this prints, in GB/s (best of several repetitions):
//   memcpy   this process copying a buffer of its own
//   cma      process_vm_readv of a child process's buffer into this process's buffer
// once with ordinary 4 KiB pages and once with buffers advised as transparent huge pages
// (MADV_HUGEPAGE, what glibc does for malloc under GLIBC_TUNABLES=glibc.malloc.hugetlb=1),
// with the huge pages the child's buffer actually got.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "perf/membw_cma.h"

namespace {

constexpr size_t kHuge = 2u << 20;

double seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

char* buffer(size_t bytes, bool huge) {
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = aligned_alloc(kHuge, rounded);
  if (!p) return nullptr;
  if (huge) madvise(p, rounded, MADV_HUGEPAGE);
  memset(p, 1, rounded);  // first touch, after the advice
  return static_cast<char*>(p);
}

template <typename F>
double bestRate(size_t bytes, F&& fn) {
  if (!fn()) return -1;
  const int reps =
      static_cast<int>(std::min<size_t>(2000, std::max<size_t>(3, (256u << 20) / bytes)));
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = seconds();
    for (int i = 0; i < reps; ++i)
      if (!fn()) return -1;
    best = std::min(best, (seconds() - t0) / reps);
  }
  return static_cast<double>(bytes) / best / 1e9;
}

long anonHugeKiB(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/smaps_rollup", static_cast<int>(pid));
  FILE* f = fopen(path, "re");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

// One pass over the sizes with buffers of one page kind. Returns false when CMA is refused.
bool pass(const std::vector<size_t>& sizes, bool huge) {
  const size_t maxBytes = *std::max_element(sizes.begin(), sizes.end());
  int addrPipe[2], donePipe[2];
  if (pipe(addrPipe) != 0 || pipe(donePipe) != 0) return false;
  const pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) {  // the peer: a buffer of its own, its address to the parent, then wait
    close(addrPipe[0]);
    close(donePipe[1]);
    char* src = buffer(maxBytes, huge);
    const uintptr_t addr = reinterpret_cast<uintptr_t>(src);
    if (write(addrPipe[1], &addr, sizeof addr) != sizeof addr) _exit(1);
    char c;
    while (read(donePipe[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(addrPipe[1]);
  close(donePipe[0]);
  uintptr_t addr = 0;
  const bool got = read(addrPipe[0], &addr, sizeof addr) == sizeof addr && addr != 0;
  char* own = buffer(maxBytes, huge);
  char* dst = buffer(maxBytes, huge);
  bool ok = got && own && dst;
  if (ok)
    printf("# %s pages; the peer's buffer holds %ld KiB of huge pages\n",
           huge ? "MADV_HUGEPAGE" : "4 KiB", anonHugeKiB(child));
  for (size_t s : sizes) {
    if (!ok) break;
    const double copy = bestRate(s, [&] {
      memcpy(dst, own, s);
      return true;
    });
    const double cma = bestRate(s, [&] {
      iovec local{dst, s}, remote{reinterpret_cast<void*>(addr), s};
      return process_vm_readv(child, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(s);
    });
    if (cma < 0) {
      fprintf(stderr, "chorus_membw --cma: process_vm_readv of a child: %s\n", strerror(errno));
      ok = false;
      break;
    }
    printf("  %12zu  %-6s  %8.2f  %8.2f  %8.2f\n", s, huge ? "huge" : "4K", copy, cma, cma / copy);
    fflush(stdout);
  }
  close(donePipe[1]);
  close(addrPipe[0]);
  waitpid(child, nullptr, 0);
  free(own);
  free(dst);
  return ok;
}

}  // namespace

int cmaMain(std::vector<size_t> sizes) {
  if (sizes.empty())
    for (size_t s = 64u << 10; s <= (64u << 20); s *= 4) sizes.push_back(s);
  printf("# GB/s, best of 5; cma = process_vm_readv of another process's buffer\n");
  printf("# %12s  %-6s  %8s  %8s  %8s\n", "size(B)", "pages", "memcpy", "cma", "cma/copy");
  for (bool huge : {false, true})
    if (!pass(sizes, huge)) return 2;
  return 0;
}
