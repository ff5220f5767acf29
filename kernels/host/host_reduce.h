// host_reduce.h — the host (CPU) entry points of the element kernels.
//
// Algorithms call these to move and combine bytes; they never see a data type's
// arithmetic; what to compute comes as a ReduceSpec (kernels/reduce_spec.h).
// Implementations live in host_reduce.cc, compiled several times (baseline, AVX2, AVX-512)
// and dispatched once at startup by CPU features.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chorus.h"
#include "kernels/reduce_spec.h"

namespace chorus {
namespace kernels {

/// dst[i] = post( acc[i] OP pre(local[i]) ) for i < count.
/// acc == nullptr means dst[i] = post(pre(local[i])). dst may alias acc or local exactly.
/// Pointers need no particular alignment. pre/post apply only when flagged.
void reduce(const ReduceSpec& spec, void* dst, const void* acc, const void* local, size_t count,
            unsigned flags);

/// reduce() whose result goes to two places in one pass over the inputs: dst with ordinary
/// stores (a buffer someone reads next, e.g. a FIFO slot: keep it in cache) and dst2 with
/// streaming stores when kStreaming is in `flags` (e.g. the user's large output), ordinary
/// ones otherwise. dst2 may alias acc or local exactly; dst may not overlap dst2, acc or
/// local. Same bits as reduce() followed by copy(); with acc == nullptr and no decorations
/// it copies `local` to both.
void reduceCopy(const ReduceSpec& spec, void* dst, void* dst2, const void* acc, const void* local,
                size_t count, unsigned flags);

/// memcpy, with non-temporal stores when `streaming` (dst must not overlap src).
void copy(void* dst, const void* src, size_t bytes, bool streaming);

/// Bytes per element of a data type (0 for an invalid type).
size_t typeSize(chorusDataType_t type);

/// Makes the process's one-time ISA choice, if nothing made it yet: the best variant this
/// CPU runs, or `name` (baseline|avx2|avx512) when it names a lower one (nullptr or "" =
/// the best; a higher one than the CPU runs is ignored rather than obeyed into SIGILL).
/// The first call, or the first kernel use, decides; later calls change nothing. The
/// library calls it at communicator init with CHORUS_KERNEL_ISA; returns the chosen name.
const char* selectIsa(const char* name);

/// Name of the instruction set the dispatcher picked ("avx512", "avx2", "baseline").
const char* isaName();

}  // namespace kernels
}  // namespace chorus
