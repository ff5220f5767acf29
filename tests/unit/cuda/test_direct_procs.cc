// test_direct_procs.cc — the device path between PROCESSES on the CUDA TEST STAND-IN: each
// rank is a forked process with its own stand-in "GPU"; peers' scratch areas are reached
// through the stand-in's IPC handles (a memory file mapped into the other process's device
// range), as cudaIpcOpenMemHandle does between processes on one host. Every collective the
// device path runs, in and out of place, multi-piece, plus a send/recv pair; exact; no copy
// through host memory; kernels ran.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "chorus.h"
#include "src/cuda/device_path.h"
#include "tests/unit/cuda/cuda_standin.h"

namespace cu = chorus::cuda;

namespace {

// One rank; returns the number of problems (printed to stderr).
int rankMain(const chorusUniqueId& id, int n, int r) {
  int bad = 0;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok && bad++ < 5) std::fprintf(stderr, "rank %d: %s\n", r, what.c_str());
  };
  chorusComm_t comm = nullptr;
  if (chorusCommInitRank(&comm, n, id, r) != chorusSuccess) {
    std::fprintf(stderr, "rank %d: init: %s\n", r, chorusGetLastError(nullptr));
    return 1;
  }
  standin::CudaStandin rt(size_t{64} << 20);
  rt.setPerStreamDelayUs(200);
  void* cs = rt.createStream();
  chorusStream_t s = nullptr;
  check(cu::streamFromRuntime(rt, cs, &s) == chorusSuccess, "wrap");
  cu::forcePathForTests(s, cu::PathMode::Device);
  const size_t count = 997;  // several 1 KiB pieces
  const size_t blk = count * 4;
  void* send = rt.deviceAlloc(blk * n);
  void* recv = rt.deviceAlloc(blk * n);
  auto* sv = static_cast<int32_t*>(rt.hostView(send));
  auto* rv = static_cast<int32_t*>(rt.hostView(recv));
  auto fill = [&] {
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i) sv[b * count + i] = (r + 1) * 1000 + b * 100 + int(i % 97);
    std::memset(rv, 0xee, blk * n);
  };
  auto run = [&](const char* what, chorusResult_t res) {
    check(res == chorusSuccess, std::string(what) + ": " + chorusGetLastError(comm));
    check(chorusStreamSynchronize(s) == chorusSuccess,
          std::string(what) + " sync: " + chorusGetLastError(comm));
  };
  const int32_t sumR = n * (n + 1) / 2 * 1000;  // sum over ranks of (r+1)*1000
  fill();
  run("all_reduce", chorusAllReduce(send, recv, count, chorusInt32, chorusSum, comm, s));
  for (size_t i = 0; i < count; ++i)
    check(rv[i] == sumR + n * int(i % 97), "all_reduce element " + std::to_string(i));
  fill();
  run("all_reduce in place", chorusAllReduce(send, send, count, chorusInt32, chorusSum, comm, s));
  for (size_t i = 0; i < count; ++i)
    check(sv[i] == sumR + n * int(i % 97), "in-place all_reduce element " + std::to_string(i));
  fill();
  run("reduce_scatter", chorusReduceScatter(send, recv, count, chorusInt32, chorusSum, comm, s));
  for (size_t i = 0; i < count; ++i)
    check(rv[i] == sumR + n * (r * 100 + int(i % 97)), "reduce_scatter " + std::to_string(i));
  fill();
  run("all_gather", chorusAllGather(send, recv, count, chorusInt32, comm, s));
  for (int b = 0; b < n; ++b)
    for (size_t i = 0; i < count; ++i)
      check(rv[b * count + i] == (b + 1) * 1000 + int(i % 97), "all_gather " + std::to_string(i));
  fill();
  run("all_to_all", chorusAllToAll(send, recv, count, chorusInt32, comm, s));
  for (int b = 0; b < n; ++b)
    for (size_t i = 0; i < count; ++i)
      check(rv[b * count + i] == (b + 1) * 1000 + r * 100 + int(i % 97),
            "all_to_all " + std::to_string(i));
  fill();
  run("broadcast", chorusBroadcast(send, recv, count, chorusInt32, n - 1, comm, s));
  for (size_t i = 0; i < count; ++i)
    check(rv[i] == n * 1000 + int(i % 97), "broadcast " + std::to_string(i));
  if (n >= 2 && r < 2) {  // a send/recv pair between ranks 0 and 1
    fill();
    const int peer = 1 - r;
    for (int step = 0; step < 2; ++step)
      run("send/recv", (step == 0) == (r == 0)
                           ? chorusSend(send, count, chorusInt32, peer, comm, s)
                           : chorusRecv(recv, count, chorusInt32, peer, comm, s));
    for (size_t i = 0; i < count; ++i)
      check(rv[i] == (peer + 1) * 1000 + int(i % 97), "recv " + std::to_string(i));
  }
  run("barrier", chorusBarrier(comm, s));
  check(rt.hostCopies() == 0, "a copy went through host memory");
  check(rt.reduceLaunches() > 0 && rt.copyLaunches() > 0, "no kernels ran");
  chorusStreamDestroy(s);
  rt.destroyStream(cs);
  chorusCommDestroy(comm);
  return bad;
}

// The parent starts no thread before it forks (a child of a threaded process may inherit a
// lock held by another thread: the ASan tree hung here): rank 0 makes the unique id, which
// starts the bootstrap root in rank 0's process, and hands it to the parent through a pipe
// before the other ranks are forked.
void runProcs(int n) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<pid_t> kids;
  const pid_t first = fork();
  ASSERT_GE(first, 0);
  if (first == 0) {
    close(fds[0]);
    chorusUniqueId id;
    const bool ok = chorusGetUniqueId(&id) == chorusSuccess;
    const bool sent = ok && write(fds[1], &id, sizeof id) == static_cast<ssize_t>(sizeof id);
    close(fds[1]);
    _exit(sent && rankMain(id, n, 0) == 0 ? 0 : 1);
  }
  kids.push_back(first);
  close(fds[1]);
  chorusUniqueId id;
  const bool got = read(fds[0], &id, sizeof id) == static_cast<ssize_t>(sizeof id);
  close(fds[0]);
  EXPECT_TRUE(got) << "rank 0 sent no unique id";
  for (int r = 1; got && r < n; ++r) {
    const pid_t p = fork();
    ASSERT_GE(p, 0);
    if (p == 0) _exit(rankMain(id, n, r) == 0 ? 0 : 1);
    kids.push_back(p);
  }
  for (size_t r = 0; r < kids.size(); ++r) {
    int st = 0;
    ASSERT_EQ(waitpid(kids[r], &st, 0), kids[r]);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "np " << n << " rank " << r << " status " << st;
  }
}

TEST(DirectPathProcs, TwoProcesses) { runProcs(2); }
TEST(DirectPathProcs, FourProcesses) { runProcs(4); }

}  // namespace
