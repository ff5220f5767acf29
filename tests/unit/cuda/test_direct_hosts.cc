// test_direct_hosts.cc — device buffers of ranks on DIFFERENT HOSTS (issue 34, acceptance 3):
// real processes, each re-executed with its own CHORUS_HOSTID (2 fake hosts of 2 ranks, 4
// hosts of 1, 2 + 1), so the communicator really spans hosts (tcp over loopback between
// them, shared memory within one) and the path is chosen from the real exchange. Each rank
// holds device buffers of the CUDA TEST STAND-IN. Under CHORUS_CUDA_PATH=auto every
// collective is exact and every rank reports the same verdict: staging ("ranks on more than
// one host"; the device path needs the whole communicator on one host). Under
// CHORUS_CUDA_PATH=device every rank gets chorusInvalidUsage saying so, not a hang.
//
// Each rank is this program run again (fork + exec, so CHORUS_* is read afresh in the
// child); it writes its verdict to a pipe and exits with its number of problems.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "chorus.h"
#include "src/cuda/device_path.h"
#include "src/enqueue/stream.h"
#include "tests/unit/cuda/cuda_standin.h"

namespace cu = chorus::cuda;

namespace {

const char* const kRankEnv = "CHORUS_TEST_HOSTS_RANK";  // "rank nranks fd" in a child

std::string toHex(const chorusUniqueId& id) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (unsigned char c : id.internal) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

chorusUniqueId fromHex(const std::string& s) {
  chorusUniqueId id{};
  for (size_t i = 0; i < sizeof id.internal && 2 * i + 1 < s.size(); ++i)
    id.internal[i] = static_cast<char>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return id;
}

// What the (stream, communicator) agreed on, as the stream's binding recorded it.
cu::Verdict verdictOf(chorusStream_t s, chorusComm_t comm, std::string* why) {
  auto* b = dynamic_cast<cu::StreamBinding*>(s->device.get());
  if (!b) return cu::Verdict::Mismatch;
  std::lock_guard<std::mutex> lk(b->linkMutex);
  auto it = b->links.find(comm);
  if (it == b->links.end()) return cu::Verdict::Mismatch;
  *why = it->second->why;
  return it->second->verdict;
}

// One rank under CHORUS_CUDA_PATH=auto: every collective on device buffers, exact; the
// calls staged (host copies, no reduction kernel).
int autoRank(chorusComm_t comm, standin::CudaStandin& rt, chorusStream_t s, int n, int r,
             int* bad) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok && (*bad)++ < 5) std::fprintf(stderr, "rank %d: %s\n", r, what.c_str());
  };
  const size_t count = 997;  // several 1 KiB pieces
  const size_t blk = count * 4;
  void* send = rt.deviceAlloc(blk * n);
  void* recv = rt.deviceAlloc(blk * n);
  auto* sv = static_cast<int32_t*>(rt.hostView(send));
  auto* rv = static_cast<int32_t*>(rt.hostView(recv));
  auto val = [](int rank, int b, size_t i) { return (rank + 1) * 1000 + b * 100 + int(i % 97); };
  auto fill = [&] {
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i) sv[b * count + i] = val(r, b, i);
    std::memset(rv, 0xee, blk * n);
  };
  auto run = [&](const char* what, chorusResult_t res) {
    check(res == chorusSuccess, std::string(what) + ": " + chorusGetLastError(comm));
    check(chorusStreamSynchronize(s) == chorusSuccess,
          std::string(what) + " sync: " + chorusGetLastError(comm));
  };
  auto sumOver = [&](int b, size_t i) {
    int32_t t = 0;
    for (int k = 0; k < n; ++k) t += val(k, b, i);
    return t;
  };
  fill();
  run("all_reduce", chorusAllReduce(send, recv, count, chorusInt32, chorusSum, comm, s));
  for (size_t i = 0; i < count; ++i)
    check(rv[i] == sumOver(0, i), "all_reduce " + std::to_string(i));
  fill();
  run("all_reduce in place", chorusAllReduce(send, send, count, chorusInt32, chorusSum, comm, s));
  for (size_t i = 0; i < count; ++i)
    check(sv[i] == sumOver(0, i), "in-place all_reduce " + std::to_string(i));
  fill();
  run("reduce", chorusReduce(send, recv, count, chorusInt32, chorusSum, n - 1, comm, s));
  if (r == n - 1)
    for (size_t i = 0; i < count; ++i) check(rv[i] == sumOver(0, i), "reduce " + std::to_string(i));
  fill();
  run("reduce_scatter", chorusReduceScatter(send, recv, count, chorusInt32, chorusSum, comm, s));
  for (size_t i = 0; i < count; ++i)
    check(rv[i] == sumOver(r, i), "reduce_scatter " + std::to_string(i));
  fill();
  run("all_gather", chorusAllGather(send, recv, count, chorusInt32, comm, s));
  for (int b = 0; b < n; ++b)
    for (size_t i = 0; i < count; ++i)
      check(rv[b * count + i] == val(b, 0, i), "all_gather " + std::to_string(i));
  fill();
  run("broadcast", chorusBroadcast(send, recv, count, chorusInt32, n - 1, comm, s));
  for (size_t i = 0; i < count; ++i)
    check(rv[i] == val(n - 1, 0, i), "broadcast " + std::to_string(i));
  fill();
  run("gather", chorusGather(send, recv, count, chorusInt32, 0, comm, s));
  if (r == 0)
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i)
        check(rv[b * count + i] == val(b, 0, i), "gather " + std::to_string(i));
  fill();
  const int sroot = n > 1 ? 1 : 0;
  run("scatter", chorusScatter(send, recv, count, chorusInt32, sroot, comm, s));
  for (size_t i = 0; i < count; ++i)
    check(rv[i] == val(sroot, r, i), "scatter " + std::to_string(i));
  fill();
  run("all_to_all", chorusAllToAll(send, recv, count, chorusInt32, comm, s));
  for (int b = 0; b < n; ++b)
    for (size_t i = 0; i < count; ++i)
      check(rv[b * count + i] == val(b, r, i), "all_to_all " + std::to_string(i));
  const int peer = n - 1 - r;  // 0 <-> n-1 crosses hosts in every layout here
  if (peer != r) {
    fill();
    for (int step = 0; step < 2; ++step)
      run("send/recv", (step == 0) == (r < peer)
                           ? chorusSend(send, count, chorusInt32, peer, comm, s)
                           : chorusRecv(recv, count, chorusInt32, peer, comm, s));
    for (size_t i = 0; i < count; ++i) check(rv[i] == val(peer, 0, i), "recv " + std::to_string(i));
  }
  run("barrier", chorusBarrier(comm, s));
  check(rt.hostCopies() > 0, "nothing was staged through host memory");
  check(rt.reduceLaunches() == 0, "a device-path reduction kernel ran");
  return 0;
}

// One rank under CHORUS_CUDA_PATH=device: the first call's error comes with the
// synchronize, later calls fail at once; both say why.
void deviceRank(chorusComm_t comm, standin::CudaStandin& rt, chorusStream_t s, int r, int* bad) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok && (*bad)++ < 5) std::fprintf(stderr, "rank %d: %s\n", r, what.c_str());
  };
  void* d = rt.deviceAlloc(64);
  check(chorusAllReduce(d, d, 16, chorusInt32, chorusSum, comm, s) == chorusSuccess,
        "the first call did not return at once");
  check(chorusStreamSynchronize(s) == chorusInvalidUsage, "the first call's sync did not fail");
  check(chorusAllReduce(d, d, 16, chorusInt32, chorusSum, comm, s) == chorusInvalidUsage,
        "a later call did not fail");
  const std::string msg = chorusGetLastError(comm);
  check(msg.find("more than one host") != std::string::npos, "unclear error: " + msg);
  chorusStreamSynchronize(s);
}

// A child: rank `r` of `n`; returns its number of problems.
int childMain(const char* spec) {
  int r = -1, n = 0, fd = -1;
  if (std::sscanf(spec, "%d %d %d", &r, &n, &fd) != 3) return 99;
  const char* idHex = std::getenv("CHORUS_TEST_HOSTS_ID");
  const char* mode = std::getenv("CHORUS_CUDA_PATH");
  if (!idHex || !mode) return 98;
  int bad = 0;
  chorusComm_t comm = nullptr;
  if (chorusCommInitRank(&comm, n, fromHex(idHex), r) != chorusSuccess) {
    std::fprintf(stderr, "rank %d: init: %s\n", r, chorusGetLastError(nullptr));
    return 1;
  }
  standin::CudaStandin rt(size_t{16} << 20);
  void* cs = rt.createStream();
  chorusStream_t s = nullptr;
  if (cu::streamFromRuntime(rt, cs, &s) != chorusSuccess) {
    std::fprintf(stderr, "rank %d: wrap: %s\n", r, chorusGetLastError(nullptr));
    return 1;
  }
  if (std::string(mode) == "device")
    deviceRank(comm, rt, s, r, &bad);
  else
    autoRank(comm, rt, s, n, r, &bad);
  std::string why;
  const cu::Verdict v = verdictOf(s, comm, &why);
  const std::string line = std::to_string(static_cast<int>(v)) + " " + why + "\n";
  if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) ++bad;
  close(fd);
  chorusStreamDestroy(s);
  rt.destroyStream(cs);
  chorusCommDestroy(comm);
  return bad;
}

struct RankOutcome {
  int status = -1;
  std::string report;  // "<verdict> <why>"
};

// Runs n ranks of this program, rank r with CHORUS_HOSTID=hostOf[r] and CHORUS_CUDA_PATH=mode;
// kills them all after 30 s (a hang is a failure, not a stuck test).
std::vector<RankOutcome> runRanks(const std::vector<std::string>& hostOf, const char* mode) {
  const int n = static_cast<int>(hostOf.size());
  chorusUniqueId id;
  EXPECT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  const std::string idHex = toHex(id);
  std::vector<pid_t> kids(n, -1);
  std::vector<int> readFd(n, -1);
  std::vector<RankOutcome> out(n);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) {
      ADD_FAILURE() << "pipe";
      break;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      const std::string spec =
          std::to_string(r) + " " + std::to_string(n) + " " + std::to_string(p[1]);
      setenv(kRankEnv, spec.c_str(), 1);
      setenv("CHORUS_TEST_HOSTS_ID", idHex.c_str(), 1);
      setenv("CHORUS_HOSTID", hostOf[r].c_str(), 1);
      setenv("CHORUS_CUDA_PATH", mode, 1);
      char* argv[] = {const_cast<char*>("test_direct_hosts"), nullptr};
      execv("/proc/self/exe", argv);
      _exit(97);
    }
    close(p[1]);
    kids[r] = pid;
    readFd[r] = p[0];
    if (pid < 0) ADD_FAILURE() << "fork";
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int left = n; left > 0;) {
    for (int r = 0; r < n; ++r) {
      if (kids[r] <= 0) continue;
      int st = 0;
      if (waitpid(kids[r], &st, WNOHANG) == kids[r]) {
        out[r].status = st;
        kids[r] = 0;
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "ranks still running after 30 s (a hang): killed";
      for (int r = 0; r < n; ++r)
        if (kids[r] > 0) {
          kill(kids[r], SIGKILL);
          waitpid(kids[r], nullptr, 0);
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < n; ++r) {
    char buf[512];
    ssize_t got;
    while (readFd[r] >= 0 && (got = read(readFd[r], buf, sizeof buf)) > 0)
      out[r].report.append(buf, got);
    if (readFd[r] >= 0) close(readFd[r]);
  }
  return out;
}

// Every rank exited cleanly and reported `want` (with `whyPart` in the reason).
void expectVerdict(const std::vector<RankOutcome>& out, cu::Verdict want, const char* whyPart) {
  const std::string wantStr = std::to_string(static_cast<int>(want)) + " ";
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_TRUE(WIFEXITED(out[r].status) && WEXITSTATUS(out[r].status) == 0)
        << "rank " << r << " status " << out[r].status;
    EXPECT_EQ(out[r].report.rfind(wantStr, 0), 0u) << "rank " << r << ": " << out[r].report;
    EXPECT_NE(out[r].report.find(whyPart), std::string::npos)
        << "rank " << r << ": " << out[r].report;
    EXPECT_EQ(out[r].report, out[0].report) << "ranks " << r << " and 0 chose differently";
  }
}

const std::vector<std::string> kTwoByTwo = {"hostsA", "hostsA", "hostsB", "hostsB"};
const std::vector<std::string> kFourByOne = {"hosts0", "hosts1", "hosts2", "hosts3"};
const std::vector<std::string> kTwoPlusOne = {"hostsA", "hostsA", "hostsB"};

TEST(DirectPathHosts, TwoHostsOfTwoStageExactly) {
  expectVerdict(runRanks(kTwoByTwo, "auto"), cu::Verdict::Staging, "more than one host");
}
TEST(DirectPathHosts, FourHostsOfOneStageExactly) {
  expectVerdict(runRanks(kFourByOne, "auto"), cu::Verdict::Staging, "more than one host");
}
TEST(DirectPathHosts, TwoHostsOfTwoAndOneStageExactly) {
  expectVerdict(runRanks(kTwoPlusOne, "auto"), cu::Verdict::Staging, "more than one host");
}
TEST(DirectPathHosts, ForcedDeviceAcrossHostsIsAnErrorOnEveryRank) {
  expectVerdict(runRanks(kTwoByTwo, "device"), cu::Verdict::NoDevice, "more than one host");
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* spec = std::getenv(kRankEnv)) return childMain(spec) == 0 ? 0 : 1;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
