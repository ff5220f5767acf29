// Which ranks one kernel runs (src/comm/hostid.h): the records, the check that a peer's
// process is one of this kernel's, and the count of ranks and CPUs per kernel.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "src/comm/hostid.h"

namespace {

using chorus::KernelRecord;

std::array<uint64_t, 16> cpus(std::initializer_list<int> list) {
  std::array<uint64_t, 16> m{};
  for (int c : list) m[static_cast<size_t>(c / 64)] |= uint64_t{1} << (c % 64);
  return m;
}

TEST(KernelRecord, OwnRecordIsReadable) {
  const KernelRecord r = chorus::ownKernelRecord();
  EXPECT_EQ(r.pid, getpid());
  EXPECT_GT(r.bootTime, 0);
  EXPECT_GT(r.startTicks, 0u);
  EXPECT_EQ(chorus::processStartTicks(getpid()), r.startTicks);
}

TEST(KernelRecord, ParentProcessIsThisKernel) {
  // A record another process of this kernel would send: the parent's pid and start tick,
  // with the boot id masked (as tools/cluster masks it per host).
  KernelRecord mine = chorus::ownKernelRecord();
  KernelRecord parent = mine;
  parent.pid = static_cast<int32_t>(getppid());
  parent.startTicks = chorus::processStartTicks(getppid());
  ASSERT_GT(parent.startTicks, 0u);
  parent.bootHash = mine.bootHash ^ 1;  // another boot id: only the process can tell
  EXPECT_TRUE(chorus::sameKernel(mine, parent));
  // Negative controls: the same pid with another start tick (a recycled or foreign pid),
  // another boot time, a pid that does not exist.
  KernelRecord wrong = parent;
  wrong.startTicks += 1;
  EXPECT_FALSE(chorus::sameKernel(mine, wrong));
  wrong = parent;
  wrong.bootTime += 1;
  EXPECT_FALSE(chorus::sameKernel(mine, wrong));
  wrong = parent;
  wrong.pid = 0x3ffffff0;  // above pid_max
  EXPECT_FALSE(chorus::sameKernel(mine, wrong));
  // A readable, equal boot id alone says it (containers that show the machine's).
  KernelRecord container{};
  container.bootHash = mine.bootHash;
  EXPECT_EQ(chorus::sameKernel(mine, container), mine.bootHash != 0);
}

TEST(KernelRecord, ExitedChildIsNotAProcessOfThisKernel) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  KernelRecord mine = chorus::ownKernelRecord();
  KernelRecord rec = mine;
  rec.bootHash = mine.bootHash ^ 1;
  rec.pid = static_cast<int32_t>(child);
  rec.startTicks = chorus::processStartTicks(child);  // a zombie until reaped: still there
  ASSERT_GT(rec.startTicks, 0u);
  EXPECT_TRUE(chorus::sameKernel(mine, rec));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(chorus::processStartTicks(child), 0u);
  EXPECT_FALSE(chorus::sameKernel(mine, rec));
}

TEST(KernelLeader, LowestRankOfTheSameKernel) {
  KernelRecord mine = chorus::ownKernelRecord();
  KernelRecord parent = mine;
  parent.bootHash = 0x1234;  // masked boot ids, all different
  parent.pid = static_cast<int32_t>(getppid());
  parent.startTicks = chorus::processStartTicks(getppid());
  KernelRecord foreign{};  // another machine: other boot id and boot time, no such pid here
  foreign.bootHash = 0x5678;
  foreign.bootTime = mine.bootTime - 1000;
  foreign.pid = static_cast<int32_t>(getpid());
  foreign.startTicks = mine.startTicks;
  mine.bootHash = 0x9abc;
  // Ranks 0 (foreign), 1 (parent), 2 (me).
  const std::vector<KernelRecord> all = {foreign, parent, mine};
  EXPECT_EQ(chorus::kernelLeader(all, 2), 1);
  // The foreign rank's record carries this very process's pid and start tick: its other
  // boot time keeps it out.
  EXPECT_FALSE(chorus::sameKernel(mine, foreign));
}

TEST(KernelShares, CountsRanksAndTheirCpus) {
  // Kernels 7 (ranks 0-3: four namespaced hosts of one machine, 2 CPUs between them, one
  // rank bound to CPU 0) and 9 (ranks 4-5, each bound to a CPU of its own).
  const std::vector<uint64_t> kernel = {7, 7, 7, 7, 9, 9};
  const std::vector<std::array<uint64_t, 16>> masks = {cpus({0}),    cpus({0, 1}), cpus({0, 1}),
                                                       cpus({0, 1}), cpus({2}),    cpus({130})};
  const auto s = chorus::kernelShares(kernel, masks);
  ASSERT_EQ(s.size(), 6u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(s[static_cast<size_t>(r)].ranks, 4);
    EXPECT_EQ(s[static_cast<size_t>(r)].cpus, 2);
    EXPECT_TRUE(s[static_cast<size_t>(r)].crowded());
  }
  for (int r = 4; r < 6; ++r) {
    EXPECT_EQ(s[static_cast<size_t>(r)].ranks, 2);
    EXPECT_EQ(s[static_cast<size_t>(r)].cpus, 2);
    EXPECT_FALSE(s[static_cast<size_t>(r)].crowded());
  }
  // Masks not known: not crowded, whatever the count.
  const auto unknown = chorus::kernelShares({1, 1, 1}, std::vector<std::array<uint64_t, 16>>(3));
  EXPECT_EQ(unknown[0].ranks, 3);
  EXPECT_EQ(unknown[0].cpus, 0);
  EXPECT_FALSE(unknown[0].crowded());
}

}  // namespace
