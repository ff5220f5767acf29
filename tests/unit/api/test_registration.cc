// test_registration.cc — chorusMemAlloc/Free and chorusCommRegister/Deregister: bad input
// gets a clear result and message, nothing appears in /dev/shm, and collectives on
// registered buffers (two thread ranks of one process) match a reference.
// The multi-process checks are in tests/integration (coll_proc_*_registered, single copy,
// and kill_rank_registered_np2).
#include <gtest/gtest.h>

#include <chorus.h>
#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
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

// The result is `want` and chorusGetLastError(comm) names `word`.
::testing::AssertionResult failsWith(chorusResult_t got, chorusResult_t want, chorusComm_t comm,
                                     const char* word) {
  if (got != want)
    return ::testing::AssertionFailure() << "returned " << chorusGetErrorString(got)
                                         << ", expected " << chorusGetErrorString(want);
  const std::string le = lower(chorusGetLastError(comm));
  if (le.find(lower(word)) == std::string::npos)
    return ::testing::AssertionFailure()
           << "last error \"" << chorusGetLastError(comm) << "\" does not name '" << word << "'";
  return ::testing::AssertionSuccess();
}

std::vector<std::string> devShm() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(MemAlloc, BadInput) {
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_TRUE(failsWith(chorusMemAlloc(nullptr, 64), chorusInvalidArgument, nullptr, "ptr"));
  EXPECT_TRUE(failsWith(chorusMemAlloc(&p, 0), chorusInvalidArgument, nullptr, "size"));
  EXPECT_EQ(p, nullptr) << "a failed chorusMemAlloc leaves *ptr NULL";
  EXPECT_TRUE(failsWith(chorusMemAlloc(&p, SIZE_MAX), chorusInvalidArgument, nullptr, "size"));
  EXPECT_TRUE(failsWith(chorusMemFree(nullptr), chorusInvalidArgument, nullptr, "null"));
  int local = 0;
  EXPECT_TRUE(failsWith(chorusMemFree(&local), chorusInvalidArgument, nullptr, "not returned by"));
}

TEST(MemAlloc, AllocFreeAndDoubleFree) {
  const std::vector<std::string> before = devShm();
  void* p = nullptr;
  ASSERT_EQ(chorusMemAlloc(&p, 10000), chorusSuccess) << chorusGetLastError(nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  std::memset(p, 0x5a, 10000);  // writable, all of it
  EXPECT_EQ(static_cast<unsigned char*>(p)[9999], 0x5a);
  EXPECT_EQ(devShm(), before) << "chorusMemAlloc must not leave names in /dev/shm";
  // Inside the region is not the region's start.
  EXPECT_TRUE(failsWith(chorusMemFree(static_cast<char*>(p) + 64), chorusInvalidArgument, nullptr,
                        "not returned by"));
  EXPECT_EQ(chorusMemFree(p), chorusSuccess);
  EXPECT_TRUE(failsWith(chorusMemFree(p), chorusInvalidArgument, nullptr, "freed already"));
  EXPECT_EQ(devShm(), before);
}

class Registration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(chorusCommInitAll(&a_, 1, nullptr), chorusSuccess) << chorusGetLastError(nullptr);
    ASSERT_EQ(chorusCommInitAll(&b_, 1, nullptr), chorusSuccess) << chorusGetLastError(nullptr);
  }
  void TearDown() override {
    EXPECT_EQ(chorusCommDestroy(a_), chorusSuccess);
    EXPECT_EQ(chorusCommDestroy(b_), chorusSuccess);
  }
  chorusComm_t a_ = nullptr, b_ = nullptr;
};

TEST_F(Registration, BadInput) {
  void* h = reinterpret_cast<void*>(0x1);
  char buf[256];
  EXPECT_TRUE(failsWith(chorusCommRegister(nullptr, buf, sizeof buf, &h), chorusInvalidArgument,
                        nullptr, "comm"));
  EXPECT_TRUE(
      failsWith(chorusCommRegister(a_, nullptr, 64, &h), chorusInvalidArgument, a_, "buff"));
  EXPECT_EQ(h, nullptr) << "a failed chorusCommRegister leaves *handle NULL";
  EXPECT_TRUE(failsWith(chorusCommRegister(a_, buf, 0, &h), chorusInvalidArgument, a_, "size"));
  EXPECT_TRUE(failsWith(chorusCommRegister(a_, buf, sizeof buf, nullptr), chorusInvalidArgument, a_,
                        "handle"));
  EXPECT_TRUE(failsWith(chorusCommRegister(a_, reinterpret_cast<void*>(UINTPTR_MAX - 8), 64, &h),
                        chorusInvalidArgument, a_, "wraps"));
  EXPECT_TRUE(
      failsWith(chorusCommDeregister(a_, nullptr), chorusInvalidArgument, a_, "handle is null"));
  EXPECT_TRUE(failsWith(chorusCommDeregister(nullptr, h), chorusInvalidArgument, nullptr, "comm"));
  // A made-up handle is never dereferenced, only not found.
  EXPECT_TRUE(failsWith(chorusCommDeregister(a_, reinterpret_cast<void*>(0x12345678)),
                        chorusInvalidArgument, a_, "not registered"));
}

TEST_F(Registration, DoubleDeregisterAndOtherCommunicator) {
  void* mem = nullptr;
  ASSERT_EQ(chorusMemAlloc(&mem, 1 << 16), chorusSuccess);
  std::vector<char> heap(4096);
  void *h1 = nullptr, *h2 = nullptr, *h3 = nullptr;
  ASSERT_EQ(chorusCommRegister(a_, mem, 1 << 16, &h1), chorusSuccess) << chorusGetLastError(a_);
  ASSERT_EQ(chorusCommRegister(b_, mem, 1 << 16, &h2), chorusSuccess) << chorusGetLastError(b_);
  ASSERT_EQ(chorusCommRegister(a_, heap.data(), heap.size(), &h3), chorusSuccess);  // any memory
  EXPECT_NE(h1, h2);
  // Handles belong to the communicator that made them.
  EXPECT_TRUE(
      failsWith(chorusCommDeregister(b_, h1), chorusInvalidArgument, b_, "another communicator"));
  EXPECT_TRUE(
      failsWith(chorusCommDeregister(a_, h2), chorusInvalidArgument, a_, "another communicator"));
  EXPECT_EQ(chorusCommDeregister(a_, h1), chorusSuccess) << chorusGetLastError(a_);
  EXPECT_TRUE(
      failsWith(chorusCommDeregister(a_, h1), chorusInvalidArgument, a_, "deregistered already"));
  EXPECT_EQ(chorusCommDeregister(b_, h2), chorusSuccess) << chorusGetLastError(b_);
  EXPECT_EQ(chorusCommDeregister(a_, h3), chorusSuccess);
  EXPECT_EQ(chorusMemFree(mem), chorusSuccess);
  // One rank: a collective on registered memory is a local copy, and still right.
  ASSERT_EQ(chorusMemAlloc(&mem, 4096), chorusSuccess);
  ASSERT_EQ(chorusCommRegister(a_, mem, 4096, &h1), chorusSuccess);
  float in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_EQ(chorusAllGather(in, mem, 8, chorusFloat32, a_, nullptr), chorusSuccess);
  EXPECT_EQ(std::memcmp(mem, in, sizeof in), 0);
  EXPECT_EQ(chorusCommDeregister(a_, h1), chorusSuccess);
  EXPECT_EQ(chorusMemFree(mem), chorusSuccess);
}

// Two thread ranks; every buffer is chorusMemAlloc memory registered on the ranks'
// communicator (kBoth), on another communicator only (kForeign: plain memory to this one),
// or on rank 0 only (kRank0: each call takes the mapped path or falls back to the FIFO
// depending on whose buffer must be reached). The test runs with CHORUS_CMA_DISABLE=1, so
// plain memory is never reached directly. Sizes cross the single-copy threshold (8 KiB).
enum Mode { kBoth, kForeign, kRank0 };
const char* modeName(Mode m) {
  return m == kBoth ? "registered" : m == kForeign ? "registered on another comm" : "rank 0 only";
}

void runRank(chorusComm_t comm, chorusComm_t other, int rank, Mode mode, int* wrong) {
  const bool foreign = mode == kForeign;
  const bool reg = mode != kRank0 || rank == 0;
  const int n = 2;
  for (size_t count : {size_t(3), size_t(5000), size_t(300001)}) {
    void *in = nullptr, *out = nullptr, *hin = nullptr, *hout = nullptr;
    const size_t inBytes = count * n * sizeof(int32_t), outBytes = count * n * sizeof(int32_t);
    if (chorusMemAlloc(&in, inBytes) != chorusSuccess ||
        chorusMemAlloc(&out, outBytes) != chorusSuccess ||
        (reg && chorusCommRegister(foreign ? other : comm, in, inBytes, &hin) != chorusSuccess) ||
        (reg &&
         chorusCommRegister(foreign ? other : comm, out, outBytes, &hout) != chorusSuccess)) {
      ++*wrong;
      return;
    }
    int32_t* a = static_cast<int32_t*>(in);
    int32_t* b = static_cast<int32_t*>(out);
    auto val = [](int r, size_t block, size_t i) {
      return static_cast<int32_t>(r * 1000003 + block * 7919 + i);
    };
    // All-gather: block r of the output is rank r's first `count` inputs.
    for (size_t i = 0; i < count; ++i) a[i] = val(rank, 0, i);
    if (chorusAllGather(in, out, count, chorusInt32, comm, nullptr) != chorusSuccess) ++*wrong;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) *wrong += b[r * count + i] != val(r, 0, i);
    // All-to-all: block j of the input goes to rank j.
    for (int j = 0; j < n; ++j)
      for (size_t i = 0; i < count; ++i) a[j * count + i] = val(rank, j, i);
    if (chorusAllToAll(in, out, count, chorusInt32, comm, nullptr) != chorusSuccess) ++*wrong;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) *wrong += b[r * count + i] != val(r, rank, i);
    // Broadcast from rank 1, in place.
    for (size_t i = 0; i < count; ++i) b[i] = rank == 1 ? val(9, 1, i) : -1;
    if (chorusBroadcast(out, out, count, chorusInt32, 1, comm, nullptr) != chorusSuccess) ++*wrong;
    for (size_t i = 0; i < count; ++i) *wrong += b[i] != val(9, 1, i);
    for (int root = 0; root < n; ++root) {
      // Gather: block r of the root's output is rank r's input.
      for (size_t i = 0; i < count; ++i) a[i] = val(rank, 5, i);
      if (chorusGather(in, out, count, chorusInt32, root, comm, nullptr) != chorusSuccess) ++*wrong;
      if (rank == root)
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) *wrong += b[r * count + i] != val(r, 5, i);
      // Scatter: rank r gets block r of the root's input.
      for (int j = 0; j < n; ++j)
        for (size_t i = 0; i < count; ++i) a[j * count + i] = val(rank, 6 + j, i);
      if (chorusScatter(in, out, count, chorusInt32, root, comm, nullptr) != chorusSuccess)
        ++*wrong;
      for (size_t i = 0; i < count; ++i) *wrong += b[i] != val(root, 6 + rank, i);
    }
    if (reg) chorusCommDeregister(foreign ? other : comm, hin);
    if (reg) chorusCommDeregister(foreign ? other : comm, hout);
    chorusMemFree(in);
    chorusMemFree(out);
  }
}

TEST(RegisteredCollectives, TwoThreadRanksMatchReference) {
  chorusComm_t c[2], d[2];
  ASSERT_EQ(chorusCommInitAll(c, 2, nullptr), chorusSuccess) << chorusGetLastError(nullptr);
  ASSERT_EQ(chorusCommInitAll(d, 2, nullptr), chorusSuccess) << chorusGetLastError(nullptr);
  for (Mode mode : {kBoth, kForeign, kRank0}) {
    int wrong[2] = {0, 0};
    std::thread t0(runRank, c[0], d[0], 0, mode, &wrong[0]);
    std::thread t1(runRank, c[1], d[1], 1, mode, &wrong[1]);
    t0.join();
    t1.join();
    EXPECT_EQ(wrong[0], 0) << modeName(mode);
    EXPECT_EQ(wrong[1], 0) << modeName(mode);
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(chorusCommDestroy(c[r]), chorusSuccess);
    EXPECT_EQ(chorusCommDestroy(d[r]), chorusSuccess);
  }
}

}  // namespace
