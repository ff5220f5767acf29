// test_flight_recorder.cc — what the flight recorder holds after known calls, its dump on a
// timeout, and check mode, with ranks as threads (links the library's internals to read
// the communicator's recorder directly).
//
// meson sets CHORUS_FLIGHT_RECORDER_DIR to a folder in the build tree, so a timeout here
// writes a real dump that the test then reads back.
#include <gtest/gtest.h>

#include <chorus.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "src/comm/comm.h"
#include "src/comm/flight_recorder.h"
#include "src/tuning/tuning.h"

namespace {

using chorus::Coll;
using chorus::FlightRecorder;
using chorus::FrRecord;
using chorus::FrState;

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs body(rank, comm) on one thread per rank.
void onRanks(const std::vector<chorusComm_t>& comms,
             const std::function<void(int, chorusComm_t)>& body) {
  std::vector<std::thread> t;
  for (size_t r = 0; r < comms.size(); ++r) t.emplace_back([&, r] { body(int(r), comms[r]); });
  for (auto& th : t) th.join();
}

struct Expect {
  uint64_t seq;
  Coll coll;
  chorusDataType_t type;
  uint64_t count;
  int op;
  int root;
};

TEST(FlightRecorderRing, KeepsTheLastOperations) {
  FlightRecorder fr(4);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(fr.enqueue(int(Coll::AllReduce), chorusFloat32, size_t(100 + i), chorusSum, -1));
  EXPECT_EQ(ids.front(), 1u);
  EXPECT_EQ(ids.back(), 6u);
  fr.start(ids[5], 42);
  fr.noteWait(ids[5], 3, true);
  fr.finish(ids[5], chorusTimeout);
  fr.finish(ids[5], chorusSuccess);  // only the first end counts
  fr.start(ids[0], 1);               // overwritten: ignored
  EXPECT_NE(fr.waitSlot(ids[0]), fr.waitSlot(ids[5]));

  const std::vector<FrRecord> s = fr.snapshot();
  ASSERT_EQ(s.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s[i].id, i + 3);
    EXPECT_EQ(s[i].count, 102 + i);
  }
  EXPECT_EQ(s[0].state, FrState::Enqueued);
  EXPECT_EQ(s[0].seq, 0u);
  EXPECT_EQ(s[3].seq, 42u);
  EXPECT_EQ(s[3].state, FrState::Failed);
  EXPECT_EQ(s[3].result, chorusTimeout);
  EXPECT_EQ(s[3].waitPeer, 3);
  EXPECT_TRUE(s[3].waitSend);
  EXPECT_GT(s[3].tEndNs, 0);
  EXPECT_GE(s[3].tStartNs, s[3].tEnqueueNs);  // queued, then started: timed at each
  EXPECT_GE(s[3].tEndNs, s[3].tStartNs);
  EXPECT_EQ(s[0].tStartNs, 0);  // never started
  EXPECT_EQ(s[0].tEndNs, 0);

  // An entry reused by a later call shows none of the earlier call's times.
  FlightRecorder one(1);
  const uint64_t a = one.enqueue(int(Coll::Broadcast), chorusInt8, 4, -1, 0);
  one.start(a, 1);
  one.finish(a, chorusTimeout);
  ASSERT_GT(one.snapshot().at(0).tEndNs, 0);
  const uint64_t b = one.enqueue(int(Coll::Reduce), chorusInt8, 4, chorusSum, 0);
  const std::vector<FrRecord> s1 = one.snapshot();
  ASSERT_EQ(s1.size(), 1u);
  EXPECT_EQ(s1[0].id, b);
  EXPECT_EQ(s1[0].state, FrState::Enqueued);
  EXPECT_EQ(s1[0].result, chorusSuccess);
  EXPECT_EQ(s1[0].op, int(chorusSum));
  EXPECT_EQ(s1[0].tStartNs, 0);
  EXPECT_EQ(s1[0].tEndNs, 0);
  EXPECT_EQ(s1[0].waitPeer, -1);

  FlightRecorder off(0);
  EXPECT_EQ(off.enqueue(int(Coll::Barrier), chorusInt8, 0, -1, -1), 0u);
  off.start(0, 1);
  off.finish(0, chorusSuccess);
  EXPECT_NE(off.waitSlot(0), nullptr);
  EXPECT_TRUE(off.snapshot().empty());
}

TEST(FlightRecorderRing, BeginRecordsAStartedCallInOneWrite) {
  FlightRecorder fr(2);
  const uint64_t a = fr.begin(int(Coll::Gather), chorusFloat32, 128, -1, 1, 7);
  const uint64_t b = fr.begin(int(Coll::AllReduce), chorusInt64, 5, chorusMax, -1, 8);
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  // Before it ends, a begun call reads as started, with its number, start time and no end.
  std::vector<FrRecord> s = fr.snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].state, FrState::Started);
  EXPECT_EQ(s[0].seq, 7u);
  EXPECT_GT(s[0].tStartNs, 0);
  EXPECT_EQ(s[0].tStartNs, s[0].tEnqueueNs);
  EXPECT_EQ(s[0].tEndNs, 0);
  EXPECT_EQ(s[0].waitPeer, -1);
  fr.noteWait(b, 0, false);
  fr.finish(a, chorusSuccess);
  fr.finish(b, chorusRemoteError);

  s = fr.snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].coll, int(Coll::Gather));
  EXPECT_EQ(s[0].type, int(chorusFloat32));
  EXPECT_EQ(s[0].count, 128u);
  EXPECT_EQ(s[0].op, -1);
  EXPECT_EQ(s[0].root, 1);
  EXPECT_EQ(s[0].state, FrState::Completed);
  EXPECT_EQ(s[0].result, chorusSuccess);
  EXPECT_EQ(s[0].tEndNs, 0);  // a success is not timed
  EXPECT_EQ(s[1].seq, 8u);
  EXPECT_EQ(s[1].coll, int(Coll::AllReduce));
  EXPECT_EQ(s[1].type, int(chorusInt64));
  EXPECT_EQ(s[1].count, 5u);
  EXPECT_EQ(s[1].op, int(chorusMax));
  EXPECT_EQ(s[1].root, -1);
  EXPECT_EQ(s[1].state, FrState::Failed);
  EXPECT_EQ(s[1].result, chorusRemoteError);
  EXPECT_EQ(s[1].waitPeer, 0);
  EXPECT_FALSE(s[1].waitSend);
  EXPECT_GE(s[1].tEndNs, s[1].tStartNs);  // a failure is
  EXPECT_GT(s[1].tEndNs, 0);

  FlightRecorder off(0);
  EXPECT_EQ(off.begin(int(Coll::Barrier), chorusInt8, 0, -1, -1, 1), 0u);
  EXPECT_TRUE(off.snapshot().empty());
}

TEST(FlightRecorderComm, KnownCallsAreRecordedExactly) {
  std::vector<chorusComm_t> comms(2, nullptr);
  ASSERT_EQ(chorusCommInitAll(comms.data(), 2, nullptr), chorusSuccess)
      << chorusGetLastError(nullptr);
  onRanks(comms, [](int rank, chorusComm_t c) {
    const int peer = 1 - rank;
    std::vector<float> f(1024, 1.0f);
    std::vector<int32_t> i32(8, rank);
    std::vector<uint8_t> sb(16, 1), rb(16, 0);
    std::vector<double> d(3, 1.0), dout(3, 0.0);
    std::vector<int64_t> g(5, rank), gout(10, 0);
    ASSERT_EQ(chorusAllReduce(f.data(), f.data(), 1024, chorusFloat32, chorusSum, c, nullptr),
              chorusSuccess);
    ASSERT_EQ(chorusBroadcast(i32.data(), i32.data(), 8, chorusInt32, 1, c, nullptr),
              chorusSuccess);
    ASSERT_EQ(chorusGroupStart(), chorusSuccess);
    ASSERT_EQ(chorusSend(sb.data(), 16, chorusUint8, peer, c, nullptr), chorusSuccess);
    ASSERT_EQ(chorusRecv(rb.data(), 16, chorusUint8, peer, c, nullptr), chorusSuccess);
    ASSERT_EQ(chorusGroupEnd(), chorusSuccess);
    ASSERT_EQ(chorusReduce(d.data(), dout.data(), 3, chorusFloat64, chorusMax, 0, c, nullptr),
              chorusSuccess);
    chorusStream_t s = nullptr;
    ASSERT_EQ(chorusStreamCreate(&s), chorusSuccess);
    ASSERT_EQ(chorusAllGather(g.data(), gout.data(), 5, chorusInt64, c, s), chorusSuccess);
    ASSERT_EQ(chorusStreamSynchronize(s), chorusSuccess);
    ASSERT_EQ(chorusStreamDestroy(s), chorusSuccess);
    ASSERT_EQ(chorusBarrier(c, nullptr), chorusSuccess);
  });

  const std::vector<Expect> want = {
      {1, Coll::AllReduce, chorusFloat32, 1024, chorusSum, -1},
      {2, Coll::Broadcast, chorusInt32, 8, -1, 1},
      {1, Coll::Send, chorusUint8, 16, -1, -2},  // root -2: the peer
      {2, Coll::Recv, chorusUint8, 16, -1, -2},
      {3, Coll::Reduce, chorusFloat64, 3, chorusMax, 0},
      {4, Coll::AllGather, chorusInt64, 5, -1, -1},
      {5, Coll::Barrier, chorusInt8, 0, -1, -1},
  };
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    chorusComm* comm = comms[size_t(rank)];
    EXPECT_EQ(comm->opCount, 5u);
    EXPECT_EQ(comm->p2pCount, 2u);
    const std::vector<FrRecord> recs = comm->flight->snapshot();
    ASSERT_EQ(recs.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE("record " + std::to_string(i));
      const FrRecord& r = recs[i];
      const Expect& w = want[i];
      EXPECT_EQ(r.id, i + 1);
      EXPECT_EQ(r.seq, w.seq);
      EXPECT_EQ(r.coll, int(w.coll));
      EXPECT_EQ(r.type, int(w.type));
      EXPECT_EQ(r.count, w.count);
      EXPECT_EQ(r.op, w.op);
      EXPECT_EQ(r.root, w.root == -2 ? 1 - rank : w.root);
      EXPECT_EQ(r.state, FrState::Completed);
      EXPECT_EQ(r.result, chorusSuccess);
      EXPECT_GT(r.tEnqueueNs, 0);
      EXPECT_LE(r.tEnqueueNs, r.tStartNs);
      EXPECT_EQ(r.tEndNs, 0);  // a success is not timed
      // Blocking collectives start as they are recorded; the group's p2p and the stream's
      // all-gather were queued first.
      if (i != 2 && i != 3 && i != 5) {
        EXPECT_EQ(r.tEnqueueNs, r.tStartNs);
      }
      if (i > 0) {
        EXPECT_LE(recs[i - 1].tStartNs, r.tStartNs);
      }
    }
    // The small all-reduce is a direct LL exchange: its last wait was for data from the peer.
    EXPECT_EQ(recs[0].waitPeer, 1 - rank);
    EXPECT_FALSE(recs[0].waitSend);

    // The dump says the same in JSON.
    const std::string dir = ::testing::TempDir() + "chorus-fr-test-" + std::to_string(getpid());
    const std::string path = comm->flight->dump(comm, dir, "test");
    ASSERT_FALSE(path.empty());
    const std::string j = readFile(path);
    EXPECT_NE(j.find("\"reason\": \"test\""), std::string::npos) << j;
    EXPECT_NE(j.find("\"rank\": " + std::to_string(rank) + ","), std::string::npos) << j;
    EXPECT_NE(j.find("{\"id\": 1, \"seq\": 1, \"kind\": \"coll\", \"coll\": \"all_reduce\", "
                     "\"type\": \"float32\", \"count\": 1024, \"op\": \"sum\", \"root\": -1, "
                     "\"state\": \"completed\", \"result\": \"success\", \"wait_peer\": " +
                     std::to_string(1 - rank) + ", \"wait_for\": \"data\""),
              std::string::npos)
        << j;
    EXPECT_NE(j.find("\"seq\": 2, \"kind\": \"p2p\", \"coll\": \"recv\", \"type\": \"uint8\", "
                     "\"count\": 16, \"op\": \"-\", \"root\": " +
                     std::to_string(1 - rank)),
              std::string::npos)
        << j;
    EXPECT_NE(j.find("\"coll\": \"reduce\", \"type\": \"float64\", \"count\": 3, \"op\": \"max\", "
                     "\"root\": 0"),
              std::string::npos)
        << j;
    std::remove(path.c_str());
  }
  for (chorusComm_t c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

// Two ranks on threads with a 1 s deadline.
std::vector<chorusComm_t> shortDeadlineComms() {
  chorusUniqueId id;
  EXPECT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  std::vector<chorusComm_t> comms(2, nullptr);
  onRanks(comms, [&](int rank, chorusComm_t) {
    chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
    cfg.timeoutSeconds = 1;
    EXPECT_EQ(chorusCommInitRankConfig(&comms[size_t(rank)], 2, id, rank, &cfg), chorusSuccess)
        << chorusGetLastError(nullptr);
  });
  return comms;
}

TEST(FlightRecorderComm, TimeoutIsRecordedAndDumped) {
  const char* dir = std::getenv("CHORUS_FLIGHT_RECORDER_DIR");
  ASSERT_TRUE(dir && *dir) << "meson sets CHORUS_FLIGHT_RECORDER_DIR for this test";
  std::vector<chorusComm_t> comms = shortDeadlineComms();
  ASSERT_NE(comms[0], nullptr);
  ASSERT_NE(comms[1], nullptr);
  // Both ranks complete one all-reduce; then rank 0 calls a second one alone.
  onRanks(comms, [](int, chorusComm_t c) {
    float x = 1;
    EXPECT_EQ(chorusAllReduce(&x, &x, 1, chorusFloat32, chorusSum, c, nullptr), chorusSuccess);
  });
  float x = 1;
  EXPECT_EQ(chorusAllReduce(&x, &x, 1, chorusFloat32, chorusSum, comms[0], nullptr), chorusTimeout);
  const std::string err = chorusGetLastError(comms[0]);
  EXPECT_NE(err.find("all_reduce #2"), std::string::npos) << err;

  const std::vector<FrRecord> recs = comms[0]->flight->snapshot();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[1].seq, 2u);
  EXPECT_EQ(recs[1].state, FrState::Failed);
  EXPECT_EQ(recs[1].result, chorusTimeout);
  EXPECT_EQ(recs[1].waitPeer, 1);
  EXPECT_FALSE(recs[1].waitSend);
  EXPECT_GE(recs[1].tEndNs, recs[1].tStartNs);  // when it failed, at least 1 s after
  EXPECT_GE(recs[1].tEndNs - recs[1].tStartNs, 900000000);
  EXPECT_EQ(recs[0].state, FrState::Completed);
  EXPECT_EQ(recs[0].tEndNs, 0);

  char name[64];
  std::snprintf(name, sizeof name, "/chorus-fr-%016llx-rank0.json",
                static_cast<unsigned long long>(comms[0]->commHash));
  const std::string j = readFile(std::string(dir) + name);
  EXPECT_NE(j.find("\"reason\": \"timeout in all_reduce #2\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"seq\": 2, \"kind\": \"coll\", \"coll\": \"all_reduce\""), std::string::npos)
      << j;
  EXPECT_NE(j.find("\"state\": \"failed\", \"result\": \"timeout\", \"wait_peer\": 1, "
                   "\"wait_for\": \"data\""),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"last_error\": \"all_reduce #2 on rank 0 timed out"), std::string::npos) << j;
  std::remove((std::string(dir) + name).c_str());
  // Abort writes it again (rank 1 has no failure: its dump shows #1 completed, nothing after).
  EXPECT_EQ(chorusCommAbort(comms[0]), chorusSuccess);
  EXPECT_NE(readFile(std::string(dir) + name).find("\"reason\": \"abort\""), std::string::npos);
  std::remove((std::string(dir) + name).c_str());
  EXPECT_EQ(chorusCommDestroy(comms[1]), chorusSuccess);
  name[std::strlen(name) - 6] = '1';  // ...-rank1.json
  const std::string j1 = readFile(std::string(dir) + name);
  EXPECT_NE(j1.find("\"reason\": \"destroy\""), std::string::npos) << j1;
  EXPECT_EQ(j1.find("\"seq\": 2,"), std::string::npos) << j1;
  std::remove((std::string(dir) + name).c_str());
}

TEST(CheckMode, MismatchFailsOnEveryRankAndNamesBothCalls) {
  std::vector<chorusComm_t> comms(3, nullptr);
  ASSERT_EQ(chorusCommInitAll(comms.data(), 3, nullptr), chorusSuccess);
  for (chorusComm_t c : comms) c->checkMode = true;
  std::vector<chorusResult_t> res(3, chorusSuccess);
  std::vector<std::string> why(3);
  // #1 matches; #2: rank 2 calls broadcast where ranks 0 and 1 call all_reduce;
  // #3: rank 1 passes another count; #4 matches again (the comm is still usable).
  onRanks(comms, [&](int rank, chorusComm_t c) {
    std::vector<float> b(64, 1.0f);
    EXPECT_EQ(chorusAllReduce(b.data(), b.data(), 64, chorusFloat32, chorusSum, c, nullptr),
              chorusSuccess);
    EXPECT_EQ(b[0], 3.0f);
    chorusResult_t r =
        rank == 2 ? chorusBroadcast(b.data(), b.data(), 64, chorusFloat32, 0, c, nullptr)
                  : chorusAllReduce(b.data(), b.data(), 64, chorusFloat32, chorusSum, c, nullptr);
    res[size_t(rank)] = r;
    why[size_t(rank)] = chorusGetLastError(c);
    r = chorusAllReduce(b.data(), b.data(), rank == 1 ? 32 : 64, chorusFloat32, chorusSum, c,
                        nullptr);
    EXPECT_EQ(r, chorusInvalidUsage);
    const std::string w = chorusGetLastError(c);
    EXPECT_NE(w.find("rank 0 called all_reduce(count=64, float32, sum) as #3, rank 1 called "
                     "all_reduce(count=32, float32, sum) as #3"),
              std::string::npos)
        << w;
    std::fill(b.begin(), b.end(), 1.0f);
    EXPECT_EQ(chorusAllReduce(b.data(), b.data(), 64, chorusFloat32, chorusSum, c, nullptr),
              chorusSuccess)
        << chorusGetLastError(c);
    EXPECT_EQ(b[0], 3.0f);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(res[size_t(r)], chorusInvalidUsage) << "rank " << r;
    EXPECT_NE(why[size_t(r)].find("rank 0 called all_reduce(count=64, float32, sum) as #2, "
                                  "rank 2 called broadcast(count=64, float32, root=0) as #2"),
              std::string::npos)
        << "rank " << r << ": " << why[size_t(r)];
    const std::vector<FrRecord> recs = comms[size_t(r)]->flight->snapshot();
    ASSERT_EQ(recs.size(), 4u);
    EXPECT_EQ(recs[1].state, FrState::Failed);
    EXPECT_EQ(recs[1].result, chorusInvalidUsage);
  }
  for (chorusComm_t c : comms) EXPECT_EQ(chorusCommDestroy(c), chorusSuccess);
}

}  // namespace
