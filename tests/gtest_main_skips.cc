// gtest_main_skips.cc — gtest's main, but a run whose every test skipped exits 77.
//
// gtest exits 0 after GTEST_SKIP, so meson would report a test that checked nothing (no
// AVX-512 on this CPU, no IPv6 loopback, no GPU) as OK. Meson's 'gtest' protocol does not
// change that (1.0 reads the exit code only), but exit 77 is its SKIP. A run in which some
// tests passed and others skipped still exits 0: meson.build registers the tests that can
// skip as runs of their own (a --gtest_filter), so such a mix does not arise there.
// Linked from a static library: a test with its own main() keeps it.
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (rc == 0 && u.skipped_test_count() > 0 && u.successful_test_count() == 0) {
    std::printf("every test of this run skipped (%d): reported as SKIP (exit 77)\n",
                u.skipped_test_count());
    return 77;
  }
  if (u.skipped_test_count() > 0)
    std::printf("%d test(s) skipped, %d passed: see the [  SKIPPED ] lines\n",
                u.skipped_test_count(), u.successful_test_count());
  return rc;
}
