#pragma once
// A test that needs what this machine or build may lack (AVX-512, a code generator, two cores)
// skips without it, except under CI=true: CI's machine is known to have it, so there a missing
// capability is a failure, never a test that vanished quietly.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace mf::testing {

inline bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0;
}

}  // namespace mf::testing

#define MF_SKIP_UNLESS(condition, why)                                             \
  do {                                                                             \
    if (!(condition)) {                                                            \
      if (::mf::testing::under_ci()) FAIL() << why << " (required under CI=true)"; \
      GTEST_SKIP() << why;                                                         \
    }                                                                              \
  } while (false)
