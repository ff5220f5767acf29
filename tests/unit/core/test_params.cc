// The parameter registry is the only list of tunables; docs/ENV.md must document every one
// of them with its default, and integers must parse with K/M/G suffixes.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "src/core/params.h"

#ifndef CHORUS_SOURCE_ROOT
#error "CHORUS_SOURCE_ROOT must point at the source tree"
#endif

namespace {

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Params, EveryParamIsDocumentedWithItsDefault) {
  const std::string doc = readFile(std::string(CHORUS_SOURCE_ROOT) + "/docs/ENV.md");
  ASSERT_FALSE(doc.empty()) << "docs/ENV.md is missing";
  int n = 0;
  const chorus::ParamInfo* table = chorus::paramTable(&n);
  ASSERT_GT(n, 0);
  for (int i = 0; i < n; ++i) {
    // Each parameter has a table row: | `NAME` | `default` | ...
    std::string row = std::string("| `") + table[i].name + "` | `" + table[i].defaultValue + "` |";
    std::string emptyRow = std::string("| `") + table[i].name + "` | (empty) |";
    EXPECT_TRUE(doc.find(row) != std::string::npos ||
                (table[i].defaultValue[0] == '\0' && doc.find(emptyRow) != std::string::npos))
        << "docs/ENV.md lacks the row for " << table[i].name << " with default '"
        << table[i].defaultValue << "'";
  }
}

TEST(Params, DefaultsParse) {
  // Environment is clean in the test: the defaults apply.
  EXPECT_EQ(chorus::paramInt(chorus::Param::ChunkSize), 512 << 10);
  EXPECT_EQ(chorus::paramInt(chorus::Param::BuffSize), 4 << 20);
  EXPECT_EQ(chorus::paramInt(chorus::Param::TimeoutS), 300);
  EXPECT_EQ(chorus::paramString(chorus::Param::Algo), "");
}

}  // namespace
