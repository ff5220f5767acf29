// isa_param.h — run a test once per host ISA variant this CPU supports.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kernels/host/host_isa.h"

namespace chorus_test {

class PerIsa : public ::testing::TestWithParam<chorus::kernels::Isa> {
 protected:
  void SetUp() override {
    ops_ = chorus::kernels::isaOps(GetParam());
    if (!ops_) GTEST_SKIP() << "this CPU cannot run the variant";
  }
  const chorus::kernels::IsaOps& ops() const { return *ops_; }

 private:
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
