#pragma once
// Engine tests start from the default context and leave no pending asynchronous error behind.

#include <gtest/gtest.h>

#include "context/context.h"
#include "context/parallel_context.h"
#include "engine/dispatch.h"

namespace mf::testing {

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_all(); }
  void TearDown() override {
    try {
      engine::sync();
    } catch (...) {
    }
    reset_all();
  }
  static void reset_all() {
    context::reset();
    context::reset_auto_parallel_context();
  }
};

}  // namespace mf::testing
