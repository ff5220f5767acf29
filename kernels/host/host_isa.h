// host_isa.h — the table behind the host kernels' runtime dispatch (internal).
//
// host_reduce.cc is compiled once per instruction set into its own namespace; each copy
// exports one IsaOps table. host_dispatch.cc picks a table once by CPU features. Tests
// and benchmarks use isaOps() to run a specific variant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/host/host_reduce.h"

namespace chorus {
namespace kernels {

/// One compiled instruction-set variant of the host kernels.
struct IsaOps {
  const char* name;  ///< "avx512", "avx2", "baseline" (or "generic" off x86)
  void (*reduce)(const ReduceSpec& spec, void* dst, const void* acc, const void* local,
                 size_t count, unsigned flags);
  void (*copy)(void* dst, const void* src, size_t bytes, bool streaming);
  // Bulk conversions through the same register code reduce() uses (tests check them
  // exhaustively; the library may use them for scalars and staging).
  void (*halfToFloat)(float* dst, const uint16_t* src, size_t n);
  void (*floatToHalf)(uint16_t* dst, const float* src, size_t n);
  void (*bf16ToFloat)(float* dst, const uint16_t* src, size_t n);
  void (*floatToBf16)(uint16_t* dst, const float* src, size_t n);
  /// reduce() into dst and dst2 at once (reduceCopy in host_reduce.h).
  void (*reduceCopy)(const ReduceSpec& spec, void* dst, void* dst2, const void* acc,
                     const void* local, size_t count, unsigned flags);
};

enum class Isa : int { Baseline = 0, Avx2 = 1, Avx512 = 2 };
constexpr int kNumIsas = 3;

/// The variant compiled for `isa`, or nullptr if it was not built or this CPU cannot run
/// it. Off x86 only Baseline exists (a portable build).
const IsaOps* isaOps(Isa isa);

/// The variant reduce() and copy() use: the one selectIsa() chose, or (when nothing chose
/// before the first use) the best one this CPU runs. Chosen once and never changed.
const IsaOps& activeIsa();

}  // namespace kernels
}  // namespace chorus
