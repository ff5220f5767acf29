// test_destroyed_handles.cc — every call on a destroyed communicator or stream is refused
// as chorusInvalidUsage without touching the freed handle.
//
// The handle's memory is freed by then: a check that read it (a magic number) would be a
// heap-use-after-free, which the ASan tree of tools/test (suite 'unit') reports and fails
// on. Without ASan the test still checks every result code.
#include <gtest/gtest.h>

#include <chorus.h>

#include <string>

namespace {

#define EXPECT_USAGE(call)                                                                  \
  do {                                                                                      \
    const chorusResult_t r_ = (call);                                                       \
    EXPECT_EQ(r_, chorusInvalidUsage) << #call << " returned " << chorusGetErrorString(r_); \
  } while (0)

chorusComm_t destroyedComm() {
  chorusComm_t comm = nullptr;
  EXPECT_EQ(chorusCommInitAll(&comm, 1, nullptr), chorusSuccess) << chorusGetLastError(nullptr);
  EXPECT_EQ(chorusCommDestroy(comm), chorusSuccess);
  return comm;
}

}  // namespace

TEST(DestroyedHandles, EveryCommCallIsInvalidUsage) {
  const chorusComm_t dead = destroyedComm();
  ASSERT_NE(dead, nullptr);
  float a[4] = {1, 2, 3, 4}, b[4] = {0};
  int n = 0, peer = -1;
  chorusResult_t async = chorusSuccess;
  chorusComm_t out = nullptr;
  chorusRedOp_t op = chorusSum;
  float scalar = 2;
  void* handle = nullptr;
  const chorusStream_t s = nullptr;

  EXPECT_USAGE(chorusCommSplit(dead, 0, 0, &out, nullptr));
  EXPECT_USAGE(chorusCommShrink(dead, nullptr, 0, &out, nullptr, CHORUS_SHRINK_DEFAULT));
  int failed[1];
  EXPECT_USAGE(chorusCommFailedRanks(dead, failed, 1, &n));
  EXPECT_USAGE(chorusCommRevoke(dead));
  EXPECT_USAGE(chorusCommFinalize(dead));
  EXPECT_USAGE(chorusCommGetAsyncError(dead, &async));
  EXPECT_USAGE(chorusCommCount(dead, &n));
  EXPECT_USAGE(chorusCommUserRank(dead, &n));
  EXPECT_USAGE(
      chorusRedOpCreatePreMulSum(&op, &scalar, chorusFloat32, chorusScalarHostImmediate, dead));
  EXPECT_USAGE(chorusRedOpDestroy(chorusRedOp_t(chorusNumOps), dead));
  EXPECT_USAGE(chorusAllReduce(a, b, 4, chorusFloat32, chorusSum, dead, s));
  EXPECT_USAGE(chorusBroadcast(a, b, 4, chorusFloat32, 0, dead, s));
  EXPECT_USAGE(chorusReduce(a, b, 4, chorusFloat32, chorusSum, 0, dead, s));
  EXPECT_USAGE(chorusAllGather(a, b, 4, chorusFloat32, dead, s));
  EXPECT_USAGE(chorusReduceScatter(a, b, 4, chorusFloat32, chorusSum, dead, s));
  EXPECT_USAGE(chorusScatter(a, b, 4, chorusFloat32, 0, dead, s));
  EXPECT_USAGE(chorusGather(a, b, 4, chorusFloat32, 0, dead, s));
  EXPECT_USAGE(chorusAllToAll(a, b, 4, chorusFloat32, dead, s));
  EXPECT_USAGE(chorusBarrier(dead, s));
  EXPECT_USAGE(chorusSend(a, 4, chorusFloat32, 0, dead, s));
  EXPECT_USAGE(chorusRecv(b, 4, chorusFloat32, 0, dead, s));
  EXPECT_USAGE(chorusRecvAnySource(b, 4, chorusFloat32, &peer, dead, s));
  EXPECT_USAGE(chorusCommRegister(dead, a, sizeof a, &handle));
  EXPECT_USAGE(chorusCommDeregister(dead, &handle));
  // The last error is this thread's (the comm is gone) and says so.
  EXPECT_NE(std::string(chorusGetLastError(dead)).find("not a live communicator"),
            std::string::npos)
      << chorusGetLastError(dead);
  // Inside a group the call is refused when recorded; the group then ends cleanly.
  ASSERT_EQ(chorusGroupStart(), chorusSuccess);
  EXPECT_USAGE(chorusAllReduce(a, b, 4, chorusFloat32, chorusSum, dead, s));
  EXPECT_USAGE(chorusSend(a, 4, chorusFloat32, 0, dead, s));
  EXPECT_EQ(chorusGroupEnd(), chorusSuccess);
  // Destroying or aborting it again is refused too, not a double free.
  EXPECT_USAGE(chorusCommAbort(dead));
  EXPECT_USAGE(chorusCommDestroy(dead));
}

TEST(DestroyedHandles, EveryStreamCallIsInvalidUsage) {
  chorusComm_t comm = nullptr;
  ASSERT_EQ(chorusCommInitAll(&comm, 1, nullptr), chorusSuccess) << chorusGetLastError(nullptr);
  chorusStream_t dead = nullptr;
  ASSERT_EQ(chorusStreamCreate(&dead), chorusSuccess);
  ASSERT_EQ(chorusStreamDestroy(dead), chorusSuccess);
  float a[4] = {1, 2, 3, 4}, b[4] = {0};
  int peer = -1;
  EXPECT_USAGE(chorusStreamSynchronize(dead));
  EXPECT_USAGE(chorusStreamQuery(dead));
  EXPECT_USAGE(chorusStreamDestroy(dead));
  EXPECT_USAGE(chorusAllReduce(a, b, 4, chorusFloat32, chorusSum, comm, dead));
  EXPECT_USAGE(chorusBroadcast(a, b, 4, chorusFloat32, 0, comm, dead));
  EXPECT_USAGE(chorusReduce(a, b, 4, chorusFloat32, chorusSum, 0, comm, dead));
  EXPECT_USAGE(chorusAllGather(a, b, 4, chorusFloat32, comm, dead));
  EXPECT_USAGE(chorusReduceScatter(a, b, 4, chorusFloat32, chorusSum, comm, dead));
  EXPECT_USAGE(chorusScatter(a, b, 4, chorusFloat32, 0, comm, dead));
  EXPECT_USAGE(chorusGather(a, b, 4, chorusFloat32, 0, comm, dead));
  EXPECT_USAGE(chorusAllToAll(a, b, 4, chorusFloat32, comm, dead));
  EXPECT_USAGE(chorusBarrier(comm, dead));
  EXPECT_USAGE(chorusSend(a, 4, chorusFloat32, 0, comm, dead));
  EXPECT_USAGE(chorusRecv(b, 4, chorusFloat32, 0, comm, dead));
  EXPECT_USAGE(chorusRecvAnySource(b, 4, chorusFloat32, &peer, comm, dead));
  // The communicator is unharmed: a valid call still gives the right bytes.
  EXPECT_EQ(chorusAllReduce(a, b, 4, chorusFloat32, chorusSum, comm, nullptr), chorusSuccess);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b[i], a[i]);
  EXPECT_EQ(chorusCommDestroy(comm), chorusSuccess);
}
