#include "passes/passes.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes {
namespace {

using testing::expand;

TEST(CseTest, MergesSameOpSameInputsAndSwappedCommutativeInputs) {
  auto r = testing::run_pass(*make_cse(), R"(
subgraph @main(%para1_x: f32(2), %para2_y: f32(2)) {
  %0 = add(%para1_x, %para2_y) : (f32(2), f32(2)) -> (f32(2))
  %1 = add(%para2_y, %para1_x) : (f32(2), f32(2)) -> (f32(2))
  %2 = exp(%0) : (f32(2)) -> (f32(2))
  %3 = exp(%1) : (f32(2)) -> (f32(2))
  %4 = mul(%2, %3) : (f32(2), f32(2)) -> (f32(2))
  Return(%4)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2), %para2_y: f32(2)) {
  %0 = add(%para1_x, %para2_y) : (f32(2), f32(2)) -> (f32(2))
  %1 = exp(%0) : (f32(2)) -> (f32(2))
  %2 = mul(%1, %1) : (f32(2), f32(2)) -> (f32(2))
  Return(%2)
}
)"));
}

TEST(CseTest, KeepsNonCommutativeSwapsAndDifferentAttributes) {
  const char* text = R"(
subgraph @main(%para1_x: f32(2), %para2_y: f32(2)) {
  %0 = sub(%para1_x, %para2_y) : (f32(2), f32(2)) -> (f32(2))
  %1 = sub(%para2_y, %para1_x) : (f32(2), f32(2)) -> (f32(2))
  %2 = reshape(%0) {shape: [1, 2]} : (f32(2)) -> (f32(1, 2))
  %3 = reshape(%0) {shape: [2, 1]} : (f32(2)) -> (f32(2, 1))
  Return(%1, %2, %3)
}
)";
  auto r = testing::run_pass(*make_cse(), text);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.text, expand(text));
}

TEST(CseTest, NeverMergesSideEffects) {
  const char* text = R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = print(%para1_x) {prefix: ""} : (f32(2)) -> (f32(2))
  %1 = print(%para1_x) {prefix: ""} : (f32(2)) -> (f32(2))
  Return(%0, %1)
}
)";
  auto r = testing::run_pass(*make_cse(), text);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.text, expand(text));
}

TEST(CseTest, MergesEqualConstantsSoExpressionsOverThemMerge) {
  auto graph = testing::parse(R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32() [2]
  %const2 = Constant f32() [2]
  %0 = mul(%para1_x, %const1) : (f32(2), f32()) -> (f32(2))
  %1 = mul(%para1_x, %const2) : (f32(2), f32()) -> (f32(2))
  Return(%0, %1)
}
)");
  EXPECT_TRUE(make_cse()->run(*graph));
  EXPECT_FALSE(make_cse()->run(*graph));  // nothing left to merge
  make_dead_code_elimination()->run(*graph);
  ir::verify(*graph);
  EXPECT_EQ(testing::body(*graph), expand(R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32() [2]
  %0 = mul(%para1_x, %const1) : (f32(2), f32()) -> (f32(2))
  Return(%0, %0)
}
)"));
}

}  // namespace
}  // namespace mf::passes
