#include "passes/passes.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes {
namespace {

using testing::expand;

TEST(ConstantFoldingTest, FoldsAChainWithTheOpsOwnKernels) {
  auto graph = testing::parse(R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32(2) [1, 2]
  %const2 = Constant f32() [3]
  %0 = mul(%const1, %const2) : (f32(2), f32()) -> (f32(2))
  %1 = neg(%0) : (f32(2)) -> (f32(2))
  %2 = add(%para1_x, %1) : (f32(2), f32(2)) -> (f32(2))
  Return(%2)
}
)");
  EXPECT_TRUE(make_constant_folding()->run(*graph));
  make_dead_code_elimination()->run(*graph);
  ir::verify(*graph);
  EXPECT_EQ(testing::body(*graph), expand(R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32(2) [-3, -6]
  %0 = add(%para1_x, %const1) : (f32(2), f32(2)) -> (f32(2))
  Return(%0)
}
)"));
}

TEST(ConstantFoldingTest, FoldsCastsAndComparisonsToTheirDtypes) {
  auto r = testing::run_pass(*make_constant_folding(), R"(
subgraph @main() {
  %const1 = Constant f32(3) [1.5, -2, 0]
  %0 = cast(%const1) {dtype: Int32} : (f32(3)) -> (i32(3))
  %1 = greater(%const1, %const1) : (f32(3), f32(3)) -> (bool(3))
  Return(%0, %1)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_NE(r.text.find("Constant <Tensor[Int32], (3)> [1, -2, 0]"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("Constant <Tensor[Bool], (3)> [false, false, false]"), std::string::npos)
      << r.text;
  EXPECT_NE(r.text.find("Return(%const2, %const3)"), std::string::npos) << r.text;
}

TEST(ConstantFoldingTest, LeavesParametersSideEffectsAndUnusedNodes) {
  const char* text = R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32(2) [1, 2]
  %0 = add(%para1_x, %const1) : (f32(2), f32(2)) -> (f32(2))
  %1 = print(%const1) {prefix: "c"} : (f32(2)) -> (f32(2))
  %2 = neg(%const1) : (f32(2)) -> (f32(2))
  Return(%0)
}
)";
  auto r = testing::run_pass(*make_constant_folding(), text);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.text, expand(text));
}

TEST(ConstantFoldingTest, RespectsTheSizeCap) {
  const char* text = R"(
subgraph @main() {
  %const1 = Constant f32() [2]
  %0 = broadcast_to(%const1) {shape: [4, 4]} : (f32()) -> (f32(4, 4))
  Return(%0)
}
)";
  auto capped = testing::run_pass(*make_constant_folding(/*max_elements=*/15), text);
  EXPECT_FALSE(capped.changed);
  auto folded = testing::run_pass(*make_constant_folding(/*max_elements=*/16), text);
  EXPECT_TRUE(folded.changed);
  EXPECT_NE(folded.text.find("Return(%const2)"), std::string::npos) << folded.text;
}

}  // namespace
}  // namespace mf::passes
