// host_reduce.cc — one ISA variant of the host kernels.
//
// kernels/meson.build compiles this file several times (x86-64-v2, AVX2, AVX-512) with
// -DCHORUS_ISA_NS=<namespace> -DCHORUS_ISA_NAME="<name>"; each copy lives in its own
// namespace and exports only its IsaOps table (see host_isa.h, host_dispatch.cc).
//
// Shape of every kernel: an optional scalar head (to align dst for streaming stores), a
// register loop unrolled 4x, one more single-register loop, and a tail that is one masked
// step on AVX-512 or scalar elsewhere. Tails and heads use the scalar ops of reduce.h; the
// register code computes the same bits (tested per variant).
#include "kernels/reduce.h"  // first: opens the variant's inline namespace
#include "kernels/host/host_vec.h"
#include "kernels/host/host_isa.h"

#include <algorithm>

#if !defined(CHORUS_ISA_NAME)
#error "compile with -DCHORUS_ISA_NAME=\"<name>\""
#endif

namespace chorus {
namespace kernels {
inline namespace CHORUS_ISA_NS {
namespace {

using vec::Vec;
using uchar = unsigned char;

template <class T>
inline T loadT(const uchar* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // pointers need not be aligned
  return v;
}
template <class T>
inline void storeT(uchar* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

// The four operations: a scalar functor from reduce.h and its register twin.
struct OpSum {
  template <class T>
  using F = FuncSum<T>;
  template <class C>
  static Vec<C> v(Vec<C> a, Vec<C> b) {
    return vec::VMath<C>::add(a, b);
  }
};
struct OpProd {
  template <class T>
  using F = FuncProd<T>;
  template <class C>
  static Vec<C> v(Vec<C> a, Vec<C> b) {
    return vec::VMath<C>::mul(a, b);
  }
};
struct OpMax {
  template <class T>
  using F = FuncMax<T>;
  template <class C>
  static Vec<C> v(Vec<C> a, Vec<C> b) {
    return vec::VMath<C>::max(a, b);
  }
};
struct OpMin {
  template <class T>
  using F = FuncMin<T>;
  template <class C>
  static Vec<C> v(Vec<C> a, Vec<C> b) {
    return vec::VMath<C>::min(a, b);
  }
};

/// The decorations of one call, in storage and register form.
template <class L>
struct Extra {
  typename L::Storage scalar{};  // preMul factor
  typename L::V scalarV{};       // the same, widened and broadcast
  int n = 1;                     // postDiv divisor
};

/// dst = post(acc OP pre(local)) for one element, the reduce.h way.
template <class L, class Op, bool kAcc, bool kPre, bool kPost>
inline void scalarOne(uchar* d, const uchar* a, const uchar* l, size_t i, const Extra<L>& x) {
  using T = typename L::Storage;
  const size_t off = i * L::kSize;
  T v = loadT<T>(l + off);
  if constexpr (kPre) v = applyPreMul(v, x.scalar);
  if constexpr (kAcc)
    v = typename Op::template F<T>()(loadT<T>(a + off), v);  // a may be null otherwise
  if constexpr (kPost) v = applyPostDiv(v, x.n);
  storeT(d + off, v);
}

/// The same on one register of kN elements (values still in compute form).
template <class L, class Op, bool kAcc, bool kPre, bool kPost>
inline typename L::V vecOne(typename L::V lv, typename L::V av, const Extra<L>& x) {
  using M = vec::VMath<typename L::C>;
  if (kPre) lv = L::round(M::mul(lv, x.scalarV));
  if (kAcc) lv = Op::template v<typename L::C>(av, lv);
  if (kPost) lv = M::div(L::round(lv), x.n);
  return lv;
}

/// Elements before dst reaches the alignment a streaming store needs; SIZE_MAX when it
/// never can (dst not even element-aligned: then plain stores are used).
template <class L>
inline size_t streamHead(const uchar* d) {
  const size_t mis = reinterpret_cast<uintptr_t>(d) % L::kStoreBytes;
  if (mis % L::kSize) return SIZE_MAX;
  return mis ? (L::kStoreBytes - mis) / L::kSize : 0;
}

/// The kernel: dst[i] = post(acc[i] OP pre(local[i])), i < n.
/// Loads of a register group happen before its stores, so dst may equal acc or local.
template <class L, class Op, bool kAcc, bool kPre, bool kPost>
void run(uchar* d, const uchar* a, const uchar* l, size_t n, const Extra<L>& x, bool stream) {
  constexpr size_t N = L::kN, S = L::kSize;
  using V = typename L::V;
  auto one = [&](size_t i) { scalarOne<L, Op, kAcc, kPre, kPost>(d, a, l, i, x); };
  auto loadA = [&](size_t i) {
    if constexpr (kAcc)
      return L::load(a + i * S);
    else
      return V{};
  };
  auto calc = [&](V lv, V av) { return vecOne<L, Op, kAcc, kPre, kPost>(lv, av, x); };

  size_t i = 0;
  if (stream) {
    const size_t head = streamHead<L>(d);
    if (head == SIZE_MAX || n < head + 4 * N) {
      stream = false;  // too small or never alignable: not worth it
    } else {
      for (; i < head; ++i) one(i);
    }
  }
  if (stream) {
    for (; i + 4 * N <= n; i += 4 * N) {
      const V r0 = calc(L::load(l + i * S), loadA(i));
      const V r1 = calc(L::load(l + (i + N) * S), loadA(i + N));
      const V r2 = calc(L::load(l + (i + 2 * N) * S), loadA(i + 2 * N));
      const V r3 = calc(L::load(l + (i + 3 * N) * S), loadA(i + 3 * N));
      L::stream(d + i * S, r0);
      L::stream(d + (i + N) * S, r1);
      L::stream(d + (i + 2 * N) * S, r2);
      L::stream(d + (i + 3 * N) * S, r3);
    }
  } else {
    for (; i + 4 * N <= n; i += 4 * N) {
      const V r0 = calc(L::load(l + i * S), loadA(i));
      const V r1 = calc(L::load(l + (i + N) * S), loadA(i + N));
      const V r2 = calc(L::load(l + (i + 2 * N) * S), loadA(i + 2 * N));
      const V r3 = calc(L::load(l + (i + 3 * N) * S), loadA(i + 3 * N));
      L::store(d + i * S, r0);
      L::store(d + (i + N) * S, r1);
      L::store(d + (i + 2 * N) * S, r2);
      L::store(d + (i + 3 * N) * S, r3);
    }
  }
  for (; i + N <= n; i += N) L::store(d + i * S, calc(L::load(l + i * S), loadA(i)));
  if (i < n) {
#if CHORUS_VEC_MASKED
    const size_t k = n - i;
    V av{};
    if constexpr (kAcc) av = L::loadPartial(a + i * S, k);
    L::storePartial(d + i * S, calc(L::loadPartial(l + i * S, k), av), k);
#else
    for (; i < n; ++i) one(i);
#endif
  }
  if (stream) vec::streamFence();
}

/// Rare combinations (pre-multiplication with prod/max/min): correct, not vectorized.
template <class L, class Op>
void runScalar(uchar* d, const uchar* a, const uchar* l, size_t n, const Extra<L>& x, bool pre,
               bool post) {
  using T = typename L::Storage;
  for (size_t i = 0; i < n; ++i) {
    T v = loadT<T>(l + i * L::kSize);
    if (pre) v = applyPreMul(v, x.scalar);
    if (a) v = typename Op::template F<T>()(loadT<T>(a + i * L::kSize), v);
    if (post) v = applyPostDiv(v, x.n);
    storeT(d + i * L::kSize, v);
  }
}

void copyImpl(void* dst, const void* src, size_t bytes, bool streaming);

/// The kernels one (type, op) needs, chosen by the flags. kSum: pre-multiplication is
/// vectorized only for sum, the one op it is defined for (PreMulSum, float avg).
template <class L, class Op, bool kSum>
void runOp(uchar* d, const uchar* a, const uchar* l, size_t n, const Extra<L>& x, bool pre,
           bool post, bool stream) {
  if (pre && !kSum) return runScalar<L, Op>(d, a, l, n, x, pre, post);
  if (pre) {
    if constexpr (kSum) {
      if (post) return run<L, Op, true, true, true>(d, a, l, n, x, stream);
      return run<L, Op, true, true, false>(d, a, l, n, x, stream);
    }
  }
  if (post) return run<L, Op, true, false, true>(d, a, l, n, x, stream);
  return run<L, Op, true, false, false>(d, a, l, n, x, stream);
}

template <class L>
void reduceType(const ReduceSpec& spec, uchar* d, const uchar* a, const uchar* l, size_t n,
                unsigned flags) {
  const bool pre = (flags & kApplyPre) && spec.preMul;
  const bool post = (flags & kApplyPost) && spec.postDiv > 1;
  const bool stream = (flags & kStreaming) != 0;
  Extra<L> x;
  if (pre) {
    std::memcpy(&x.scalar, spec.scalar, sizeof x.scalar);
    x.scalarV = vec::VMath<typename L::C>::splat(Elem<typename L::Storage>::toC(x.scalar));
  }
  x.n = spec.postDiv;

  if (!a) {  // first contribution: no combine, the op does not matter
    if (!pre && !post) {
      if (d != l) copyImpl(d, l, n * L::kSize, stream);
      return;
    }
    if (pre && post) return run<L, OpSum, false, true, true>(d, a, l, n, x, stream);
    if (pre) return run<L, OpSum, false, true, false>(d, a, l, n, x, stream);
    return run<L, OpSum, false, false, true>(d, a, l, n, x, stream);
  }
  switch (spec.kind) {
    case ReduceKind::Sum: return runOp<L, OpSum, true>(d, a, l, n, x, pre, post, stream);
    case ReduceKind::Prod: return runOp<L, OpProd, false>(d, a, l, n, x, pre, post, stream);
    case ReduceKind::Max: return runOp<L, OpMax, false>(d, a, l, n, x, pre, post, stream);
    case ReduceKind::Min: return runOp<L, OpMin, false>(d, a, l, n, x, pre, post, stream);
  }
}

void reduceImpl(const ReduceSpec& spec, void* dst, const void* acc, const void* local, size_t count,
                unsigned flags) {
  if (count == 0) return;
  auto* d = static_cast<uchar*>(dst);
  auto* a = static_cast<const uchar*>(acc);
  auto* l = static_cast<const uchar*>(local);
  switch (spec.type) {
    case chorusInt8: return reduceType<vec::NativeLanes<int8_t>>(spec, d, a, l, count, flags);
    case chorusUint8: return reduceType<vec::NativeLanes<uint8_t>>(spec, d, a, l, count, flags);
    case chorusInt32: return reduceType<vec::NativeLanes<int32_t>>(spec, d, a, l, count, flags);
    case chorusUint32: return reduceType<vec::NativeLanes<uint32_t>>(spec, d, a, l, count, flags);
    case chorusInt64: return reduceType<vec::NativeLanes<int64_t>>(spec, d, a, l, count, flags);
    case chorusUint64: return reduceType<vec::NativeLanes<uint64_t>>(spec, d, a, l, count, flags);
    case chorusFloat16: return reduceType<vec::HalfLanes>(spec, d, a, l, count, flags);
    case chorusFloat32: return reduceType<vec::NativeLanes<float>>(spec, d, a, l, count, flags);
    case chorusFloat64: return reduceType<vec::NativeLanes<double>>(spec, d, a, l, count, flags);
    case chorusBfloat16: return reduceType<vec::Bf16Lanes>(spec, d, a, l, count, flags);
    default: return;  // callers validate types; an invalid one writes nothing
  }
}

/// memcpy, or non-temporal stores of whole registers between a memcpy'd head and tail.
void copyImpl(void* dst, const void* src, size_t bytes, bool streaming) {
  constexpr size_t B = vec::kVB;
  using V = Vec<unsigned char>;
  // Below a few registers the head/tail handling costs more than the cache pollution.
  if (!streaming || bytes < 8 * B) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<uchar*>(dst);
  auto* s = static_cast<const uchar*>(src);
  const size_t head = (B - reinterpret_cast<uintptr_t>(d) % B) % B;
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 4 * B <= bytes; i += 4 * B) {
    const V v0 = vec::loadu<V>(s + i), v1 = vec::loadu<V>(s + i + B);
    const V v2 = vec::loadu<V>(s + i + 2 * B), v3 = vec::loadu<V>(s + i + 3 * B);
    vec::streamStore<B>(d + i, &v0);
    vec::streamStore<B>(d + i + B, &v1);
    vec::streamStore<B>(d + i + 2 * B, &v2);
    vec::streamStore<B>(d + i + 3 * B, &v3);
  }
  for (; i + B <= bytes; i += B) {
    const V v = vec::loadu<V>(s + i);
    vec::streamStore<B>(d + i, &v);
  }
  std::memcpy(d + i, s + i, bytes - i);
  vec::streamFence();
}

/// reduce() into dst (ordinary stores), and the same values into dst2, in one pass over the
/// inputs: block by block, each block reduced into dst and then copied from there while it
/// is still in L1. kFuseBlock bytes of output per block: with its two input blocks it stays
/// within a quarter-to-half of the smallest L1d of any x86-64 or Arm server core (32 KiB),
/// so the copy's reads hit L1 on every CPU.
/// With streaming stores for dst2 (large outputs, whose inputs come from DRAM) the blocks
/// are not used: short bursts of streaming stores between the reads cost more than the
/// second read of dst saves (a 512 KiB piece of a 64 MiB buffer on Zen 5: 0.78-0.89x with
/// 4 KiB blocks, par with 64 KiB ones; docs/PERF.md#perf-fused-reduce-copy), so the whole of
/// dst is reduced first and then streamed out in one run.
constexpr size_t kFuseBlock = 4096;

void reduceCopyImpl(const ReduceSpec& spec, void* dst, void* dst2, const void* acc,
                    const void* local, size_t count, unsigned flags) {
  if (count == 0) return;
  const size_t elem = typeBytes(spec.type);
  if (elem == 0) return;
  const bool stream = (flags & kStreaming) != 0;
  const unsigned f = flags & ~static_cast<unsigned>(kStreaming);
  if (stream) {
    reduceImpl(spec, dst, acc, local, count, f);
    copyImpl(dst2, dst, count * elem, true);
    return;
  }
  const size_t step = kFuseBlock / elem;
  auto* d = static_cast<uchar*>(dst);
  auto* d2 = static_cast<uchar*>(dst2);
  auto* a = static_cast<const uchar*>(acc);
  auto* l = static_cast<const uchar*>(local);
  for (size_t i = 0; i < count; i += step) {
    const size_t k = std::min(step, count - i), o = i * elem;
    reduceImpl(spec, d + o, a ? a + o : nullptr, l + o, k, f);
    if (k * elem != 0) std::memcpy(d2 + o, d + o, k * elem);
  }
}

// Bulk conversions through the register code of the reduce kernels.
template <class L, bool kToFloat>
void convert(void* dst, const void* src, size_t n) {
  auto* d = static_cast<uchar*>(dst);
  auto* s = static_cast<const uchar*>(src);
  constexpr size_t N = L::kN;
  using Store = typename L::Storage;
  size_t i = 0;
  if constexpr (kToFloat) {
    for (; i + N <= n; i += N) vec::storeu(d + i * 4, L::load(s + i * 2));
    for (; i < n; ++i) storeT(d + i * 4, Elem<Store>::toC(loadT<Store>(s + i * 2)));
  } else {
    for (; i + N <= n; i += N) L::store(d + i * 2, vec::loadu<typename L::V>(s + i * 4));
    for (; i < n; ++i) storeT(d + i * 2, Elem<Store>::fromC(loadT<float>(s + i * 4)));
  }
}
void halfToFloatImpl(float* d, const uint16_t* s, size_t n) {
  convert<vec::HalfLanes, true>(d, s, n);
}
void floatToHalfImpl(uint16_t* d, const float* s, size_t n) {
  convert<vec::HalfLanes, false>(d, s, n);
}
void bf16ToFloatImpl(float* d, const uint16_t* s, size_t n) {
  convert<vec::Bf16Lanes, true>(d, s, n);
}
void floatToBf16Impl(uint16_t* d, const float* s, size_t n) {
  convert<vec::Bf16Lanes, false>(d, s, n);
}

}  // namespace

extern const IsaOps kOps;
const IsaOps kOps = {CHORUS_ISA_NAME, reduceImpl,      copyImpl,        halfToFloatImpl,
                     floatToHalfImpl, bf16ToFloatImpl, floatToBf16Impl, reduceCopyImpl};

}  // namespace CHORUS_ISA_NS
}  // namespace kernels
}  // namespace chorus
