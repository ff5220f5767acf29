// Slurm compressed host lists, as SLURM_STEP_NODELIST carries them.
#include <gtest/gtest.h>

#include "src/comm/hostlist.h"

namespace {

std::vector<std::string> expand(const std::string& s) {
  std::vector<std::string> out;
  EXPECT_TRUE(chorus::expandHostList(s, &out)) << s;
  return out;
}

TEST(HostList, PlainNames) {
  EXPECT_EQ(expand("a"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(expand("login1,gpu-7"), (std::vector<std::string>{"login1", "gpu-7"}));
}

TEST(HostList, RangesKeepPadding) {
  EXPECT_EQ(expand("slnode[0-2]"), (std::vector<std::string>{"slnode0", "slnode1", "slnode2"}));
  EXPECT_EQ(expand("n[08-10]"), (std::vector<std::string>{"n08", "n09", "n10"}));
  EXPECT_EQ(expand("n[1,3-4],x"), (std::vector<std::string>{"n1", "n3", "n4", "x"}));
}

TEST(HostList, SeveralGroupsAndSuffixes) {
  EXPECT_EQ(expand("r[1-2]-n[1-2]"),
            (std::vector<std::string>{"r1-n1", "r1-n2", "r2-n1", "r2-n2"}));
  EXPECT_EQ(expand("chorus-h[0-1].lan"),
            (std::vector<std::string>{"chorus-h0.lan", "chorus-h1.lan"}));
}

TEST(HostList, MalformedIsRejected) {
  std::vector<std::string> out;
  for (const char* bad : {"", "n[1-2", "n1-2]", "n[]", "n[3-1]", "n[a-b]", "n[1-2]]", ","})
    EXPECT_FALSE(chorus::expandHostList(bad, &out)) << bad;
  EXPECT_FALSE(chorus::expandHostList("n[0-99999999]", &out, 1000));
}

}  // namespace
