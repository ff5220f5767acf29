// test_device_path.cc — the device data path (src/cuda) on the CUDA TEST STAND-IN: piece
// planning, pointer classification with injected attributes, ordering with the user's
// stream (an asynchronous stream with a delay before every operation, so a missing wait
// gives wrong data), the schedule per call, staging reuse, and every collective x type x op
// on 1..4 ranks sharing one (stand-in) GPU, against an independent reference.
// Runs with CHORUS_CUDA_PIECE_BYTES=1024 (tests/unit/cuda/meson.build), so calls split.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chorus.h"
#include "tests/unit/cuda/coll_matrix.h"
#include "src/cuda/device_path.h"
#include "src/cuda/pieces.h"
#include "tests/unit/cuda/cuda_standin.h"
#include "tests/unit/cuda/standin_env.h"

namespace cu = chorus::cuda;
using chorus::Coll;

namespace {}  // namespace

TEST(CudaPieces, LayoutOfEveryCollective) {
  // (coll, rank, root) -> blocks of send and recv, n = 4
  struct Row {
    Coll c;
    int rank, root, send, recv;
  };
  const Row rows[] = {
      {Coll::AllReduce, 1, -1, 1, 1},     {Coll::Broadcast, 2, 2, 1, 1},
      {Coll::Broadcast, 1, 2, 0, 1},      {Coll::Reduce, 2, 2, 1, 1},
      {Coll::Reduce, 0, 2, 1, 0},         {Coll::AllGather, 3, -1, 1, 4},
      {Coll::ReduceScatter, 0, -1, 4, 1}, {Coll::Scatter, 1, 1, 4, 1},
      {Coll::Scatter, 0, 1, 0, 1},        {Coll::Gather, 1, 1, 1, 4},
      {Coll::Gather, 3, 1, 1, 0},         {Coll::AllToAll, 2, -1, 4, 4},
      {Coll::Send, 0, 3, 1, 0},           {Coll::Recv, 3, 0, 0, 1},
      {Coll::Barrier, 0, -1, 0, 0},
  };
  for (const Row& r : rows) {
    const cu::CallLayout l = cu::callLayout(r.c, 4, r.rank, r.root);
    EXPECT_EQ(l.send.nblocks, r.send) << static_cast<int>(r.c) << " rank " << r.rank;
    EXPECT_EQ(l.recv.nblocks, r.recv) << static_cast<int>(r.c) << " rank " << r.rank;
  }
}

TEST(CudaPieces, SplitCoversEveryElementOnce) {
  struct Row {
    size_t count, elem, piece;
    std::vector<size_t> want;
  };
  const Row rows[] = {
      {0, 4, 1024, {0}},         // count 0: one empty piece, the call still runs
      {100, 4, 0, {100}},        // 0: no splitting
      {256, 4, 1024, {256}},     // exactly one piece
      {257, 4, 1024, {256, 1}},  // a remainder
      {1000, 8, 1024, {128, 128, 128, 128, 128, 128, 128, 104}},
      {10, 8, 3, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},  // piece smaller than an element: one element
      {7, 2, 5, {2, 2, 2, 1}},                     // rounded down to whole elements
  };
  for (const Row& r : rows) {
    const auto p = cu::splitPieces(r.count, r.elem, r.piece);
    ASSERT_EQ(p.size(), r.want.size()) << r.count << "/" << r.elem << "/" << r.piece;
    size_t next = 0;
    for (size_t k = 0; k < p.size(); ++k) {
      EXPECT_EQ(p[k].first, next);
      EXPECT_EQ(p[k].count, r.want[k]);
      next += p[k].count;
    }
    EXPECT_EQ(next, r.count);
  }
}

TEST(CudaDevicePath, PieceSizeComesFromTheRegistry) {
  EXPECT_EQ(cu::pieceBytes(), 1024u) << "meson runs this test with CHORUS_CUDA_PIECE_BYTES=1024";
}

TEST(CudaDevicePath, NoGpuIsRefusedWithTheReason) {
  standin::CudaStandin rt(1 << 20);
  rt.setNoGpu(true);
  void* cs = rt.createStream();
  chorusStream_t s = reinterpret_cast<chorusStream_t>(0x1);
  EXPECT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusInvalidUsage);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("no CUDA-capable device"),
            std::string::npos)
      << chorusGetLastError(nullptr);
}

TEST(CudaDevicePath, ForeignCudaStreamIsRefused) {
  standin::CudaStandin rt(1 << 20);
  int notAStream = 0;
  chorusStream_t s = nullptr;
  EXPECT_EQ(cu::streamFromRuntime(rt, &notAStream, &s), chorusInvalidUsage);
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("not a usable CUDA stream"),
            std::string::npos);
}

// Pointer classification with injected attributes: the stand-in says which memory is
// "device"; on a wrapped stream it is accepted, on the NULL stream it is refused (the host
// cannot touch it) with a message, and a device address outside any allocation is refused.
TEST(CudaDevicePath, ClassificationDecidesWhatIsAccepted) {
  standin::CudaStandin rt(8 << 20);
  chorusComm_t comm;
  ASSERT_EQ(chorusCommInitAll(&comm, 1, nullptr), chorusSuccess);
  void* cs = rt.createStream();
  chorusStream_t s = nullptr;
  ASSERT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusSuccess);
  void* dev = rt.deviceAlloc(4096);
  std::vector<float> host(1024, 1.0f);

  EXPECT_EQ(chorusAllReduce(dev, dev, 1024, chorusFloat32, chorusSum, comm, s), chorusSuccess);
  EXPECT_EQ(chorusAllReduce(host.data(), dev, 1024, chorusFloat32, chorusSum, comm, s),
            chorusSuccess);
  EXPECT_EQ(chorusAllReduce(dev, host.data(), 1024, chorusFloat32, chorusSum, comm, s),
            chorusSuccess);
  EXPECT_EQ(chorusStreamSynchronize(s), chorusSuccess) << chorusGetLastError(nullptr);

  // Device memory on the NULL stream: the host path's checks refuse it, naming the cause.
  const chorusResult_t r =
      chorusAllReduce(dev, host.data(), 1024, chorusFloat32, chorusSum, comm, nullptr);
  EXPECT_EQ(r, chorusInvalidUsage);
  const std::string msg = chorusGetLastError(comm);
  EXPECT_NE(msg.find("not readable host memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GPU"), std::string::npos) << msg;

  // A "device" address that no allocation covers is not device memory: refused.
  void* stray = static_cast<char*>(dev) + (4 << 20);
  EXPECT_EQ(chorusAllReduce(stray, host.data(), 16, chorusFloat32, chorusSum, comm, s),
            chorusInvalidUsage);
  // What CUDA cannot classify at all is refused with CUDA's reason.
  rt.setNoGpu(true);
  EXPECT_EQ(chorusAllReduce(dev, dev, 16, chorusFloat32, chorusSum, comm, s), chorusInvalidUsage);
  EXPECT_NE(std::string(chorusGetLastError(comm)).find("no CUDA-capable device"),
            std::string::npos);
  rt.setNoGpu(false);

  EXPECT_EQ(chorusStreamDestroy(s), chorusSuccess);
  rt.destroyStream(cs);
  EXPECT_EQ(chorusCommDestroy(comm), chorusSuccess);
}

// The schedule of one call: 8 pieces of 1024 bytes for 1000 float64 -> per piece one copy
// in, one event, one wait, one copy out, then one "done" event. Staging is pooled: calls
// one after another allocate pinned memory once.
TEST(CudaDevicePath, ScheduleAndStagingReuse) {
  standin::CudaStandin rt(8 << 20);
  chorusComm_t comm;
  ASSERT_EQ(chorusCommInitAll(&comm, 1, nullptr), chorusSuccess);
  void* cs = rt.createStream();
  chorusStream_t s = nullptr;
  ASSERT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusSuccess);
  ASSERT_TRUE(cu::forcePathForTests(s, cu::PathMode::Staging));  // this schedule is staging's
  void* a = rt.deviceAlloc(8000);
  void* b = rt.deviceAlloc(8000);
  // The first call of a stream and communicator agrees on the path (CHORUS_CUDA_PATH) on
  // the stream's worker and stages that one call there; the schedule below is every later
  // call's.
  ASSERT_EQ(chorusAllReduce(a, b, 1000, chorusFloat64, chorusSum, comm, s), chorusSuccess);
  ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess);
  const uint64_t c0 = rt.copies(), w0 = rt.waits(), r0 = rt.records();
  ASSERT_EQ(chorusAllReduce(a, b, 1000, chorusFloat64, chorusSum, comm, s), chorusSuccess);
  EXPECT_EQ(rt.copies() - c0, 16u);
  EXPECT_EQ(rt.waits() - w0, 8u);
  EXPECT_EQ(rt.records() - r0, 9u);
  ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess);
  // A call in flight holds its own staging; a finished call's staging serves the next.
  const uint64_t allocs = rt.hostAllocs();
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(chorusAllReduce(a, b, 1000, chorusFloat64, chorusSum, comm, s), chorusSuccess);
    ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess);
  }
  EXPECT_EQ(rt.hostAllocs(), allocs) << "staging must be reused, not allocated per call";
  // Many calls queued back to back: each gets staging of its own, all complete.
  for (int i = 0; i < 20; ++i)
    ASSERT_EQ(chorusAllReduce(a, b, 1000, chorusFloat64, chorusSum, comm, s), chorusSuccess);
  ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess);
  EXPECT_EQ(chorusStreamDestroy(s), chorusSuccess);
  rt.destroyStream(cs);
  EXPECT_EQ(chorusCommDestroy(comm), chorusSuccess);
}

// The call returns before its data exists: a "user kernel" queued before it writes the
// input late (the stream is slow), one queued after reads the output. Correct results
// mean the host side waited for the input and the stream waited for the host side.
void orderedWithTheUsersStream(cu::PathMode mode) {
  standin::CudaStandin rt(8 << 20);
  rt.setOpDelayUs(2000);
  chorusComm_t comms[2];
  ASSERT_EQ(chorusCommInitAll(comms, 2, nullptr), chorusSuccess);
  std::vector<std::string> errs;
  std::mutex m;
  auto rank = [&](int r) {
    void* cs = rt.createStream();
    chorusStream_t s = nullptr;
    ASSERT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusSuccess);
    cu::forcePathForTests(s, mode);
    const size_t n = 3000;  // 12 KB: 12 pieces
    void* d = rt.deviceAlloc(n * 4);
    auto* view = static_cast<float*>(rt.hostView(d));
    std::vector<float> out(n, -1.0f);
    rt.enqueue(cs, [=] {  // a long "user kernel": its output is the call's input
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      for (size_t i = 0; i < n; ++i) view[i] = float(r + 1) * float(i % 7);
    });
    ASSERT_EQ(chorusAllReduce(d, d, n, chorusFloat32, chorusSum, comms[r], s), chorusSuccess);
    rt.enqueue(cs, [&out, view] { std::memcpy(out.data(), view, out.size() * 4); });
    ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess);
    for (size_t i = 0; i < n; ++i)
      if (out[i] != 3.0f * float(i % 7)) {
        std::lock_guard<std::mutex> lock(m);
        errs.push_back("rank " + std::to_string(r) + " element " + std::to_string(i) + " = " +
                       std::to_string(out[i]));
        break;
      }
    EXPECT_EQ(chorusStreamDestroy(s), chorusSuccess);
    rt.destroyStream(cs);
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  EXPECT_TRUE(errs.empty()) << joined(errs);
  for (auto c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}
TEST(CudaDevicePath, OrderedWithTheUsersStreamStaging) {
  orderedWithTheUsersStream(cu::PathMode::Staging);
}
TEST(CudaDevicePath, OrderedWithTheUsersStreamDevice) {
  orderedWithTheUsersStream(cu::PathMode::Device);
}

// Host buffers on a CUDA stream (pageable in, pinned out, and in place), 2 ranks, ordered
// with the stream: the worker copies them (cudart would not order host-to-host copies).
void hostBuffersOnACudaStream(cu::PathMode mode) {
  standin::CudaStandin rt(8 << 20);
  rt.setOpDelayUs(500);
  chorusComm_t comms[2];
  ASSERT_EQ(chorusCommInitAll(comms, 2, nullptr), chorusSuccess);
  std::vector<std::string> errs;
  std::mutex m;
  auto rank = [&](int r) {
    void* cs = rt.createStream();
    chorusStream_t s = nullptr;
    ASSERT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusSuccess);
    cu::forcePathForTests(s, mode);
    const size_t n = 2500;  // 10 KB of int32: 10 pieces
    std::vector<int32_t> in(n), inout(n);
    void* pinnedHost = nullptr;
    void* pinnedDev = nullptr;
    std::string e;
    ASSERT_TRUE(rt.hostAllocMapped(n * 4, &pinnedHost, &pinnedDev, &e));
    auto* out = static_cast<int32_t*>(pinnedHost);
    // The inputs are written by "kernels" queued before the calls, late (slow stream).
    rt.enqueue(cs, [&, r] {
      for (size_t i = 0; i < n; ++i) in[i] = int32_t(i) * (r + 1), inout[i] = int32_t(i) + r;
    });
    ASSERT_EQ(chorusAllReduce(in.data(), out, n, chorusInt32, chorusSum, comms[r], s),
              chorusSuccess);
    ASSERT_EQ(chorusAllReduce(inout.data(), inout.data(), n, chorusInt32, chorusMax, comms[r], s),
              chorusSuccess);
    std::vector<int32_t> seen(n);
    rt.enqueue(cs, [&] { std::memcpy(seen.data(), out, n * 4); });
    ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess) << chorusGetLastError(nullptr);
    for (size_t i = 0; i < n; ++i)
      if (seen[i] != int32_t(i) * 3 || inout[i] != int32_t(i) + 1) {
        std::lock_guard<std::mutex> lock(m);
        errs.push_back("rank " + std::to_string(r) + " element " + std::to_string(i) + ": " +
                       std::to_string(seen[i]) + ", " + std::to_string(inout[i]));
        break;
      }
    EXPECT_EQ(chorusStreamDestroy(s), chorusSuccess);
    rt.destroyStream(cs);
    rt.hostFree(pinnedHost);
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  EXPECT_TRUE(errs.empty()) << joined(errs);
  for (auto c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}
TEST(CudaDevicePath, HostBuffersOnACudaStreamStaging) {
  hostBuffersOnACudaStream(cu::PathMode::Staging);
}
TEST(CudaDevicePath, HostBuffersOnACudaStreamAuto) { hostBuffersOnACudaStream(cu::PathMode::Auto); }

// A read-only host receive buffer on a CUDA stream: the worker finds out before writing,
// the error comes back from chorusStreamSynchronize, nothing crashes, the stream goes on.
void readOnlyHostReceiveBuffer(cu::PathMode mode) {
  standin::CudaStandin rt(1 << 20);
  chorusComm_t comm;
  ASSERT_EQ(chorusCommInitAll(&comm, 1, nullptr), chorusSuccess);
  void* cs = rt.createStream();
  chorusStream_t s = nullptr;
  ASSERT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusSuccess);
  cu::forcePathForTests(s, mode);
  const size_t len = 4 * size_t(sysconf(_SC_PAGESIZE));
  void* ro = mmap(nullptr, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(ro, MAP_FAILED);
  void* dev = rt.deviceAlloc(4096);
  EXPECT_EQ(chorusAllReduce(dev, ro, 1024, chorusFloat32, chorusSum, comm, s), chorusSuccess);
  EXPECT_EQ(chorusStreamSynchronize(s), chorusInvalidArgument);
  EXPECT_NE(std::string(chorusGetLastError(nullptr)).find("not writable"), std::string::npos)
      << chorusGetLastError(nullptr);
  std::vector<float> ok(1024, 2.0f);
  EXPECT_EQ(chorusAllReduce(dev, ok.data(), 1024, chorusFloat32, chorusSum, comm, s),
            chorusSuccess);
  EXPECT_EQ(chorusStreamSynchronize(s), chorusSuccess) << chorusGetLastError(nullptr);
  munmap(ro, len);
  EXPECT_EQ(chorusStreamDestroy(s), chorusSuccess);
  rt.destroyStream(cs);
  EXPECT_EQ(chorusCommDestroy(comm), chorusSuccess);
}
TEST(CudaDevicePath, ReadOnlyHostReceiveBufferIsAnErrorNotACrashStaging) {
  readOnlyHostReceiveBuffer(cu::PathMode::Staging);
}
TEST(CudaDevicePath, ReadOnlyHostReceiveBufferIsAnErrorNotACrashAuto) {
  readOnlyHostReceiveBuffer(cu::PathMode::Auto);
}

// Every collective x type x op, 1..4 ranks on one stand-in GPU, with a slow stream, staged
// through the host (CHORUS_CUDA_PATH=staging; test_direct_path.cc has the device path).
TEST(CudaDevicePath, EveryCollectiveMatchesTheReference) {
  standin::CudaStandin rt(size_t{64} << 20);
  rt.setOpDelayUs(20);
  StandinEnv env(rt, cu::PathMode::Staging);
  collmatrix::Options opt;
  opt.count = 1000;
  const auto errs = collmatrix::run(env, opt);
  EXPECT_TRUE(errs.empty()) << joined(errs);
}
