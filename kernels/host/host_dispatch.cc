// host_dispatch.cc — the public host kernel entry points: pick an ISA variant once, then
// call through its table. Compiled with the library's default flags (no -m options), so
// nothing here can execute an instruction the CPU lacks.
#include <cstdlib>
#include <cstring>

#include "kernels/host/host_isa.h"

namespace chorus {
namespace kernels {

// Each variant's table, defined in host_reduce.cc compiled with -DCHORUS_ISA_NS=<ns>.
#if defined(CHORUS_KERNELS_X86)
namespace isa_baseline {
extern const IsaOps kOps;
}
namespace isa_avx2 {
extern const IsaOps kOps;
}
namespace isa_avx512 {
extern const IsaOps kOps;
}
#else
namespace isa_generic {
extern const IsaOps kOps;
}
#endif

namespace {

#if defined(CHORUS_KERNELS_X86)
// The checks mirror the -m flags in kernels/meson.build exactly. __builtin_cpu_supports
// also confirms the OS saves the AVX/AVX-512 register state (XGETBV).
bool cpuRuns(Isa isa) {
  __builtin_cpu_init();  // may run before static constructors; cheap and idempotent
  const bool v2 = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt") &&
                  __builtin_cpu_supports("ssse3");
  const bool v3 = v2 && __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
                  __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  switch (isa) {
    case Isa::Baseline: return true;  // x86-64-v2 (2009+); nothing lower is built
    case Isa::Avx2: return v3;
    case Isa::Avx512: return v4;
  }
  return false;
}
#endif

const IsaOps* pick(const char* want) {
  int best = static_cast<int>(Isa::Baseline);
  for (int i = kNumIsas - 1; i > 0; --i) {
    if (isaOps(static_cast<Isa>(i))) {
      best = i;
      break;
    }
  }
  // An explicit lower choice (for debugging and for measuring); a higher one than the CPU
  // runs is ignored rather than obeyed into SIGILL.
  if (want != nullptr && *want != '\0') {
    for (int i = 0; i < kNumIsas; ++i) {
      const IsaOps* ops = isaOps(static_cast<Isa>(i));
      if (ops && i <= best && std::strcmp(want, ops->name) == 0) return ops;
    }
  }
  return isaOps(static_cast<Isa>(best));
}

}  // namespace

const IsaOps* isaOps(Isa isa) {
#if defined(CHORUS_KERNELS_X86)
  if (!cpuRuns(isa)) return nullptr;
  switch (isa) {
    case Isa::Baseline: return &isa_baseline::kOps;
    case Isa::Avx2: return &isa_avx2::kOps;
    case Isa::Avx512: return &isa_avx512::kOps;
  }
  return nullptr;
#else
  return isa == Isa::Baseline ? &isa_generic::kOps : nullptr;
#endif
}

namespace {

// The process's one ISA choice, made by the first caller (thread-safe, once) and never
// changed: a kept process-global, like NCCL's. The library calls selectIsa() with
// CHORUS_KERNEL_ISA at communicator init; a kernel used before that picks the best.
const IsaOps& choose(const char* want) {
  static const IsaOps* const ops = pick(want);
  return *ops;
}

}  // namespace

const char* selectIsa(const char* name) { return choose(name).name; }

const IsaOps& activeIsa() { return choose(nullptr); }

void reduce(const ReduceSpec& spec, void* dst, const void* acc, const void* local, size_t count,
            unsigned flags) {
  activeIsa().reduce(spec, dst, acc, local, count, flags);
}

void reduceCopy(const ReduceSpec& spec, void* dst, void* dst2, const void* acc, const void* local,
                size_t count, unsigned flags) {
  activeIsa().reduceCopy(spec, dst, dst2, acc, local, count, flags);
}

void copy(void* dst, const void* src, size_t bytes, bool streaming) {
  activeIsa().copy(dst, src, bytes, streaming);
}

size_t typeSize(chorusDataType_t type) { return typeBytes(type); }

const char* isaName() { return activeIsa().name; }

}  // namespace kernels
}  // namespace chorus
