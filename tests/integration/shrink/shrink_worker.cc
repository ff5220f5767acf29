// shrink_worker.cc — one rank of the shrink tests (shrink_test.py starts every rank itself).
//
//   CHORUS_RANK=r CHORUS_WORLD_SIZE=n CHORUS_INIT=tcp://host:port shrink_worker --mode M
//       [--victims K]
//
// Modes (the C API only):
//   kill     checked all-reduces; the last rank SIGKILLs itself at iteration 3 (after
//            printing "KILL <unix time>"); every survivor's call must fail, then
//            chorusCommFailedRanks, chorusCommShrink(CHORUS_SHRINK_ABORT) and 100 rounds of
//            every collective on the smaller communicator, each result compared with a
//            reference computed here. With --victims K the last rank of each new
//            communicator dies in turn, K times (4 -> 3 -> 2).
//   cut      as kill, but the victim does not die: the test cuts its host's link after
//            "READY-TO-CUT" and the victim just waits (it is killed by the test at the end).
//   healthy  the last rank stays alive and calls nothing (sleeps, then exits); the others
//            shrink it away with CHORUS_SHRINK_DEFAULT and run the checks.
//   bad      bad exclude lists on a healthy communicator: each must fail with
//            chorusInvalidArgument on every rank that calls it (the last rank sits out of
//            the case where lists differ); then a good shrink works.
// Lines: "rank R: DETECT <result> <seconds>", "rank R: FAILED {list}",
// "rank R: SHRUNK n=N rank=M shrink_s=S", "rank R: CHECKS OK n=N", "rank R: BAD <case> ok
// <seconds>", "rank R: DONE". Exit 0 when all is well, 1 on a wrong result, 2 on an
// unexpected error (the line says which and chorusGetLastError).
#include <chorus.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int gRank = -1;  // rank in the first communicator, for messages

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
double mono() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void die(int code, const char* what, chorusResult_t r, chorusComm_t comm) {
  std::printf("rank %d: UNEXPECTED %s: %s: %s\n", gRank, what, chorusGetErrorString(r),
              chorusGetLastError(comm));
  std::fflush(stdout);
  std::exit(code);
}

#define OK(call, comm)                                  \
  do {                                                  \
    chorusResult_t r_ = (call);                         \
    if (r_ != chorusSuccess) die(2, #call, r_, (comm)); \
  } while (0)

void wrong(const char* what, int iter, size_t i, long long got, long long want) {
  std::printf("rank %d: WRONG %s iter %d index %zu: got %lld want %lld\n", gRank, what, iter, i,
              got, want);
  std::fflush(stdout);
  std::exit(1);
}

// The value rank r contributes at element i of round `it` (exact in int32 and float).
int32_t val(int r, int it, size_t i) {
  return static_cast<int32_t>((r + 1) * 1000 + static_cast<int>(i % 977) + it);
}

// 100 rounds of every collective kind on comm, every result checked.
void checks(chorusComm_t comm) {
  int n = 0, me = 0;
  OK(chorusCommCount(comm, &n), comm);
  OK(chorusCommUserRank(comm, &me), comm);
  const size_t sizes[] = {1, 257, 20000};
  for (int it = 0; it < 100; ++it) {
    const size_t c = sizes[it % 3];
    const int root = it % n;
    std::vector<int32_t> in(c * static_cast<size_t>(n)), out(c * static_cast<size_t>(n));
    // all-reduce (sum, int32)
    for (size_t i = 0; i < c; ++i) in[i] = val(me, it, i);
    OK(chorusAllReduce(in.data(), out.data(), c, chorusInt32, chorusSum, comm, nullptr), comm);
    for (size_t i = 0; i < c; ++i) {
      long long want = 0;
      for (int r = 0; r < n; ++r) want += val(r, it, i);
      if (out[i] != want) wrong("allreduce", it, i, out[i], want);
    }
    // all-reduce (max, float, in place)
    std::vector<float> f(c);
    for (size_t i = 0; i < c; ++i)
      f[i] = static_cast<float>(val(me, it, i) * ((me + i) % 2 ? 1 : -1));
    OK(chorusAllReduce(f.data(), f.data(), c, chorusFloat32, chorusMax, comm, nullptr), comm);
    for (size_t i = 0; i < c; ++i) {
      float want = -1e30f;
      for (int r = 0; r < n; ++r)
        want = std::max(want, static_cast<float>(val(r, it, i) * ((r + i) % 2 ? 1 : -1)));
      if (f[i] != want)
        wrong("allreduce-max", it, i, static_cast<long long>(f[i]), static_cast<long long>(want));
    }
    // broadcast
    for (size_t i = 0; i < c; ++i) out[i] = me == root ? val(root, it, i) : -1;
    OK(chorusBroadcast(out.data(), out.data(), c, chorusInt32, root, comm, nullptr), comm);
    for (size_t i = 0; i < c; ++i)
      if (out[i] != val(root, it, i)) wrong("broadcast", it, i, out[i], val(root, it, i));
    // reduce
    for (size_t i = 0; i < c; ++i) in[i] = val(me, it, i);
    OK(chorusReduce(in.data(), out.data(), c, chorusInt32, chorusSum, root, comm, nullptr), comm);
    if (me == root)
      for (size_t i = 0; i < c; ++i) {
        long long want = 0;
        for (int r = 0; r < n; ++r) want += val(r, it, i);
        if (out[i] != want) wrong("reduce", it, i, out[i], want);
      }
    // all-gather
    for (size_t i = 0; i < c; ++i) in[i] = val(me, it, i);
    OK(chorusAllGather(in.data(), out.data(), c, chorusInt32, comm, nullptr), comm);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < c; ++i)
        if (out[r * c + i] != val(r, it, i))
          wrong("allgather", it, r * c + i, out[r * c + i], val(r, it, i));
    // reduce-scatter: block b of rank r's input holds val(r, it, b*c+i)
    for (size_t i = 0; i < c * static_cast<size_t>(n); ++i) in[i] = val(me, it, i);
    OK(chorusReduceScatter(in.data(), out.data(), c, chorusInt32, chorusSum, comm, nullptr), comm);
    for (size_t i = 0; i < c; ++i) {
      long long want = 0;
      for (int r = 0; r < n; ++r) want += val(r, it, me * c + i);
      if (out[i] != want) wrong("reducescatter", it, i, out[i], want);
    }
    // all-to-all: block j of rank r's input (for rank j) is val(r, it, j*c+i)
    for (size_t i = 0; i < c * static_cast<size_t>(n); ++i) in[i] = val(me, it, i);
    OK(chorusAllToAll(in.data(), out.data(), c, chorusInt32, comm, nullptr), comm);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < c; ++i)
        if (out[r * c + i] != val(r, it, me * c + i))
          wrong("alltoall", it, r * c + i, out[r * c + i], val(r, it, me * c + i));
    // scatter from root: block j is val(root, it, j*c+i)
    for (size_t i = 0; i < c * static_cast<size_t>(n); ++i) in[i] = val(root, it, i);
    OK(chorusScatter(in.data(), out.data(), c, chorusInt32, root, comm, nullptr), comm);
    for (size_t i = 0; i < c; ++i)
      if (out[i] != val(root, it, me * c + i))
        wrong("scatter", it, i, out[i], val(root, it, me * c + i));
    // gather to root
    for (size_t i = 0; i < c; ++i) in[i] = val(me, it, i) + 7;
    OK(chorusGather(in.data(), out.data(), c, chorusInt32, root, comm, nullptr), comm);
    if (me == root)
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < c; ++i)
          if (out[r * c + i] != val(r, it, i) + 7)
            wrong("gather", it, r * c + i, out[r * c + i], val(r, it, i) + 7);
    // send/recv around the ring, in a group
    std::vector<int32_t> s(c), rv(c, -1);
    for (size_t i = 0; i < c; ++i) s[i] = val(me, it, i) * 3;
    OK(chorusGroupStart(), comm);
    OK(chorusSend(s.data(), c, chorusInt32, (me + 1) % n, comm, nullptr), comm);
    OK(chorusRecv(rv.data(), c, chorusInt32, (me + n - 1) % n, comm, nullptr), comm);
    OK(chorusGroupEnd(), comm);
    const int from = (me + n - 1) % n;
    for (size_t i = 0; i < c; ++i)
      if (rv[i] != val(from, it, i) * 3) wrong("sendrecv", it, i, rv[i], val(from, it, i) * 3);
    OK(chorusBarrier(comm, nullptr), comm);
  }
  std::printf("rank %d: CHECKS OK n=%d\n", gRank, n);
  std::fflush(stdout);
}

// Checked all-reduces until one fails; the victim (last rank) dies at iteration 3 (kill) or
// waits for its link to be cut (cut). Returns the failing call's result.
chorusResult_t loopUntilFailure(chorusComm_t comm, bool cut) {
  int n = 0, me = 0;
  OK(chorusCommCount(comm, &n), comm);
  OK(chorusCommUserRank(comm, &me), comm);
  const size_t count = 1 << 16;
  std::vector<float> buf(count);
  for (int it = 0;; ++it) {
    if (me == n - 1 && it == 3) {
      if (!cut) {
        std::printf("rank %d: KILL %.3f\n", gRank, now());
        std::fflush(stdout);
        raise(SIGKILL);
      }
      std::printf("rank %d: READY-TO-CUT\n", gRank);
      std::fflush(stdout);
      for (;;) pause();  // the test cuts this host's link, then kills this process
    }
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(me + 1 + (i % 3));
    const double t0 = mono();
    chorusResult_t r =
        chorusAllReduce(buf.data(), buf.data(), count, chorusFloat32, chorusSum, comm, nullptr);
    if (r != chorusSuccess) {
      std::printf("rank %d: DETECT %s at %.3f, %.2f s after the call began: %s\n", gRank,
                  chorusGetErrorString(r), now(), mono() - t0, chorusGetLastError(comm));
      std::fflush(stdout);
      return r;
    }
    for (size_t i = 0; i < count; ++i) {
      const float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 3));
      if (buf[i] != want)
        wrong("loop-allreduce", it, i, static_cast<long long>(buf[i]),
              static_cast<long long>(want));
    }
    if (me == 0 && it == 2) {
      std::printf("rank %d: LOOPING n=%d\n", gRank, n);
      std::fflush(stdout);
    }
  }
}

std::string listText(const int* v, int k) {
  std::string s = "{";
  for (int i = 0; i < k; ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "}";
}

// After a failure: agree on the failed ranks, shrink them away, check the new comm.
chorusComm_t recover(chorusComm_t comm) {
  int n = 0;
  OK(chorusCommCount(comm, &n), comm);
  // Revoke first: every later call on the failed communicator must fail at once with
  // chorusAborted (no wait for the dead rank); FailedRanks and Shrink still work.
  OK(chorusCommRevoke(comm), comm);
  {
    float x = 1;
    const double t0 = mono();
    chorusResult_t r = chorusAllReduce(&x, &x, 1, chorusFloat32, chorusSum, comm, nullptr);
    if (r != chorusAborted)
      die(1, "all-reduce after chorusCommRevoke (want chorusAborted)", r, comm);
    std::printf("rank %d: REVOKED next call chorusAborted in %.3f s: %s\n", gRank, mono() - t0,
                chorusGetLastError(comm));
  }
  std::vector<int> failed(static_cast<size_t>(n));
  int nf = 0;
  double t0 = mono();
  OK(chorusCommFailedRanks(comm, failed.data(), n, &nf), comm);
  std::printf("rank %d: FAILED %s agree_s=%.3f\n", gRank, listText(failed.data(), nf).c_str(),
              mono() - t0);
  std::fflush(stdout);
  chorusComm_t next = nullptr;
  t0 = mono();
  OK(chorusCommShrink(comm, failed.data(), nf, &next, nullptr, CHORUS_SHRINK_ABORT), comm);
  int nn = 0, nr = 0;
  OK(chorusCommCount(next, &nn), next);
  OK(chorusCommUserRank(next, &nr), next);
  std::printf("rank %d: SHRUNK n=%d rank=%d shrink_s=%.3f\n", gRank, nn, nr, mono() - t0);
  std::fflush(stdout);
  OK(chorusCommDestroy(comm), nullptr);
  checks(next);
  return next;
}

// A bad exclude list: every rank that calls it must get chorusInvalidArgument, promptly.
void expectBad(chorusComm_t comm, const char* name, const std::vector<int>& list, int flags = 0,
               int countOverride = -1) {
  chorusComm_t out = reinterpret_cast<chorusComm_t>(0x1);
  const double t0 = mono();
  const int count = countOverride == -1 ? static_cast<int>(list.size()) : countOverride;
  chorusResult_t r = chorusCommShrink(comm, list.data(), count, &out, nullptr, flags);
  if (r != chorusInvalidArgument || out != nullptr) {
    std::printf("rank %d: BAD %s returned %s (newcomm %p), want chorusInvalidArgument: %s\n", gRank,
                name, chorusGetErrorString(r), static_cast<void*>(out), chorusGetLastError(comm));
    std::fflush(stdout);
    std::exit(1);
  }
  std::printf("rank %d: BAD %s ok %.2f s: %s\n", gRank, name, mono() - t0,
              chorusGetLastError(comm));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode;
  int victims = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mode"))
      mode = argv[i + 1];
    else if (!std::strcmp(argv[i], "--victims"))
      victims = std::atoi(argv[i + 1]);
  }
  if (mode != "kill" && mode != "cut" && mode != "healthy" && mode != "bad") {
    std::fprintf(stderr, "usage: shrink_worker --mode kill|cut|healthy|bad [--victims K]\n");
    return 2;
  }
  chorusComm_t comm = nullptr;
  OK(chorusCommInitFromEnv(&comm, nullptr), nullptr);
  int n = 0;
  OK(chorusCommUserRank(comm, &gRank), comm);
  OK(chorusCommCount(comm, &n), comm);

  if (mode == "kill" || mode == "cut") {
    for (int v = 0; v < victims; ++v) {
      loopUntilFailure(comm, mode == "cut");
      comm = recover(comm);
    }
  } else if (mode == "healthy") {
    if (gRank == n - 1) {
      std::printf("rank %d: IDLE\n", gRank);
      std::fflush(stdout);
      sleep(3);  // alive, calling nothing, while the others shrink it away
      OK(chorusCommDestroy(comm), nullptr);
      std::printf("rank %d: DONE\n", gRank);
      return 0;
    }
    // The new communicator's init is non-blocking here (config.blocking = 0): the shrink
    // returns chorusInProgress with *newcomm set once the survivors agreed; poll until done.
    const int ex = n - 1;
    chorusComm_t next = nullptr;
    chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.timeoutSeconds = 30;
    const double t0 = mono();
    chorusResult_t r = chorusCommShrink(comm, &ex, 1, &next, &cfg, CHORUS_SHRINK_DEFAULT);
    if (r != chorusInProgress || next == nullptr)
      die(1, "non-blocking shrink (want chorusInProgress)", r, comm);
    chorusResult_t async = chorusInProgress;
    while (async == chorusInProgress) {
      OK(chorusCommGetAsyncError(next, &async), next);
      if (async == chorusInProgress) usleep(1000);
    }
    if (async != chorusSuccess) die(2, "non-blocking shrink's init", async, next);
    std::printf("rank %d: SHRUNK n=%d shrink_s=%.3f (non-blocking)\n", gRank, n - 1, mono() - t0);
    std::fflush(stdout);
    OK(chorusCommDestroy(comm), nullptr);
    checks(next);
    comm = next;
  } else {  // bad
    expectBad(comm, "out-of-range", {n - 1, n});
    expectBad(comm, "negative", {-1});
    expectBad(comm, "duplicate", {n - 1, n - 1});
    expectBad(comm, "self", {gRank});
    expectBad(comm, "count", std::vector<int>(static_cast<size_t>(n), 0), 0, n);  // all of them
    expectBad(comm, "flags", {n - 1}, 0x6);
    // One rank's list is bad, the others' good: all fail fast (the bad rank tells the leader).
    if (gRank == 1)
      expectBad(comm, "one-out-of-range", {n - 1, 99});
    else if (gRank != n - 1)
      expectBad(comm, "one-out-of-range", {n - 1});
    // Lists that differ: rank n-2 also excludes rank 1; rank n-1 is excluded by everyone
    // and sits this one out.
    if (gRank == n - 2)
      expectBad(comm, "differ", {1, n - 1});
    else if (gRank != n - 1)
      expectBad(comm, "differ", {n - 1});
    // The parent is intact: an all-reduce over all n ranks, then a good shrink.
    int32_t x = gRank + 1;
    OK(chorusAllReduce(&x, &x, 1, chorusInt32, chorusSum, comm, nullptr), comm);
    if (x != n * (n + 1) / 2) wrong("parent-allreduce", 0, 0, x, n * (n + 1) / 2);
    if (gRank == n - 1) {
      OK(chorusCommDestroy(comm), nullptr);
      std::printf("rank %d: DONE\n", gRank);
      return 0;
    }
    const int ex = n - 1;
    chorusComm_t next = nullptr;
    OK(chorusCommShrink(comm, &ex, 1, &next, nullptr, CHORUS_SHRINK_DEFAULT), comm);
    OK(chorusCommDestroy(comm), nullptr);
    checks(next);
    comm = next;
  }
  OK(chorusCommDestroy(comm), nullptr);
  std::printf("rank %d: DONE\n", gRank);
  std::fflush(stdout);
  return 0;
}
