// isa_param.h — run a test once per host ISA variant this CPU supports.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/host/host_isa.h"

namespace chorus_test {

class PerIsa : public ::testing::TestWithParam<chorus::kernels::Isa> {
 protected:
  void SetUp() override {
    ops_ = chorus::kernels::isaOps(GetParam());
    if (!ops_) GTEST_SKIP() << "this CPU cannot run the variant";
    if (forcedOff(GetParam()))
      GTEST_SKIP() << "CHORUS_KERNEL_ISA=" << std::getenv("CHORUS_KERNEL_ISA")
                   << " forces this variant off (as on a CPU without it)";
  }
  const chorus::kernels::IsaOps& ops() const { return *ops_; }

 private:
  // A process told to use a lower variant (CHORUS_KERNEL_ISA, as the library obeys it) runs
  // the higher ones' tests as a CPU without them would: skipped.
  static bool forcedOff(chorus::kernels::Isa isa) {
    const char* want = std::getenv("CHORUS_KERNEL_ISA");
    if (want == nullptr || *want == '\0') return false;
    for (int i = 0; i < static_cast<int>(isa); ++i) {
      const chorus::kernels::IsaOps* lower =
          chorus::kernels::isaOps(static_cast<chorus::kernels::Isa>(i));
      if (lower && std::strcmp(want, lower->name) == 0) return true;
    }
    return false;
  }
  const chorus::kernels::IsaOps* ops_ = nullptr;
};

inline std::string isaParamName(const ::testing::TestParamInfo<chorus::kernels::Isa>& info) {
  switch (info.param) {
    case chorus::kernels::Isa::Baseline: return "baseline";
    case chorus::kernels::Isa::Avx2: return "avx2";
    case chorus::kernels::Isa::Avx512: return "avx512";
  }
  return "unknown";
}

}  // namespace chorus_test

#define CHORUS_INSTANTIATE_PER_ISA(Suite)                                           \
  INSTANTIATE_TEST_SUITE_P(                                                         \
      Isa, Suite,                                                                   \
      ::testing::Values(chorus::kernels::Isa::Baseline, chorus::kernels::Isa::Avx2, \
                        chorus::kernels::Isa::Avx512),                              \
      chorus_test::isaParamName)
