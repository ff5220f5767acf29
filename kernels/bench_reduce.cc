// bench_reduce.cc — micro-benchmark of the host kernels, per ISA variant this CPU runs.
//
//   build-*/kernels/bench_reduce [--benchmark_filter=...]
//
// Reduce bandwidth is reported per OUTPUT byte (count * sizeof(T)), like the `c = a + b`
// row of docs/PERFORMANCE.md; the kernel itself reads twice that. Copies report bytes
// copied. Buffers are distinct (dst, acc, local) and touched before timing.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/host/host_isa.h"

namespace ck = chorus::kernels;

namespace {

struct Buffer {
  explicit Buffer(size_t bytes)
      : p(static_cast<unsigned char*>(std::aligned_alloc(4096, round(bytes)))) {
    std::memset(p, 0, round(bytes));
  }
  ~Buffer() { std::free(p); }
  static size_t round(size_t b) { return (b + 4095) / 4096 * 4096; }
  unsigned char* p;
};

void reduceF32(benchmark::State& st, const ck::IsaOps* ops, unsigned flags) {
  const size_t bytes = static_cast<size_t>(st.range(0));
  const size_t count = bytes / sizeof(float);
  Buffer dst(bytes), acc(bytes), local(bytes);
  auto* a = reinterpret_cast<float*>(acc.p);
  auto* l = reinterpret_cast<float*>(local.p);
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<float>(i % 1000) * 0.25f;
    l[i] = 1.5f;
  }
  ck::ReduceSpec spec;  // float32 sum
  for (auto _ : st) {
    ops->reduce(spec, dst.p, acc.p, local.p, count, flags);
    benchmark::DoNotOptimize(dst.p);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(bytes));
}

void copyBytes(benchmark::State& st, const ck::IsaOps* ops, bool streaming) {
  const size_t bytes = static_cast<size_t>(st.range(0));
  Buffer dst(bytes), src(bytes);
  std::memset(src.p, 1, bytes);
  for (auto _ : st) {
    ops->copy(dst.p, src.p, bytes, streaming);
    benchmark::DoNotOptimize(dst.p);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(bytes));
}

// Latency of the tiny reductions the 8-byte all-reduce path makes (through the public
// dispatching entry point, as the library calls it).
void smallReduce(benchmark::State& st, chorusDataType_t type) {
  const size_t count = static_cast<size_t>(st.range(0));
  alignas(64) unsigned char d[512] = {}, a[512] = {}, l[512] = {};
  ck::ReduceSpec spec;
  spec.type = type;
  for (auto _ : st) {
    ck::reduce(spec, d, a, l, count, 0);
    benchmark::DoNotOptimize(d);
    benchmark::ClobberMemory();
  }
}

// A ring step's result to the outgoing slot and the user's buffer: reduce into the slot and
// copy the slot out (`fused` false) or reduceCopy (true). The slot (and the peer's slot it
// reads) is one 512 KiB piece that stays in cache; the user's buffers are range(0) bytes,
// walked piece by piece (range(1): streaming stores for the output).
void ringStep(benchmark::State& st, const ck::IsaOps* ops, bool fused) {
  const size_t bytes = static_cast<size_t>(st.range(0));
  const bool stream = st.range(1) != 0;
  const size_t piece = std::min<size_t>(bytes, 512 << 10), count = piece / sizeof(float);
  Buffer slotIn(piece), slotOut(piece), in(bytes), out(bytes);
  std::memset(slotIn.p, 0, piece);
  std::memset(in.p, 0, bytes);
  ck::ReduceSpec spec;  // float32 sum
  const unsigned flags = stream ? ck::kStreaming : 0u;
  for (auto _ : st) {
    for (size_t o = 0; o + piece <= bytes; o += piece) {
      if (fused) {
        ops->reduceCopy(spec, slotOut.p, out.p + o, slotIn.p, in.p + o, count, flags);
      } else {
        ops->reduce(spec, slotOut.p, slotIn.p, in.p + o, count, 0);
        ops->copy(out.p + o, slotOut.p, piece, stream);
      }
    }
    benchmark::DoNotOptimize(out.p);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(bytes));
}

void registerAll() {
  const long kSizes[] = {64 << 10, 1 << 20, 16 << 20};
  for (int i = 0; i < ck::kNumIsas; ++i) {
    const ck::IsaOps* ops = ck::isaOps(static_cast<ck::Isa>(i));
    if (!ops) continue;
    const std::string isa = ops->name;
    auto add = [&](const std::string& name, auto fn) {
      auto* b = benchmark::RegisterBenchmark(name.c_str(), fn);
      for (long s : kSizes) b->Arg(s);
      b->MinTime(0.2);
    };
    add("sum_f32/" + isa, [ops](benchmark::State& st) { reduceF32(st, ops, 0); });
    add("sum_f32_stream/" + isa,
        [ops](benchmark::State& st) { reduceF32(st, ops, ck::kStreaming); });
    add("copy/" + isa, [ops](benchmark::State& st) { copyBytes(st, ops, false); });
    add("copy_stream/" + isa, [ops](benchmark::State& st) { copyBytes(st, ops, true); });
    for (bool fused : {false, true}) {
      auto* b = benchmark::RegisterBenchmark(
          ((fused ? "ring_step_reduce_copy/" : "ring_step_reduce_then_copy/") + isa).c_str(),
          [ops, fused](benchmark::State& st) { ringStep(st, ops, fused); });
      b->Args({512 << 10, 0})->Args({4 << 20, 0})->Args({64 << 20, 1})->MinTime(0.2);
    }
  }
  benchmark::RegisterBenchmark("small_sum_f32/dispatched",
                               [](benchmark::State& st) { smallReduce(st, chorusFloat32); })
      ->Arg(2)
      ->Arg(16)
      ->Arg(64);
  benchmark::RegisterBenchmark("small_sum_bf16/dispatched",
                               [](benchmark::State& st) { smallReduce(st, chorusBfloat16); })
      ->Arg(4)
      ->Arg(64);
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  // The dispatcher's choice comes as an argument (the library passes CHORUS_KERNEL_ISA at
  // communicator init); this benchmark links the kernels alone and does the same.
  benchmark::AddCustomContext("chorus_isa", ck::selectIsa(std::getenv("CHORUS_KERNEL_ISA")));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
