#include "passes/passes.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes {
namespace {

using testing::expand;

TEST(DeadCodeTest, RemovesUnusedPureChainsAndConstantsButNotSideEffects) {
  auto r = testing::run_pass(*make_dead_code_elimination(), R"(
subgraph @main(%para1_x: f32(2), %para2_unused: f32(2)) {
  %const1 = Constant f32() [2]
  %0 = mul(%para1_x, %const1) : (f32(2), f32()) -> (f32(2))
  %1 = exp(%0) : (f32(2)) -> (f32(2))
  %2 = print(%para1_x) {prefix: "x"} : (f32(2)) -> (f32(2))
  %3 = neg(%para1_x) : (f32(2)) -> (f32(2))
  Return(%3)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2), %para2_unused: f32(2)) {
  %0 = print(%para1_x) {prefix: "x"} : (f32(2)) -> (f32(2))
  %1 = neg(%para1_x) : (f32(2)) -> (f32(2))
  Return(%1)
}
)"));
}

TEST(DeadCodeTest, NothingToRemove) {
  const char* text = R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  Return(%0)
}
)";
  auto r = testing::run_pass(*make_dead_code_elimination(), text);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.text, expand(text));
}

TEST(DeadCodeTest, RemovesUnusedSubgraphsAndPureUnusedCalls) {
  auto r = testing::run_pass(*make_dead_code_elimination(), R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = call(%para1_x) {graph: "pure"} : (f32(2)) -> (f32(2))
  %1 = call(%para1_x) {graph: "printing"} : (f32(2)) -> (f32(2))
  Return(%para1_x)
}

subgraph @pure(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  Return(%0)
}

subgraph @printing(%para1_x: f32(2)) {
  %0 = print(%para1_x) {prefix: ""} : (f32(2)) -> (f32(2))
  Return(%0)
}

subgraph @orphan(%para1_x: f32(2)) {
  Return(%para1_x)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = call(%para1_x) {graph: "printing"} : (f32(2)) -> (f32(2))
  Return(%para1_x)
}

subgraph @printing(%para1_x: f32(2)) {
  %0 = print(%para1_x) {prefix: ""} : (f32(2)) -> (f32(2))
  Return(%0)
}
)"));
}

}  // namespace
}  // namespace mf::passes
