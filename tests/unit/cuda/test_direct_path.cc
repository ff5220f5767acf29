// test_direct_path.cc — the same-host device path (src/cuda/direct.cc) on the CUDA TEST
// STAND-IN: kernels (the bodies of kernels/coll_body.h run on the stand-in's stream
// threads) reduce and move device memory between thread ranks; the host only orders them.
// Streams run at different speeds per rank (setPerStreamDelayUs), so a missing meeting
// between ranks reads a scratch area too early or overwrites it too soon: wrong data.
// Runs with CHORUS_CUDA_PIECE_BYTES=1024 and CHORUS_CUDA_TWO_SHOT_BYTES=512
// (tests/unit/cuda/meson.build): multi-piece calls, one-shot and two-shot all-reduce.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "chorus.h"
#include "src/cuda/peers.h"
#include "tests/unit/cuda/standin_env.h"

namespace {

// acceptance 1 and 2: every collective (send/recv excepted: they stage, see docs/CUDA.md)
// on the device path, np 1-4, in and out of place, counts 0, 1, 61 (prime, one piece,
// one-shot) and 997 (prime, up to 8 pieces, two-shot for pieces of >= 512 bytes), every type
// and op at 997; exact. No staging: no pinned block beyond each stream's flag, no copy
// touches host memory, and kernels did the work.
TEST(DirectPath, EveryCollectiveOnTheDevicePath) {
  standin::CudaStandin rt(size_t{128} << 20);
  rt.setPerStreamDelayUs(150);
  StandinEnv env(rt, cu::PathMode::Device);
  for (size_t count : {size_t{0}, size_t{1}, size_t{61}, size_t{997}}) {
    collmatrix::Options opt;
    opt.count = count;
    opt.sendRecv = false;
    opt.allTypesAndOps = count == 997;
    const auto errs = collmatrix::run(env, opt);
    EXPECT_TRUE(errs.empty()) << "count " << count << ":\n" << joined(errs);
  }
  EXPECT_EQ(rt.hostAllocs(), static_cast<uint64_t>(env.wraps.load()))
      << "the device path used pinned staging";
  EXPECT_EQ(rt.hostCopies(), 0u) << "the device path copied device data to or from the host";
  EXPECT_GT(rt.reduceLaunches(), 0u);
  EXPECT_GT(rt.copyLaunches(), 0u);
}

// More ranks than one reduction launch takes (8 sources): chained launches, 9 ranks.
TEST(DirectPath, NineRanksChainTheReduction) {
  standin::CudaStandin rt(size_t{128} << 20);
  StandinEnv env(rt, cu::PathMode::Device);
  collmatrix::Options opt;
  opt.nranks = {9};
  opt.count = 200;
  opt.allTypesAndOps = false;
  opt.sendRecv = false;
  const auto errs = collmatrix::run(env, opt);
  EXPECT_TRUE(errs.empty()) << joined(errs);
  EXPECT_EQ(rt.hostCopies(), 0u);
}

// acceptance 3: GPUs without peer access fall back to staging on every rank (auto), exact.
TEST(DirectPath, NoPeerAccessFallsBackToStaging) {
  standin::CudaStandin rt(size_t{64} << 20);
  rt.setNoPeerAccess(true);
  rt.setPerStreamDelayUs(100);
  StandinEnv env(rt, cu::PathMode::Auto);
  collmatrix::Options opt;
  opt.nranks = {2, 3};
  opt.count = 300;
  opt.allTypesAndOps = false;
  const auto errs = collmatrix::run(env, opt);
  EXPECT_TRUE(errs.empty()) << joined(errs);
  EXPECT_EQ(rt.reduceLaunches() + rt.copyLaunches(), 0u) << "no kernel may run without access";
  EXPECT_GT(rt.hostCopies(), 0u);
}

// Two thread ranks, each forcing pathOf(rank) on a stream of its own, run two all-reduces:
// both must fail with chorusInvalidUsage on every rank (the first at its synchronize: the
// path is agreed on the stream's worker, so the call returns at once; the second at the
// call), with a message that contains `needle`.
void expectPathErrorOnEveryRank(standin::CudaStandin& rt, cu::PathMode (*pathOf)(int),
                                const char* needle) {
  chorusComm_t comms[2];
  ASSERT_EQ(chorusCommInitAll(comms, 2, nullptr), chorusSuccess);
  chorusResult_t got[2], first[2];
  std::string msg[2];
  auto rank = [&](int r) {
    void* cs = rt.createStream();
    chorusStream_t s = nullptr;
    ASSERT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusSuccess);
    cu::forcePathForTests(s, pathOf(r));
    void* d = rt.deviceAlloc(64);
    EXPECT_EQ(chorusAllReduce(d, d, 16, chorusFloat32, chorusSum, comms[r], s), chorusSuccess);
    first[r] = chorusStreamSynchronize(s);
    got[r] = chorusAllReduce(d, d, 16, chorusFloat32, chorusSum, comms[r], s);
    msg[r] = chorusGetLastError(comms[r]);
    chorusStreamSynchronize(s);
    chorusStreamDestroy(s);
    rt.destroyStream(cs);
  };
  std::thread t(rank, 1);
  rank(0);
  t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(first[r], chorusInvalidUsage) << r;
    EXPECT_EQ(got[r], chorusInvalidUsage) << r;
    EXPECT_NE(msg[r].find(needle), std::string::npos) << msg[r];
  }
  for (auto c : comms) chorusCommDestroy(c);
}

// acceptance 4: CHORUS_CUDA_PATH=device where it cannot run is an error on every rank.
TEST(DirectPath, ForcedDeviceWithoutPeerAccessIsAnError) {
  standin::CudaStandin rt(size_t{16} << 20);
  rt.setNoPeerAccess(true);
  expectPathErrorOnEveryRank(
      rt, [](int) { return cu::PathMode::Device; }, "cannot reach");
}

// acceptance 4: ranks asking for different paths get a clear error, not a hang.
TEST(DirectPath, MismatchedPathsAreAnErrorOnEveryRank) {
  standin::CudaStandin rt(size_t{16} << 20);
  expectPathErrorOnEveryRank(
      rt, [](int r) { return r == 0 ? cu::PathMode::Staging : cu::PathMode::Device; }, "disagree");
}

// acceptance 3: one rank holds host buffers, the other device buffers: the call is staged
// on every rank (agreed per call), exact; the next all-device call runs kernels again.
TEST(DirectPath, HostAndDeviceBuffersMixed) {
  standin::CudaStandin rt(size_t{16} << 20);
  rt.setPerStreamDelayUs(300);
  chorusComm_t comms[2];
  ASSERT_EQ(chorusCommInitAll(comms, 2, nullptr), chorusSuccess);
  std::vector<std::string> errs;
  std::mutex m;
  uint64_t launchesAfterMix = 0;
  auto rank = [&](int r) {
    void* cs = rt.createStream();
    chorusStream_t s = nullptr;
    ASSERT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusSuccess);
    const size_t n = 777;
    std::vector<float> host(n), out(n);
    for (size_t i = 0; i < n; ++i) host[i] = float(r + 1) * float(i % 13);
    void* d = rt.deviceAlloc(n * 4);
    float* view = static_cast<float*>(rt.hostView(d));
    std::memcpy(view, host.data(), n * 4);
    void* buf = r == 0 ? static_cast<void*>(host.data()) : d;
    EXPECT_EQ(chorusAllReduce(buf, buf, n, chorusFloat32, chorusSum, comms[r], s), chorusSuccess);
    EXPECT_EQ(chorusStreamSynchronize(s), chorusSuccess) << chorusGetLastError(comms[r]);
    const float* res = r == 0 ? host.data() : view;
    for (size_t i = 0; i < n; ++i)
      if (res[i] != 3.0f * float(i % 13)) {
        std::lock_guard<std::mutex> lock(m);
        errs.push_back("mixed: rank " + std::to_string(r) + " element " + std::to_string(i));
        break;
      }
    if (r == 0) launchesAfterMix = rt.reduceLaunches();
    // Then every rank on the device: kernels again.
    for (size_t i = 0; i < n; ++i) view[i] = float(r + 1) * float(i % 13);
    EXPECT_EQ(chorusAllReduce(d, d, n, chorusFloat32, chorusSum, comms[r], s), chorusSuccess);
    EXPECT_EQ(chorusStreamSynchronize(s), chorusSuccess);
    for (size_t i = 0; i < n; ++i)
      if (view[i] != 3.0f * float(i % 13)) {
        std::lock_guard<std::mutex> lock(m);
        errs.push_back("device: rank " + std::to_string(r) + " element " + std::to_string(i) +
                       " = " + std::to_string(view[i]));
        break;
      }
    chorusStreamDestroy(s);
    rt.destroyStream(cs);
  };
  std::thread t(rank, 1);
  rank(0);
  t.join();
  EXPECT_TRUE(errs.empty()) << joined(errs);
  EXPECT_EQ(launchesAfterMix, 0u) << "the mixed call must not run kernels";
  EXPECT_GT(rt.reduceLaunches(), 0u);
  for (auto c : comms) chorusCommDestroy(c);
}

// acceptance 4: a freed device buffer and a device pointer of another context (another
// stand-in: another process's GPU mapping) are clear errors at the call, no hang.
TEST(DirectPath, FreedAndForeignPointersAreRefused) {
  standin::CudaStandin rt(size_t{16} << 20), other(size_t{1} << 20);
  chorusComm_t comm;
  ASSERT_EQ(chorusCommInitAll(&comm, 1, nullptr), chorusSuccess);
  void* cs = rt.createStream();
  chorusStream_t s = nullptr;
  ASSERT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusSuccess);
  void* freed = nullptr;
  std::string err;
  ASSERT_TRUE(rt.deviceMalloc(256, &freed, &err));
  rt.deviceFree(freed);
  EXPECT_EQ(chorusAllReduce(freed, freed, 16, chorusFloat32, chorusSum, comm, s),
            chorusInvalidUsage);
  void* foreign = other.deviceAlloc(256);
  EXPECT_EQ(chorusAllReduce(foreign, foreign, 16, chorusFloat32, chorusSum, comm, s),
            chorusInvalidUsage);
  EXPECT_NE(std::string(chorusGetLastError(comm)).size(), 0u);
  // The stream still works afterwards.
  void* d = rt.deviceAlloc(64);
  EXPECT_EQ(chorusAllReduce(d, d, 16, chorusFloat32, chorusSum, comm, s), chorusSuccess);
  EXPECT_EQ(chorusStreamSynchronize(s), chorusSuccess);
  chorusStreamDestroy(s);
  rt.destroyStream(cs);
  chorusCommDestroy(comm);
}

// Send/recv alone, after a collective agreed on the device path: rank 0 sends then
// receives, rank 1 receives then sends; several pieces; exact. The receiver's kernel copies
// from the sender's scratch (no host copy). Then one side's buffer on the host: the pair
// stages that call, exact too.
TEST(DirectPath, SendRecvOnTheDevicePath) {
  standin::CudaStandin rt(size_t{32} << 20);
  rt.setPerStreamDelayUs(300);
  chorusComm_t comms[2];
  ASSERT_EQ(chorusCommInitAll(comms, 2, nullptr), chorusSuccess);
  std::vector<std::string> errs;
  std::mutex m;
  uint64_t hostCopiesAfterDevice = 0;
  auto rank = [&](int r) {
    void* cs = rt.createStream();
    chorusStream_t s = nullptr;
    ASSERT_EQ(cu::streamFromRuntime(rt, cs, &s), chorusSuccess);
    cu::forcePathForTests(s, cu::PathMode::Device);
    const int peer = 1 - r;
    void* d = rt.deviceAlloc(8);
    ASSERT_EQ(chorusBarrier(comms[r], s), chorusSuccess);  // the agreement
    for (size_t n : {size_t{0}, size_t{1}, size_t{997}}) {
      void* sb = rt.deviceAlloc(n * 4 + 4);
      void* rb = rt.deviceAlloc(n * 4 + 4);
      auto* sv = static_cast<int32_t*>(rt.hostView(sb));
      auto* rv = static_cast<int32_t*>(rt.hostView(rb));
      for (size_t i = 0; i < n; ++i) {
        sv[i] = static_cast<int32_t>(r * 100000 + i);
        rv[i] = -1;
      }
      for (int step = 0; step < 2; ++step) {
        const bool sendNow = (step == 0) == (r == 0);
        ASSERT_EQ(sendNow ? chorusSend(sb, n, chorusInt32, peer, comms[r], s)
                          : chorusRecv(rb, n, chorusInt32, peer, comms[r], s),
                  chorusSuccess);
      }
      ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess) << chorusGetLastError(comms[r]);
      for (size_t i = 0; i < n; ++i)
        if (rv[i] != static_cast<int32_t>(peer * 100000 + i)) {
          std::lock_guard<std::mutex> lock(m);
          errs.push_back("rank " + std::to_string(r) + " count " + std::to_string(n) + " element " +
                         std::to_string(i) + " = " + std::to_string(rv[i]));
          break;
        }
    }
    ASSERT_EQ(chorusBarrier(comms[r], s), chorusSuccess);
    ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess);
    if (r == 0) hostCopiesAfterDevice = rt.hostCopies();
    ASSERT_EQ(chorusBarrier(comms[r], s), chorusSuccess);
    // Rank 0 sends from host memory: the pair stages.
    std::vector<int32_t> host(300, 7);
    void* rb = rt.deviceAlloc(300 * 4);
    if (r == 0)
      ASSERT_EQ(chorusSend(host.data(), 300, chorusInt32, 1, comms[r], s), chorusSuccess);
    else
      ASSERT_EQ(chorusRecv(rb, 300, chorusInt32, 0, comms[r], s), chorusSuccess);
    ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess) << chorusGetLastError(comms[r]);
    if (r == 1) {
      auto* rv = static_cast<int32_t*>(rt.hostView(rb));
      for (int i = 0; i < 300; ++i)
        if (rv[i] != 7) {
          std::lock_guard<std::mutex> lock(m);
          errs.push_back("staged receive element " + std::to_string(i));
          break;
        }
    }
    (void)d;
    chorusStreamDestroy(s);
    rt.destroyStream(cs);
  };
  std::thread t(rank, 1);
  rank(0);
  t.join();
  EXPECT_TRUE(errs.empty()) << joined(errs);
  EXPECT_EQ(hostCopiesAfterDevice, 0u) << "device-path send/recv copied through the host";
  EXPECT_GT(rt.hostCopies(), 0u) << "the mixed pair must have staged";
  EXPECT_GT(rt.copyLaunches(), 0u);
  for (auto c : comms) chorusCommDestroy(c);
}

// acceptance 4: a kernel that fails on one rank (launch error injected on one work stream)
// ends the call on every rank at once: that rank reports the launch error, the other
// chorusRemoteError, long before the 60 s timeout; the next call on the other streams works.
TEST(DirectPath, AKernelFailingOnOneRankStopsEveryRank) {
  standin::CudaStandin rt(size_t{16} << 20);
  chorusComm_t comms[2];
  ASSERT_EQ(chorusCommInitAll(comms, 2, nullptr), chorusSuccess);
  void* cs[2] = {rt.createStream(), rt.createStream()};  // streams 0 and 1
  rt.setFailLaunchesOnStream(2);  // the first work stream the agreement creates
  chorusResult_t got[2];
  const auto t0 = std::chrono::steady_clock::now();
  auto rank = [&](int r) {
    chorusStream_t s = nullptr;
    ASSERT_EQ(cu::streamFromRuntime(rt, cs[r], &s), chorusSuccess);
    cu::forcePathForTests(s, cu::PathMode::Device);
    void* d = rt.deviceAlloc(4096);
    EXPECT_EQ(chorusAllReduce(d, d, 1000, chorusFloat32, chorusSum, comms[r], s), chorusSuccess);
    got[r] = chorusStreamSynchronize(s);
    chorusStreamDestroy(s);
  };
  std::thread t(rank, 1);
  rank(0);
  t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 20.0) << "a rank waited for the timeout";
  EXPECT_TRUE((got[0] == chorusSystemError && got[1] == chorusRemoteError) ||
              (got[1] == chorusSystemError && got[0] == chorusRemoteError))
      << chorusGetErrorString(got[0]) << " / " << chorusGetErrorString(got[1]);
  for (void* c : cs) rt.destroyStream(c);
  for (auto c : comms) chorusCommDestroy(c);
}

// One thread drives both ranks without a group (every call returns at once): the first
// call of each rank agrees on the path on its stream's worker, so nothing blocks the thread
// before the other rank's first call is queued; the second call waits for the agreement.
TEST(DirectPath, OneThreadDrivesEveryRank) {
  standin::CudaStandin rt(size_t{16} << 20);
  chorusComm_t comms[2];
  ASSERT_EQ(chorusCommInitAll(comms, 2, nullptr), chorusSuccess);
  void* cs[2];
  chorusStream_t s[2];
  float* view[2];
  void* d[2];
  for (int r = 0; r < 2; ++r) {
    cs[r] = rt.createStream();
    ASSERT_EQ(cu::streamFromRuntime(rt, cs[r], &s[r]), chorusSuccess);
    d[r] = rt.deviceAlloc(400 * 4);
    view[r] = static_cast<float*>(rt.hostView(d[r]));
    for (int i = 0; i < 400; ++i) view[r][i] = float(r + 1);
  }
  for (int call = 0; call < 2; ++call)
    for (int r = 0; r < 2; ++r)
      ASSERT_EQ(chorusAllReduce(d[r], d[r], 400, chorusFloat32, chorusSum, comms[r], s[r]),
                chorusSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(chorusStreamSynchronize(s[r]), chorusSuccess) << chorusGetLastError(comms[r]);
    for (int i = 0; i < 400; ++i) ASSERT_EQ(view[r][i], 6.0f) << r << " " << i;  // (1+2)*2
    chorusStreamDestroy(s[r]);
    rt.destroyStream(cs[r]);
  }
  EXPECT_GT(rt.reduceLaunches(), 0u);
  for (auto c : comms) chorusCommDestroy(c);
}

// acceptance 3: the verdict is a pure function of what every rank reported, so every rank
// reaches the same one; ranks on two hosts, a pair without access, forced modes.
TEST(DirectPath, VerdictFromTheHeaders) {
  auto hdr = [](int dev, uint64_t mask) {
    cu::PeerHeader h;
    h.oneHost = 1;
    h.device = dev;
    h.accessMask = mask;
    h.scratchOk = 1;
    return h;
  };
  std::string why;
  std::vector<cu::PeerHeader> h{hdr(0, 3), hdr(1, 3), hdr(1, 3)};
  EXPECT_EQ(cu::decidePath(h, &why), cu::Verdict::Device);
  h[2].oneHost = 0;  // one rank sees ranks on another host
  EXPECT_EQ(cu::decidePath(h, &why), cu::Verdict::Staging);
  EXPECT_NE(why.find("more than one host"), std::string::npos);
  h[2].oneHost = 1;
  h[0].accessMask = 1;  // GPU 0 cannot reach GPU 1: the pair (0, 1) has no peer access
  EXPECT_EQ(cu::decidePath(h, &why), cu::Verdict::Staging);
  EXPECT_NE(why.find("cannot reach"), std::string::npos);
  h[1].mode = static_cast<int32_t>(cu::PathMode::Device);
  EXPECT_EQ(cu::decidePath(h, &why), cu::Verdict::NoDevice);
  h[0].accessMask = 3;
  EXPECT_EQ(cu::decidePath(h, &why), cu::Verdict::Device);
  h[2].mode = static_cast<int32_t>(cu::PathMode::Staging);
  EXPECT_EQ(cu::decidePath(h, &why), cu::Verdict::Mismatch);
  cu::PathMode m;
  EXPECT_TRUE(cu::parsePathMode("staging", &m, &why));
  EXPECT_EQ(m, cu::PathMode::Staging);
  EXPECT_FALSE(cu::parsePathMode("gpu", &m, &why));
}

}  // namespace
