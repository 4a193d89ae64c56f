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

namespace mf::passes {
namespace {

// Large constants are grouped by their first bytes, then compared whole: two that agree for the
// first 4 KiB and differ in their last element stay apart; an exact copy merges.
TEST(CseTest, ConstantsEqualInTheirFirstBytesButNotAfterStayApart) {
  ir::Graph graph("main");
  ir::Value x = graph.add_parameter("x", {ir::DType::kFloat32, {2048}});
  std::vector<float> values(2048, 1.f);
  ir::Value a = graph.add_constant<float>({2048}, values);
  values.back() = 2.f;
  ir::Value b = graph.add_constant<float>({2048}, values);
  ir::Value c = graph.add_constant<float>({2048}, values);  // a copy of b
  graph.add_output(graph.add_node("mul", {x, a})->output());
  graph.add_output(graph.add_node("mul", {x, b})->output());
  graph.add_output(graph.add_node("mul", {x, c})->output());
  EXPECT_TRUE(make_cse()->run(graph));
  ir::verify(graph);
  // b and c merged (and so did their products); a kept its own.
  EXPECT_EQ(graph.outputs()[1], graph.outputs()[2]);
  EXPECT_NE(graph.outputs()[0], graph.outputs()[1]);
  EXPECT_EQ(graph.outputs()[0].node()->input(1).constant(), a.constant());
}

}  // namespace
}  // namespace mf::passes
