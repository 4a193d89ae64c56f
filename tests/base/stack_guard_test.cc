// The stack check a recursion driven by input makes at each level (base/stack_guard.h).

#include "base/stack_guard.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/run_on_stack.h"

namespace mf {
namespace {

// What the checks say on a thread with a stack of `bytes`.
struct Seen {
  size_t left = 0;
  bool enough = false;
  std::string message;
};

Seen on_thread_with_stack(size_t bytes) {
  Seen seen;
  testing::run_on_stack(bytes, [&] {
    seen.left = stack_bytes_left();
    seen.enough = enough_stack_left();
    seen.message = stack_used_up_message();
  });
  return seen;
}

TEST(StackGuard, MeasuresTheCallingThreadsStack) {
  const Seen big = on_thread_with_stack(size_t{16} << 20);
  EXPECT_GT(big.left, size_t{15} << 20);
  EXPECT_LE(big.left, size_t{16} << 20);
  EXPECT_TRUE(big.enough);
  // Less than the reserve to begin with: refused at the first level.
  const Seen small = on_thread_with_stack(size_t{512} << 10);
  EXPECT_LT(small.left, size_t{512} << 10);
  EXPECT_FALSE(small.enough);
  EXPECT_NE(small.message.find("KiB left, 1024 KiB kept for the kernels"), std::string::npos)
      << small.message;
}

// Each level of a recursion takes stack: what is left shrinks as it goes deeper.
size_t left_at_depth(int depth) {
  volatile char frame[4096];
  frame[0] = 0;
  return depth == 0 ? stack_bytes_left() : left_at_depth(depth - 1) + frame[0];
}

TEST(StackGuard, ShrinksWithDepth) {
  EXPECT_LT(left_at_depth(100), left_at_depth(0));
  EXPECT_GE(left_at_depth(0) - left_at_depth(100), size_t{100} * 4096);
}

}  // namespace
}  // namespace mf
