#pragma once
// A fixture that starts and ends every context test from the defaults of all three contexts.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/error.h"
#include "context/context.h"
#include "context/parallel_context.h"

namespace mf::context {

class ContextTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_all(); }
  void TearDown() override { reset_all(); }

  static void reset_all() {
    reset();
    reset_auto_parallel_context();
    reset_ps_context();
  }
};

// Runs `body`, expects an mf::Error of `kind`, and returns its message.
template <typename Body>
std::string error_message(Body&& body, ErrorKind kind = ErrorKind::kInvalidArgument) {
  try {
    body();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an mf::Error";
  return "";
}

}  // namespace mf::context
