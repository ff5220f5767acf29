// coll_body.h — the per-thread bodies of the device-path collective kernels, written once
// for the GPU and the host (CHORUS_HD, like reduce.h).
//
// Why bodies over plain pointers: no machine of ours has a GPU. The __global__ kernels in
// kernels/cuda/coll_kernels.cu only compute their thread index and call these functions;
// the unit tests (tests/unit/kernels/test_coll_body.cc) and the CUDA test stand-in call the
// very same functions for every thread index of several grid shapes, so the arithmetic,
// the indexing and the grid-stride coverage are tested here even though the launches are
// not.
//
// A body is told its thread index `t` and the grid's thread count `nt` and handles the
// elements t, t + nt, t + 2 nt, ... of its work, touching nothing else: any grid shape, in
// any thread order, gives the same result (no element is read after another thread may
// have written it, except an element by the thread that owns it).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/reduce.h"
#include "kernels/reduce_spec.h"

namespace chorus {
namespace kernels {

/// Sources of one reduction launch; more ranks are reduced by chained launches whose first
/// source is the previous launch's output (preMask bit 0 clear then).
constexpr int kMaxSources = 8;

/// dst[i] = post(pre0(src[0][i]) OP pre1(src[1][i]) OP ... ) in this fixed order, so every
/// rank computing the same element from the same sources holds the same bits.
struct ReduceArgs {
  void* dst = nullptr;
  const void* src[kMaxSources] = {};
  int nsrc = 0;
  unsigned preMask = 0;  ///< bit j: multiply src[j] by spec.scalar first (spec.preMul)
  bool post = false;     ///< divide the result by spec.postDiv (integer avg)
  size_t count = 0;      ///< elements
  ReduceSpec spec;
};

/// Up to kMaxSources copies of `bytes` each: dst[j][0..bytes) = src[j][0..bytes). Gather,
/// scatter, all-gather and all-to-all are this body with different pointer tables.
struct CopyArgs {
  void* dst[kMaxSources] = {};
  const void* src[kMaxSources] = {};
  int n = 0;
  size_t bytes = 0;
};

/// The widest word (16, 8, 4, 2 or 1 bytes) dividing every address and the length, so a
/// thread moves whole aligned words.
inline size_t copyWord(const CopyArgs& a) {
  uintptr_t bits = a.bytes;
  for (int j = 0; j < a.n; ++j)
    bits |= reinterpret_cast<uintptr_t>(a.dst[j]) | reinterpret_cast<uintptr_t>(a.src[j]);
  for (size_t w = 16; w > 1; w /= 2)
    if (bits % w == 0) return w;
  return 1;
}

/// One reduction thread: element type T, combining functor F (FuncSum<T>, ...).
template <class T, class F>
CHORUS_HD void reduceBody(const ReduceArgs& a, size_t t, size_t nt) {
  T scalar;
  std::memcpy(&scalar, a.spec.scalar, sizeof scalar);
  auto* dst = static_cast<T*>(a.dst);
  for (size_t i = t; i < a.count; i += nt) {
    T v = static_cast<const T*>(a.src[0])[i];
    if (a.preMask & 1u) v = applyPreMul(v, scalar);
    for (int j = 1; j < a.nsrc; ++j) {
      T x = static_cast<const T*>(a.src[j])[i];
      if (a.preMask & (1u << j)) x = applyPreMul(x, scalar);
      v = F()(v, x);
    }
    if (a.post) v = applyPostDiv(v, a.spec.postDiv);
    dst[i] = v;  // dst may alias a source exactly: element i was read above by this thread
  }
}

/// One copy thread moving words of type W (sizeof(W) == copyWord(a)).
template <class W>
CHORUS_HD void copyBody(const CopyArgs& a, size_t t, size_t nt) {
  const size_t words = a.bytes / sizeof(W);
  const size_t total = words * static_cast<size_t>(a.n);
  for (size_t w = t; w < total; w += nt) {
    const size_t j = w / words, i = w % words;
    static_cast<W*>(a.dst[j])[i] = static_cast<const W*>(a.src[j])[i];
  }
}

/// 16-byte word for copyBody<Word16> (a plain struct: one vector load/store on the GPU).
struct alignas(16) Word16 {
  uint64_t lo, hi;
};

/// Calls v.run<T, F>() for the spec's type and kind (host side: picks the kernel).
/// Returns false for an unknown type or kind (the caller reports it).
template <class Visitor>
inline bool visitReduce(const ReduceSpec& spec, Visitor&& v) {
#define CHORUS_VISIT_KIND(T)                                              \
  switch (spec.kind) {                                                    \
    case ReduceKind::Sum: v.template run<T, FuncSum<T>>(); return true;   \
    case ReduceKind::Prod: v.template run<T, FuncProd<T>>(); return true; \
    case ReduceKind::Max: v.template run<T, FuncMax<T>>(); return true;   \
    case ReduceKind::Min: v.template run<T, FuncMin<T>>(); return true;   \
  }                                                                       \
  return false;
  switch (spec.type) {
    case chorusInt8: CHORUS_VISIT_KIND(int8_t)
    case chorusUint8: CHORUS_VISIT_KIND(uint8_t)
    case chorusInt32: CHORUS_VISIT_KIND(int32_t)
    case chorusUint32: CHORUS_VISIT_KIND(uint32_t)
    case chorusInt64: CHORUS_VISIT_KIND(int64_t)
    case chorusUint64: CHORUS_VISIT_KIND(uint64_t)
    case chorusFloat16: CHORUS_VISIT_KIND(f16)
    case chorusFloat32: CHORUS_VISIT_KIND(float)
    case chorusFloat64: CHORUS_VISIT_KIND(double)
    case chorusBfloat16: CHORUS_VISIT_KIND(bf16)
    default: return false;
  }
#undef CHORUS_VISIT_KIND
}

/// Host execution of a launch: every thread of a grid of `nt` threads, in the order given
/// by `order` (a permutation of 0..nt-1; nullptr: ascending). Used by the tests and by the
/// CUDA stand-in's kernel launches.
struct HostReduceRunner {
  const ReduceArgs& a;
  size_t nt;
  const size_t* order;
  template <class T, class F>
  void run() {
    for (size_t k = 0; k < nt; ++k) reduceBody<T, F>(a, order ? order[k] : k, nt);
  }
};
inline bool runReduceOnHost(const ReduceArgs& a, size_t nt, const size_t* order = nullptr) {
  HostReduceRunner v{a, nt, order};
  return visitReduce(a.spec, v);
}

inline void runCopyOnHost(const CopyArgs& a, size_t nt, const size_t* order = nullptr) {
  const size_t w = copyWord(a);
  for (size_t k = 0; k < nt; ++k) {
    const size_t t = order ? order[k] : k;
    switch (w) {
      case 16: copyBody<Word16>(a, t, nt); break;
      case 8: copyBody<uint64_t>(a, t, nt); break;
      case 4: copyBody<uint32_t>(a, t, nt); break;
      case 2: copyBody<uint16_t>(a, t, nt); break;
      default: copyBody<uint8_t>(a, t, nt); break;
    }
  }
}

}  // namespace kernels
}  // namespace chorus
