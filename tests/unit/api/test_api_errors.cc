// test_api_errors.cc — bad input to the public API gets a clear error, never a crash.
//
// Most checks use a 1-rank communicator (chorusCommInitAll(&c, 1)), so a call that fails
// to validate runs locally instead of waiting for a peer. The few checks that need a
// 2-rank communicator only ever call it from one thread with arguments that must be
// rejected before any communication; if the library fails to reject them, the call runs
// into CHORUS_TIMEOUT_S (set low in meson) and the test fails instead of hanging.
// Unmapped / read-only buffers are checked in a death-test child so that a crash is
// reported as a failure of that test only.
#include <gtest/gtest.h>

#include <chorus.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// The last error of comm (or of this thread for NULL) must be non-empty and name `word`.
::testing::AssertionResult lastErrorNames(chorusComm_t comm,
                                          const std::vector<std::string>& words) {
  const char* le = chorusGetLastError(comm);
  if (le == nullptr) return ::testing::AssertionFailure() << "chorusGetLastError returned NULL";
  const std::string s = lower(le);
  if (s.empty())
    return ::testing::AssertionFailure() << "chorusGetLastError is empty after an error";
  for (const std::string& w : words)
    if (s.find(lower(w)) != std::string::npos) return ::testing::AssertionSuccess();
  std::string want;
  for (const std::string& w : words) want += (want.empty() ? "" : " or ") + ("'" + w + "'");
  return ::testing::AssertionFailure() << "chorusGetLastError(" << (comm ? "comm" : "NULL")
                                       << ") = \"" << le << "\" does not name " << want;
}

#define EXPECT_RESULT(call, expected)                                       \
  do {                                                                      \
    chorusResult_t r_ = (call);                                             \
    EXPECT_EQ(r_, (expected)) << #call << " returned " << int(r_) << " ("   \
                              << chorusGetErrorString(r_) << "), expected " \
                              << chorusGetErrorString(expected);            \
  } while (0)

// A call that must be rejected as chorusInvalidArgument with a last error naming `word`.
#define EXPECT_INVALID_ARG(comm, call, ...)                                  \
  do {                                                                       \
    EXPECT_RESULT(call, chorusInvalidArgument);                              \
    EXPECT_TRUE(lastErrorNames((comm), {__VA_ARGS__})) << "after " << #call; \
  } while (0)

class OneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(chorusCommInitAll(&comm_, 1, nullptr), chorusSuccess) << chorusGetLastError(nullptr);
    ASSERT_NE(comm_, nullptr);
  }
  void TearDown() override {
    if (comm_) {
      // The communicator must still work after all the rejected calls.
      float in[5] = {1, 2, 3, 4, 5}, out[5] = {0};
      EXPECT_EQ(chorusAllReduce(in, out, 5, chorusFloat32, chorusSum, comm_, nullptr),
                chorusSuccess)
          << "a valid call after rejected ones: " << chorusGetLastError(comm_);
      for (int i = 0; i < 5; ++i) EXPECT_EQ(out[i], in[i]);
      EXPECT_EQ(chorusCommDestroy(comm_), chorusSuccess);
    }
  }
  chorusComm_t comm_ = nullptr;
  alignas(64) unsigned char a_[256] = {0};
  alignas(64) unsigned char b_[256] = {0};
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Version, error strings
// ---------------------------------------------------------------------------------------

TEST(ApiVersion, MatchesHeader) {
  int v = -1;
  ASSERT_EQ(chorusGetVersion(&v), chorusSuccess);
  EXPECT_EQ(v, CHORUS_VERSION_CODE);
  EXPECT_EQ(CHORUS_VERSION_CODE, CHORUS_MAJOR * 10000 + CHORUS_MINOR * 100 + CHORUS_PATCH);
  EXPECT_RESULT(chorusGetVersion(nullptr), chorusInvalidArgument);
}

TEST(ApiErrorString, EveryResultHasAString) {
  std::vector<std::string> seen;
  for (int r = 0; r < chorusNumResults; ++r) {
    const char* s = chorusGetErrorString(chorusResult_t(r));
    ASSERT_NE(s, nullptr) << "result " << r;
    EXPECT_GT(std::strlen(s), 3u) << "result " << r << " has a meaningless string";
    seen.push_back(s);
  }
  std::vector<std::string> uniq = seen;
  std::sort(uniq.begin(), uniq.end());
  EXPECT_EQ(std::unique(uniq.begin(), uniq.end()), uniq.end())
      << "two result codes share an error string";
  for (int r : {-1, int(chorusNumResults), int(chorusNumResults) + 1, 1000, INT_MAX, INT_MIN}) {
    const char* s = chorusGetErrorString(chorusResult_t(r));
    ASSERT_NE(s, nullptr) << "out-of-range result " << r;
    EXPECT_GT(std::strlen(s), 0u) << "out-of-range result " << r;
  }
}

TEST(ApiLastError, NeverNull) { EXPECT_NE(chorusGetLastError(nullptr), nullptr); }

// ---------------------------------------------------------------------------------------
// NULL communicator
// ---------------------------------------------------------------------------------------

TEST(ApiNullComm, EveryCallRejectsIt) {
  unsigned char a[64] = {0}, b[64] = {0};
  int x = 0;
  chorusResult_t ae;
  chorusComm_t nc = nullptr;
  EXPECT_INVALID_ARG(nullptr, chorusAllReduce(a, b, 4, chorusFloat32, chorusSum, nullptr, nullptr),
                     "comm");
  EXPECT_INVALID_ARG(nullptr, chorusBroadcast(a, b, 4, chorusFloat32, 0, nullptr, nullptr), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusReduce(a, b, 4, chorusFloat32, chorusSum, 0, nullptr, nullptr),
                     "comm");
  EXPECT_INVALID_ARG(nullptr, chorusAllGather(a, b, 4, chorusFloat32, nullptr, nullptr), "comm");
  EXPECT_INVALID_ARG(
      nullptr, chorusReduceScatter(a, b, 4, chorusFloat32, chorusSum, nullptr, nullptr), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusScatter(a, b, 4, chorusFloat32, 0, nullptr, nullptr), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusGather(a, b, 4, chorusFloat32, 0, nullptr, nullptr), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusAllToAll(a, b, 4, chorusFloat32, nullptr, nullptr), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusBarrier(nullptr, nullptr), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusSend(a, 4, chorusFloat32, 0, nullptr, nullptr), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusRecv(b, 4, chorusFloat32, 0, nullptr, nullptr), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusCommCount(nullptr, &x), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusCommUserRank(nullptr, &x), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusCommGetAsyncError(nullptr, &ae), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusCommSplit(nullptr, 0, 0, &nc, nullptr), "comm");
  chorusRedOp_t op;
  float two = 2.0f;
  EXPECT_INVALID_ARG(
      nullptr,
      chorusRedOpCreatePreMulSum(&op, &two, chorusFloat32, chorusScalarHostImmediate, nullptr),
      "comm");
}

// ---------------------------------------------------------------------------------------
// Buffers, types, ops, roots, peers, counts (1-rank communicator)
// ---------------------------------------------------------------------------------------

TEST_F(OneRank, NullBuffersWithCountAreRejected) {
  EXPECT_INVALID_ARG(
      comm_, chorusAllReduce(nullptr, b_, 4, chorusFloat32, chorusSum, comm_, nullptr), "sendbuff");
  EXPECT_INVALID_ARG(
      comm_, chorusAllReduce(a_, nullptr, 4, chorusFloat32, chorusSum, comm_, nullptr), "recvbuff");
  EXPECT_INVALID_ARG(comm_, chorusBroadcast(nullptr, b_, 4, chorusFloat32, 0, comm_, nullptr),
                     "sendbuff");
  EXPECT_INVALID_ARG(comm_, chorusBroadcast(a_, nullptr, 4, chorusFloat32, 0, comm_, nullptr),
                     "recvbuff");
  EXPECT_INVALID_ARG(
      comm_, chorusReduce(nullptr, b_, 4, chorusFloat32, chorusSum, 0, comm_, nullptr), "sendbuff");
  EXPECT_INVALID_ARG(
      comm_, chorusReduce(a_, nullptr, 4, chorusFloat32, chorusSum, 0, comm_, nullptr), "recvbuff");
  EXPECT_INVALID_ARG(comm_, chorusAllGather(nullptr, b_, 4, chorusFloat32, comm_, nullptr),
                     "sendbuff");
  EXPECT_INVALID_ARG(comm_, chorusAllGather(a_, nullptr, 4, chorusFloat32, comm_, nullptr),
                     "recvbuff");
  EXPECT_INVALID_ARG(comm_,
                     chorusReduceScatter(nullptr, b_, 4, chorusFloat32, chorusSum, comm_, nullptr),
                     "sendbuff");
  EXPECT_INVALID_ARG(comm_,
                     chorusReduceScatter(a_, nullptr, 4, chorusFloat32, chorusSum, comm_, nullptr),
                     "recvbuff");
  EXPECT_INVALID_ARG(comm_, chorusScatter(nullptr, b_, 4, chorusFloat32, 0, comm_, nullptr),
                     "sendbuff");
  EXPECT_INVALID_ARG(comm_, chorusScatter(a_, nullptr, 4, chorusFloat32, 0, comm_, nullptr),
                     "recvbuff");
  EXPECT_INVALID_ARG(comm_, chorusGather(nullptr, b_, 4, chorusFloat32, 0, comm_, nullptr),
                     "sendbuff");
  EXPECT_INVALID_ARG(comm_, chorusGather(a_, nullptr, 4, chorusFloat32, 0, comm_, nullptr),
                     "recvbuff");
  EXPECT_INVALID_ARG(comm_, chorusAllToAll(nullptr, b_, 4, chorusFloat32, comm_, nullptr),
                     "sendbuff");
  EXPECT_INVALID_ARG(comm_, chorusAllToAll(a_, nullptr, 4, chorusFloat32, comm_, nullptr),
                     "recvbuff");
  EXPECT_INVALID_ARG(comm_, chorusSend(nullptr, 4, chorusFloat32, 0, comm_, nullptr), "sendbuff");
  EXPECT_INVALID_ARG(comm_, chorusRecv(nullptr, 4, chorusFloat32, 0, comm_, nullptr), "recvbuff");
}

TEST_F(OneRank, BadDatatypeIsRejected) {
  for (int t : {int(chorusNumTypes), -1, 11, 1000, INT_MAX}) {
    const chorusDataType_t dt = chorusDataType_t(t);
    SCOPED_TRACE("datatype " + std::to_string(t));
    EXPECT_INVALID_ARG(comm_, chorusAllReduce(a_, b_, 4, dt, chorusSum, comm_, nullptr),
                       "datatype");
    EXPECT_INVALID_ARG(comm_, chorusBroadcast(a_, b_, 4, dt, 0, comm_, nullptr), "datatype");
    EXPECT_INVALID_ARG(comm_, chorusReduce(a_, b_, 4, dt, chorusSum, 0, comm_, nullptr),
                       "datatype");
    EXPECT_INVALID_ARG(comm_, chorusAllGather(a_, b_, 4, dt, comm_, nullptr), "datatype");
    EXPECT_INVALID_ARG(comm_, chorusReduceScatter(a_, b_, 4, dt, chorusSum, comm_, nullptr),
                       "datatype");
    EXPECT_INVALID_ARG(comm_, chorusScatter(a_, b_, 4, dt, 0, comm_, nullptr), "datatype");
    EXPECT_INVALID_ARG(comm_, chorusGather(a_, b_, 4, dt, 0, comm_, nullptr), "datatype");
    EXPECT_INVALID_ARG(comm_, chorusAllToAll(a_, b_, 4, dt, comm_, nullptr), "datatype");
    EXPECT_INVALID_ARG(comm_, chorusSend(a_, 4, dt, 0, comm_, nullptr), "datatype");
    EXPECT_INVALID_ARG(comm_, chorusRecv(b_, 4, dt, 0, comm_, nullptr), "datatype");
  }
}

TEST_F(OneRank, BadOpIsRejected) {
  for (int o : {int(chorusNumOps), -1, 6, 77, int(chorusMaxRedOp)}) {
    const chorusRedOp_t op = chorusRedOp_t(o);
    SCOPED_TRACE("op " + std::to_string(o));
    EXPECT_INVALID_ARG(comm_, chorusAllReduce(a_, b_, 4, chorusInt32, op, comm_, nullptr), "op");
    EXPECT_INVALID_ARG(comm_, chorusReduce(a_, b_, 4, chorusInt32, op, 0, comm_, nullptr), "op");
    EXPECT_INVALID_ARG(comm_, chorusReduceScatter(a_, b_, 4, chorusInt32, op, comm_, nullptr),
                       "op");
  }
}

TEST_F(OneRank, RootOutOfRangeIsRejected) {
  for (int root : {1, 2, -1, INT_MAX, INT_MIN}) {
    SCOPED_TRACE("root " + std::to_string(root));
    EXPECT_INVALID_ARG(comm_, chorusBroadcast(a_, b_, 4, chorusInt8, root, comm_, nullptr), "root");
    EXPECT_INVALID_ARG(comm_, chorusReduce(a_, b_, 4, chorusInt8, chorusSum, root, comm_, nullptr),
                       "root");
    EXPECT_INVALID_ARG(comm_, chorusScatter(a_, b_, 4, chorusInt8, root, comm_, nullptr), "root");
    EXPECT_INVALID_ARG(comm_, chorusGather(a_, b_, 4, chorusInt8, root, comm_, nullptr), "root");
  }
}

TEST_F(OneRank, PeerOutOfRangeIsRejected) {
  for (int peer : {1, 2, -1, INT_MAX, INT_MIN}) {
    SCOPED_TRACE("peer " + std::to_string(peer));
    EXPECT_INVALID_ARG(comm_, chorusSend(a_, 4, chorusInt8, peer, comm_, nullptr), "peer");
    EXPECT_INVALID_ARG(comm_, chorusRecv(b_, 4, chorusInt8, peer, comm_, nullptr), "peer");
  }
  // Inside a group: rejected at the call (or at End), and the group still closes.
  ASSERT_EQ(chorusGroupStart(), chorusSuccess);
  chorusResult_t s = chorusSend(a_, 4, chorusInt8, 3, comm_, nullptr);
  chorusResult_t e = chorusGroupEnd();
  EXPECT_TRUE(s == chorusInvalidArgument || e == chorusInvalidArgument)
      << "send to peer 3 of 1 inside a group: send returned " << chorusGetErrorString(s)
      << ", group end " << chorusGetErrorString(e);
}

TEST_F(OneRank, CountTimesSizeOverflowIsRejected) {
  EXPECT_INVALID_ARG(
      comm_, chorusAllReduce(a_, b_, SIZE_MAX, chorusInt32, chorusSum, comm_, nullptr), "count");
  EXPECT_INVALID_ARG(
      comm_, chorusAllReduce(a_, b_, SIZE_MAX / 2, chorusFloat64, chorusSum, comm_, nullptr),
      "count");
  EXPECT_INVALID_ARG(
      comm_, chorusBroadcast(a_, b_, SIZE_MAX / 4 + 1, chorusFloat32, 0, comm_, nullptr), "count");
  EXPECT_INVALID_ARG(
      comm_, chorusReduce(a_, b_, SIZE_MAX, chorusInt64, chorusMax, 0, comm_, nullptr), "count");
  EXPECT_INVALID_ARG(
      comm_, chorusAllGather(a_, b_, SIZE_MAX / 2 + 1, chorusFloat16, comm_, nullptr), "count");
  EXPECT_INVALID_ARG(
      comm_, chorusReduceScatter(a_, b_, SIZE_MAX, chorusBfloat16, chorusSum, comm_, nullptr),
      "count");
  EXPECT_INVALID_ARG(
      comm_, chorusScatter(a_, b_, SIZE_MAX / 8 + 1, chorusUint64, 0, comm_, nullptr), "count");
  EXPECT_INVALID_ARG(comm_, chorusGather(a_, b_, SIZE_MAX / 8 + 1, chorusInt64, 0, comm_, nullptr),
                     "count");
  EXPECT_INVALID_ARG(comm_, chorusAllToAll(a_, b_, SIZE_MAX, chorusInt32, comm_, nullptr), "count");
  EXPECT_INVALID_ARG(comm_, chorusSend(a_, SIZE_MAX, chorusInt32, 0, comm_, nullptr), "count");
  EXPECT_INVALID_ARG(comm_, chorusRecv(b_, SIZE_MAX, chorusInt32, 0, comm_, nullptr), "count");
}

TEST_F(OneRank, CommQueriesRejectNullOutputs) {
  chorusResult_t ae;
  EXPECT_INVALID_ARG(comm_, chorusCommCount(comm_, nullptr), "count");
  EXPECT_INVALID_ARG(comm_, chorusCommUserRank(comm_, nullptr), "rank");
  EXPECT_RESULT(chorusCommGetAsyncError(comm_, nullptr), chorusInvalidArgument);
  EXPECT_RESULT(chorusCommGetAsyncError(comm_, &ae), chorusSuccess);
  EXPECT_EQ(ae, chorusSuccess);
  int n = 0, r = -1;
  EXPECT_RESULT(chorusCommCount(comm_, &n), chorusSuccess);
  EXPECT_RESULT(chorusCommUserRank(comm_, &r), chorusSuccess);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(r, 0);
}

TEST_F(OneRank, SplitRejectsBadArguments) {
  EXPECT_RESULT(chorusCommSplit(comm_, 0, 0, nullptr, nullptr), chorusInvalidArgument);
  chorusComm_t nc = nullptr;
  EXPECT_RESULT(chorusCommSplit(comm_, -5, 0, &nc, nullptr), chorusInvalidArgument);
  EXPECT_TRUE(lastErrorNames(comm_, {"color"}));
}

TEST_F(OneRank, PreMulSumRejectsBadArguments) {
  chorusRedOp_t op;
  float two = 2.0f;
  EXPECT_RESULT(
      chorusRedOpCreatePreMulSum(nullptr, &two, chorusFloat32, chorusScalarHostImmediate, comm_),
      chorusInvalidArgument);
  EXPECT_INVALID_ARG(
      comm_,
      chorusRedOpCreatePreMulSum(&op, nullptr, chorusFloat32, chorusScalarHostImmediate, comm_),
      "scalar");
  EXPECT_INVALID_ARG(comm_,
                     chorusRedOpCreatePreMulSum(&op, &two, chorusDataType_t(chorusNumTypes),
                                                chorusScalarHostImmediate, comm_),
                     "datatype");
  {
    // Not a chorusScalarResidence_t at all: either code is acceptable, but not success.
    chorusResult_t rr =
        chorusRedOpCreatePreMulSum(&op, &two, chorusFloat32, chorusScalarResidence_t(7), comm_);
    EXPECT_TRUE(rr == chorusInvalidArgument || rr == chorusInvalidUsage)
        << "residence 7 returned " << chorusGetErrorString(rr);
    EXPECT_TRUE(lastErrorNames(comm_, {"residence", "scalar"}));
  }
  // chorusScalarDevice: "not supported on host-only builds".
  chorusRedOp_t dop = chorusSum;
  chorusResult_t r =
      chorusRedOpCreatePreMulSum(&dop, &two, chorusFloat32, chorusScalarDevice, comm_);
  EXPECT_TRUE(r == chorusInvalidUsage || r == chorusInvalidArgument)
      << "chorusScalarDevice on a host pointer returned " << chorusGetErrorString(r);
  if (r == chorusSuccess) chorusRedOpDestroy(dop, comm_);
  // Built-in ops cannot be destroyed; a created op only once.
  EXPECT_RESULT(chorusRedOpDestroy(chorusSum, comm_), chorusInvalidArgument);
  EXPECT_RESULT(chorusRedOpDestroy(chorusRedOp_t(12345), comm_), chorusInvalidArgument);
  ASSERT_EQ(chorusRedOpCreatePreMulSum(&op, &two, chorusFloat32, chorusScalarHostImmediate, comm_),
            chorusSuccess);
  EXPECT_GE(int(op), int(chorusNumOps));
  // A PreMulSum op created for float32 used with another type.
  EXPECT_RESULT(chorusAllReduce(a_, b_, 4, chorusInt32, op, comm_, nullptr), chorusInvalidArgument);
  EXPECT_RESULT(chorusRedOpDestroy(op, comm_), chorusSuccess);
  EXPECT_RESULT(chorusRedOpDestroy(op, comm_), chorusInvalidArgument);
  // A destroyed op cannot be used any more.
  EXPECT_INVALID_ARG(comm_, chorusAllReduce(a_, b_, 4, chorusFloat32, op, comm_, nullptr), "op");
}

// An identical repeat of the last blocking call reuses its validation (chorusComm::lastCall):
// a user op is never taken from it, so a repeat with a destroyed op is still rejected, and
// a repeat whose one argument differs is validated afresh.
TEST_F(OneRank, ARepeatedCallIsCheckedAgainWhereItsArgumentsNoLongerHold) {
  float in[4] = {1, 2, 3, 4}, out[4] = {0};
  float three = 3.0f;
  chorusRedOp_t op;
  ASSERT_EQ(
      chorusRedOpCreatePreMulSum(&op, &three, chorusFloat32, chorusScalarHostImmediate, comm_),
      chorusSuccess);
  for (int rep = 0; rep < 3; ++rep) {
    ASSERT_EQ(chorusAllReduce(in, out, 4, chorusFloat32, op, comm_, nullptr), chorusSuccess)
        << chorusGetLastError(comm_);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], 3.0f * in[i]) << "repeat " << rep;
  }
  ASSERT_EQ(chorusRedOpDestroy(op, comm_), chorusSuccess);
  EXPECT_INVALID_ARG(comm_, chorusAllReduce(in, out, 4, chorusFloat32, op, comm_, nullptr), "op");
  // Built-in op: repeats succeed; each argument changed alone is checked again.
  for (int rep = 0; rep < 3; ++rep)
    ASSERT_EQ(chorusAllReduce(in, out, 4, chorusFloat32, chorusSum, comm_, nullptr), chorusSuccess);
  EXPECT_INVALID_ARG(
      comm_, chorusAllReduce(in, nullptr, 4, chorusFloat32, chorusSum, comm_, nullptr), "recvbuff");
  ASSERT_EQ(chorusAllReduce(in, out, 4, chorusFloat32, chorusSum, comm_, nullptr), chorusSuccess);
  EXPECT_INVALID_ARG(comm_,
                     chorusAllReduce(in, out, 4, chorusDataType_t(99), chorusSum, comm_, nullptr),
                     "datatype");
  ASSERT_EQ(chorusAllReduce(in, out, 4, chorusFloat32, chorusSum, comm_, nullptr), chorusSuccess);
  EXPECT_INVALID_ARG(
      comm_, chorusAllReduce(in, out, 4, chorusFloat32, chorusRedOp_t(77), comm_, nullptr), "op");
  ASSERT_EQ(chorusBroadcast(in, out, 4, chorusFloat32, 0, comm_, nullptr), chorusSuccess);
  EXPECT_INVALID_ARG(comm_, chorusBroadcast(in, out, 4, chorusFloat32, 1, comm_, nullptr), "root");
  ASSERT_EQ(chorusAllReduce(in, out, 4, chorusFloat32, chorusSum, comm_, nullptr), chorusSuccess);
  EXPECT_INVALID_ARG(
      comm_, chorusAllReduce(in, out, SIZE_MAX / 2, chorusFloat32, chorusSum, comm_, nullptr),
      "count");
}

// Calls that alternate collective, count, type, op and buffers between two ranks (threads):
// every result is checked against one computed here, so a call served by the last call's
// arguments when it should not be (or the reverse) shows.
TEST(ApiTwoRanks, AlternatingAndRepeatedCallsEachGiveTheirOwnResult) {
  chorusComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(chorusCommInitAll(comms, 2, nullptr), chorusSuccess) << chorusGetLastError(nullptr);
  std::vector<std::string> errors(2);
  auto rank = [&](int r) {
    float fin[8], fout[16], fout2[16];
    int32_t iin[8], iout[8];
    auto fail = [&](const std::string& what) {
      if (errors[r].empty()) errors[r] = what;
    };
    for (int it = 0; it < 200; ++it) {
      for (int i = 0; i < 8; ++i) {
        fin[i] = float((r + 1) * (i + 1) + it);
        iin[i] = (r + 2) * (i + 3) + it;
      }
      const size_t n = 5 + size_t(it % 3);  // 5, 6, 7
      // sum, max, sum on float (same buffers), then int32 sum, then an all-gather.
      if (chorusAllReduce(fin, fout, n, chorusFloat32, chorusSum, comms[r], nullptr) !=
          chorusSuccess)
        return fail(chorusGetLastError(comms[r]));
      for (size_t i = 0; i < n; ++i)
        if (fout[i] != float(1 * (i + 1) + it) + float(2 * (i + 1) + it))
          return fail("sum " + std::to_string(it) + " element " + std::to_string(i));
      if (chorusAllReduce(fin, fout, n, chorusFloat32, chorusMax, comms[r], nullptr) !=
          chorusSuccess)
        return fail(chorusGetLastError(comms[r]));
      for (size_t i = 0; i < n; ++i)
        if (fout[i] != float(2 * (i + 1) + it))
          return fail("max " + std::to_string(it) + " element " + std::to_string(i));
      if (chorusAllReduce(fin, fout2, n, chorusFloat32, chorusSum, comms[r], nullptr) !=
          chorusSuccess)
        return fail(chorusGetLastError(comms[r]));
      for (size_t i = 0; i < n; ++i)
        if (fout2[i] != float(1 * (i + 1) + it) + float(2 * (i + 1) + it))
          return fail("sum into another buffer " + std::to_string(it));
      if (chorusAllReduce(iin, iout, n, chorusInt32, chorusSum, comms[r], nullptr) != chorusSuccess)
        return fail(chorusGetLastError(comms[r]));
      for (size_t i = 0; i < n; ++i)
        if (iout[i] != int32_t(2 * (i + 3) + it) + int32_t(3 * (i + 3) + it))
          return fail("int32 sum " + std::to_string(it));
      if (chorusAllGather(fin, fout, n, chorusFloat32, comms[r], nullptr) != chorusSuccess)
        return fail(chorusGetLastError(comms[r]));
      for (int q = 0; q < 2; ++q)
        for (size_t i = 0; i < n; ++i)
          if (fout[size_t(q) * n + i] != float((q + 1) * (i + 1) + it))
            return fail("all-gather " + std::to_string(it));
    }
  };
  std::thread t1(rank, 1);
  rank(0);
  t1.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  for (chorusComm_t c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

TEST(ApiGroup, EndWithoutStartIsInvalidUsage) {
  EXPECT_RESULT(chorusGroupEnd(), chorusInvalidUsage);
  // Balanced nesting works.
  EXPECT_RESULT(chorusGroupStart(), chorusSuccess);
  EXPECT_RESULT(chorusGroupStart(), chorusSuccess);
  EXPECT_RESULT(chorusGroupEnd(), chorusSuccess);
  EXPECT_RESULT(chorusGroupEnd(), chorusSuccess);
  EXPECT_RESULT(chorusGroupEnd(), chorusInvalidUsage);
}

// Not a stream at all (a raw cudaStream_t, or garbage): refused, not dereferenced as one.
TEST_F(OneRank, ForeignStreamHandleIsRejected) {
  alignas(64) unsigned char fake[256] = {0};
  const chorusStream_t s = reinterpret_cast<chorusStream_t>(fake);
  EXPECT_RESULT(chorusAllReduce(a_, b_, 4, chorusFloat32, chorusSum, comm_, s), chorusInvalidUsage);
  EXPECT_TRUE(lastErrorNames(comm_, {"stream"}));
  EXPECT_RESULT(chorusBarrier(comm_, s), chorusInvalidUsage);
  EXPECT_RESULT(chorusStreamSynchronize(s), chorusInvalidUsage);
  EXPECT_TRUE(lastErrorNames(nullptr, {"stream"}));
  EXPECT_RESULT(chorusStreamQuery(s), chorusInvalidUsage);
  EXPECT_RESULT(chorusStreamDestroy(s), chorusInvalidUsage);
}

TEST(ApiStream, RejectsNullArguments) {
  EXPECT_RESULT(chorusStreamCreate(nullptr), chorusInvalidArgument);
  chorusResult_t r = chorusStreamFromCuda(nullptr, nullptr);
  EXPECT_TRUE(r == chorusInvalidArgument || r == chorusInvalidUsage) << chorusGetErrorString(r);
  int dummy = 0;
  chorusStream_t s = nullptr;
  r = chorusStreamFromCuda(&dummy, &s);
  EXPECT_EQ(r, chorusInvalidUsage) << "host-only build: chorusStreamFromCuda must say "
                                      "chorusInvalidUsage, got "
                                   << chorusGetErrorString(r);
  EXPECT_NE(std::strlen(chorusGetLastError(nullptr)), 0u);
}

// ---------------------------------------------------------------------------------------
// Communicator creation
// ---------------------------------------------------------------------------------------

TEST(ApiInit, InitRankRejectsBadRankAndSize) {
  chorusUniqueId id;
  ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess) << chorusGetLastError(nullptr);
  chorusComm_t c = nullptr;
  EXPECT_INVALID_ARG(nullptr, chorusCommInitRank(&c, 2, id, 2), "rank");
  EXPECT_INVALID_ARG(nullptr, chorusCommInitRank(&c, 2, id, 5), "rank");
  EXPECT_INVALID_ARG(nullptr, chorusCommInitRank(&c, 2, id, -1), "rank");
  EXPECT_INVALID_ARG(nullptr, chorusCommInitRank(&c, 0, id, 0), "nranks");
  EXPECT_INVALID_ARG(nullptr, chorusCommInitRank(&c, -3, id, 0), "nranks");
  EXPECT_INVALID_ARG(nullptr, chorusCommInitRank(&c, INT_MIN, id, 0), "nranks");
  EXPECT_INVALID_ARG(nullptr, chorusCommInitRank(nullptr, 1, id, 0), "comm");
  EXPECT_EQ(c, nullptr);
  EXPECT_RESULT(chorusGetUniqueId(nullptr), chorusInvalidArgument);
}

// chorusGetLaunchInfo reads the launcher table of chorusCommInitFromEnv; each case sets
// only the variables it names (the others are saved, cleared and put back).
class LaunchEnv : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {
      "CHORUS_RANK",          "CHORUS_WORLD_SIZE",    "RANK",     "WORLD_SIZE",
      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
      "SLURM_PROCID",         "SLURM_NTASKS"};
  void SetUp() override {
    for (const char* v : kVars) {
      const char* old = getenv(v);
      saved_.push_back({v, old != nullptr, old ? old : ""});
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const Saved& v : saved_) {
      if (v.set)
        setenv(v.name.c_str(), v.value.c_str(), 1);
      else
        unsetenv(v.name.c_str());
    }
  }
  struct Saved {
    std::string name;
    bool set;
    std::string value;
  };
  std::vector<Saved> saved_;
};

TEST_F(LaunchEnv, NoLauncherMeansAlone) {
  const char* launcher = "x";
  int rank = -1, nranks = -1;
  ASSERT_EQ(chorusGetLaunchInfo(&launcher, &rank, &nranks), chorusSuccess);
  EXPECT_EQ(launcher, nullptr);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(nranks, 1);
  setenv("SLURM_NTASKS", "4", 1);  // salloc's shell: a size but no rank is no launcher
  ASSERT_EQ(chorusGetLaunchInfo(&launcher, &rank, &nranks), chorusSuccess);
  EXPECT_EQ(launcher, nullptr);
  EXPECT_EQ(chorusGetLaunchInfo(nullptr, nullptr, nullptr), chorusSuccess);
}

TEST_F(LaunchEnv, FirstLauncherInTableOrderWins) {
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
  const char* launcher = nullptr;
  int rank = -1, nranks = -1;
  ASSERT_EQ(chorusGetLaunchInfo(&launcher, &rank, &nranks), chorusSuccess);
  ASSERT_NE(launcher, nullptr);
  EXPECT_STREQ(launcher, "Open MPI");
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(nranks, 3);
  setenv("CHORUS_RANK", "2", 1);
  setenv("CHORUS_WORLD_SIZE", "4", 1);
  ASSERT_EQ(chorusGetLaunchInfo(&launcher, &rank, &nranks), chorusSuccess);
  EXPECT_STREQ(launcher, "chorusrun");
  EXPECT_EQ(rank, 2);
  EXPECT_EQ(nranks, 4);
}

TEST_F(LaunchEnv, BadRankOrSizeIsRejected) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "2", 1);
  EXPECT_INVALID_ARG(nullptr, chorusGetLaunchInfo(nullptr, nullptr, nullptr), "RANK");
  setenv("RANK", "zero", 1);
  EXPECT_INVALID_ARG(nullptr, chorusGetLaunchInfo(nullptr, nullptr, nullptr), "RANK");
  unsetenv("WORLD_SIZE");
  setenv("RANK", "0", 1);
  EXPECT_INVALID_ARG(nullptr, chorusGetLaunchInfo(nullptr, nullptr, nullptr), "WORLD_SIZE");
}

TEST(ApiInit, GarbageUniqueIdIsRejected) {
  chorusComm_t c = nullptr;
  chorusUniqueId id;
  for (int fill : {0x00, 0xAB, 0xFF}) {
    SCOPED_TRACE("unique id filled with " + std::to_string(fill));
    std::memset(&id, fill, sizeof id);
    EXPECT_INVALID_ARG(nullptr, chorusCommInitRank(&c, 1, id, 0), "unique", "commid", "magic",
                       "id");
    chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
    EXPECT_INVALID_ARG(nullptr, chorusCommInitRankConfig(&c, 2, id, 1, &cfg), "unique", "commid",
                       "magic", "id");
    EXPECT_EQ(c, nullptr);
  }
  // A real id with its magic bytes garbled.
  ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  for (int i = 0; i < 4; ++i) id.internal[i] = char(~id.internal[i]);
  EXPECT_INVALID_ARG(nullptr, chorusCommInitRank(&c, 1, id, 0), "unique", "commid", "magic", "id");
}

TEST(ApiInit, ConfigWithBadMagicIsRejected) {
  chorusUniqueId id;
  ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
  cfg.magic = 0x12345678u;
  chorusComm_t c = nullptr;
  chorusResult_t r = chorusCommInitRankConfig(&c, 1, id, 0, &cfg);
  EXPECT_EQ(r, chorusInvalidArgument) << chorusGetErrorString(r);
  EXPECT_TRUE(lastErrorNames(nullptr, {"config", "magic"}));
  if (r == chorusSuccess && c) chorusCommDestroy(c);
}

TEST(ApiInit, ConfigWithBadFieldsIsRejected) {
  chorusUniqueId id;
  ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  chorusComm_t c = nullptr;
  for (int t : {0, -1, INT_MIN + 1}) {
    SCOPED_TRACE("timeoutSeconds " + std::to_string(t));
    chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
    cfg.timeoutSeconds = t;
    EXPECT_INVALID_ARG(nullptr, chorusCommInitRankConfig(&c, 1, id, 0, &cfg), "timeoutSeconds");
    EXPECT_EQ(c, nullptr);
  }
  for (int b : {2, -1, 100}) {
    SCOPED_TRACE("blocking " + std::to_string(b));
    chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
    cfg.blocking = b;
    EXPECT_INVALID_ARG(nullptr, chorusCommInitRankConfig(&c, 1, id, 0, &cfg), "blocking");
    EXPECT_EQ(c, nullptr);
  }
}

// A non-blocking init that cannot finish (rank 1 never joins): the half-made communicator
// must refuse work with chorusInvalidUsage, not touch connections it does not have.
TEST(ApiInit, CommStillInitializingRefusesWork) {
  chorusUniqueId id;
  ASSERT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  chorusComm_t c = nullptr;
  ASSERT_EQ(chorusCommInitRankConfig(&c, 2, id, 0, &cfg), chorusInProgress);
  ASSERT_NE(c, nullptr);
  unsigned char a[64] = {0}, b[64] = {0};
  int x = 0;
  chorusComm_t nc = nullptr;
  EXPECT_RESULT(chorusAllReduce(a, b, 4, chorusFloat32, chorusSum, c, nullptr), chorusInvalidUsage);
  EXPECT_TRUE(lastErrorNames(c, {"initializing"}));
  EXPECT_RESULT(chorusBarrier(c, nullptr), chorusInvalidUsage);
  EXPECT_RESULT(chorusSend(a, 4, chorusInt8, 1, c, nullptr), chorusInvalidUsage);
  EXPECT_RESULT(chorusCommCount(c, &x), chorusInvalidUsage);
  EXPECT_RESULT(chorusCommUserRank(c, &x), chorusInvalidUsage);
  EXPECT_RESULT(chorusCommSplit(c, 0, 0, &nc, nullptr), chorusInvalidUsage);
  EXPECT_TRUE(lastErrorNames(c, {"initializing"}));
  chorusResult_t ae = chorusSuccess;
  EXPECT_RESULT(chorusCommGetAsyncError(c, &ae), chorusSuccess);
  EXPECT_EQ(ae, chorusInProgress);
  EXPECT_RESULT(chorusCommAbort(c), chorusSuccess);
}

TEST(ApiInit, InitAllRejectsBadArguments) {
  chorusComm_t comms[2] = {nullptr, nullptr};
  EXPECT_INVALID_ARG(nullptr, chorusCommInitAll(nullptr, 2, nullptr), "comm");
  EXPECT_INVALID_ARG(nullptr, chorusCommInitAll(comms, 0, nullptr), "ndev");
  EXPECT_INVALID_ARG(nullptr, chorusCommInitAll(comms, -1, nullptr), "ndev");
}

// ---------------------------------------------------------------------------------------
// Overflow through nranks (2-rank communicator, called from one thread: must be rejected
// before any communication).
// ---------------------------------------------------------------------------------------

TEST(ApiTwoRanks, GatherLikeSizeOverflowIsRejected) {
  chorusComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(chorusCommInitAll(comms, 2, nullptr), chorusSuccess) << chorusGetLastError(nullptr);
  unsigned char a[64], b[64];
  const size_t half = SIZE_MAX / 2 + 1;  // count fits, nranks * count bytes do not
  EXPECT_INVALID_ARG(comms[0], chorusAllGather(a, b, half, chorusInt8, comms[0], nullptr), "count");
  EXPECT_INVALID_ARG(
      comms[0], chorusReduceScatter(a, b, half, chorusInt8, chorusSum, comms[0], nullptr), "count");
  EXPECT_INVALID_ARG(comms[0], chorusAllToAll(a, b, half, chorusInt8, comms[0], nullptr), "count");
  EXPECT_INVALID_ARG(comms[0], chorusScatter(a, b, half, chorusInt8, 0, comms[0], nullptr),
                     "count");
  EXPECT_INVALID_ARG(comms[0], chorusGather(a, b, half, chorusInt8, 0, comms[0], nullptr), "count");
  EXPECT_INVALID_ARG(comms[0], chorusBroadcast(a, b, 4, chorusInt8, 2, comms[0], nullptr), "root");
  EXPECT_INVALID_ARG(comms[0], chorusSend(a, 4, chorusInt8, 2, comms[0], nullptr), "peer");
  for (chorusComm_t c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

// ---------------------------------------------------------------------------------------
// Unmapped and read-only memory: an error, not a crash (checked in a child process).
// ---------------------------------------------------------------------------------------

namespace {

// A pointer into a region that was mapped and then unmapped.
void* unmappedPointer() {
  const size_t len = 4 * size_t(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return reinterpret_cast<void*>(0x10);
  munmap(p, len);
  return static_cast<char*>(p) + 128;
}

// A pointer into a reserved region with no access at all (mapped, so mincore alone would
// call it fine; it can never be handed to another mapping while reserved).
void* noAccessPointer() {
  const size_t len = 4 * size_t(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? reinterpret_cast<void*>(0x10) : static_cast<char*>(p) + 64;
}

void* readOnlyPointer() {
  const size_t len = 4 * size_t(sysconf(_SC_PAGESIZE));
  void* p = mmap(nullptr, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Runs in the death-test child: exit 0 when the call is rejected as it should be,
// 100 + result otherwise. A crash shows up as a signal.
enum class BadCall {
  AllReduceSend,
  AllReduceRecv,
  BroadcastSend,
  AllGatherSend,
  ReduceScatterSend,
  AllToAllSend,
  ReduceSend,
  ScatterSend,
  GatherRecv,
  GroupSelfSend,
  ReadOnlyRecv
};

[[noreturn]] void badPointerChild(BadCall which, int kind) {
  chorusComm_t comm = nullptr;
  if (chorusCommInitAll(&comm, 1, nullptr) != chorusSuccess) _exit(99);
  // Made after init, so no mapping made by init can land in the unmapped hole.
  void* bad = kind == 0   ? reinterpret_cast<void*>(0x10)
              : kind == 1 ? unmappedPointer()
              : kind == 2 ? readOnlyPointer()
                          : noAccessPointer();
  static float good[4096];
  chorusResult_t r = chorusSuccess;
  const size_t n = 1024;
  switch (which) {
    case BadCall::AllReduceSend:
      r = chorusAllReduce(bad, good, n, chorusFloat32, chorusSum, comm, nullptr);
      break;
    case BadCall::AllReduceRecv:
      r = chorusAllReduce(good, bad, n, chorusFloat32, chorusSum, comm, nullptr);
      break;
    case BadCall::BroadcastSend:
      r = chorusBroadcast(bad, good, n, chorusFloat32, 0, comm, nullptr);
      break;
    case BadCall::AllGatherSend:
      r = chorusAllGather(bad, good, n, chorusFloat32, comm, nullptr);
      break;
    case BadCall::ReduceScatterSend:
      r = chorusReduceScatter(bad, good, n, chorusFloat32, chorusSum, comm, nullptr);
      break;
    case BadCall::AllToAllSend:
      r = chorusAllToAll(bad, good, n, chorusFloat32, comm, nullptr);
      break;
    case BadCall::ReduceSend:
      r = chorusReduce(bad, good, n, chorusFloat32, chorusMax, 0, comm, nullptr);
      break;
    case BadCall::ScatterSend:
      r = chorusScatter(bad, good, n, chorusFloat32, 0, comm, nullptr);
      break;
    case BadCall::GatherRecv:
      r = chorusGather(good, bad, n, chorusFloat32, 0, comm, nullptr);
      break;
    case BadCall::GroupSelfSend: {
      chorusResult_t a = chorusGroupStart();
      chorusResult_t s = chorusSend(bad, n, chorusFloat32, 0, comm, nullptr);
      chorusResult_t v = chorusRecv(good, n, chorusFloat32, 0, comm, nullptr);
      chorusResult_t e = chorusGroupEnd();
      r = a != chorusSuccess ? a : s != chorusSuccess ? s : v != chorusSuccess ? v : e;
      break;
    }
    case BadCall::ReadOnlyRecv:
      r = chorusAllReduce(good, bad, n, chorusFloat32, chorusSum, comm, nullptr);
      break;
  }
  const bool ok = (r == chorusInvalidArgument || r == chorusInvalidUsage) &&
                  std::strlen(chorusGetLastError(comm)) > 0;
  _exit(ok ? 0 : 100 + int(r));
}

}  // namespace

class ApiBadPointer : public ::testing::TestWithParam<std::tuple<BadCall, int>> {};

TEST_P(ApiBadPointer, IsAnErrorNotACrash) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const BadCall which = std::get<0>(GetParam());
  // 0: (void*)0x10, 1: unmapped region, 2: read-only, 3: mapped without access
  const int kind = std::get<1>(GetParam());
  EXPECT_EXIT({ badPointerChild(which, kind); }, ::testing::ExitedWithCode(0), "")
      << "exit 100+N: the call returned result N instead of chorusInvalidArgument/"
         "chorusInvalidUsage (or left no last error); a signal: it crashed";
}

INSTANTIATE_TEST_SUITE_P(
    SendBuffers, ApiBadPointer,
    ::testing::Combine(::testing::Values(BadCall::AllReduceSend, BadCall::BroadcastSend,
                                         BadCall::AllGatherSend, BadCall::ReduceScatterSend,
                                         BadCall::AllToAllSend, BadCall::ReduceSend,
                                         BadCall::ScatterSend, BadCall::GroupSelfSend),
                       ::testing::Values(0, 1, 3)));
INSTANTIATE_TEST_SUITE_P(RecvBuffers, ApiBadPointer,
                         ::testing::Combine(::testing::Values(BadCall::AllReduceRecv,
                                                              BadCall::GatherRecv),
                                            ::testing::Values(0, 1)));
INSTANTIATE_TEST_SUITE_P(ReadOnlyRecvBuffer, ApiBadPointer,
                         ::testing::Combine(::testing::Values(BadCall::ReadOnlyRecv),
                                            ::testing::Values(2)));
