#include "passes/passes.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes {
namespace {

using testing::expand;

// Simplifies, then drops what the rules left unused, so the expected text shows only the result.
testing::PassResult simplify(std::string_view text) {
  auto graph = testing::parse(text);
  testing::PassResult result;
  result.changed = make_algebraic_simplification()->run(*graph);
  make_dead_code_elimination()->run(*graph);
  ir::verify(*graph);
  result.text = testing::body(*graph);
  return result;
}

TEST(AlgebraicSimplifyTest, MulByOneBothSides) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2, 3)) {
  %const1 = Constant f32() [1]
  %0 = mul(%para1_x, %const1) : (f32(2, 3), f32()) -> (f32(2, 3))
  %1 = mul(%const1, %0) : (f32(), f32(2, 3)) -> (f32(2, 3))
  Return(%1)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2, 3)) {
  Return(%para1_x)
}
)"));
}

TEST(AlgebraicSimplifyTest, MulByOneThatBroadcastsToABiggerShapeStays) {
  const char* text = R"(
subgraph @main(%para1_x: f32(3)) {
  %const1 = Constant f32(2, 3) [1, 1, 1, 1, 1, 1]
  %0 = mul(%para1_x, %const1) : (f32(3), f32(2, 3)) -> (f32(2, 3))
  Return(%0)
}
)";
  auto r = simplify(text);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.text, expand(text));
}

TEST(AlgebraicSimplifyTest, MulByAConstantNotAllOnesStays) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32(2) [1, 2]
  %0 = mul(%para1_x, %const1) : (f32(2), f32(2)) -> (f32(2))
  Return(%0)
}
)");
  EXPECT_FALSE(r.changed);
}

TEST(AlgebraicSimplifyTest, AddZeroIsExactOnlyForNegativeZeroOnFloats) {
  // x + (+0) would turn -0 into +0, so it stays; x + (-0) is an identity.
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32() [0]
  %const2 = Constant f32() [-0]
  %0 = add(%para1_x, %const1) : (f32(2), f32()) -> (f32(2))
  %1 = add(%const2, %0) : (f32(), f32(2)) -> (f32(2))
  Return(%1)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32() [0]
  %0 = add(%para1_x, %const1) : (f32(2), f32()) -> (f32(2))
  Return(%0)
}
)"));
}

TEST(AlgebraicSimplifyTest, AddZeroOnIntegers) {
  auto r = simplify(R"(
subgraph @main(%para1_x: i32(4)) {
  %const1 = Constant i32(4) [0, 0, 0, 0]
  %0 = add(%const1, %para1_x) : (i32(4), i32(4)) -> (i32(4))
  Return(%0)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_NE(r.text.find("Return(%para1_x)"), std::string::npos) << r.text;
}

TEST(AlgebraicSimplifyTest, SubZeroAndDivOne) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32() [0]
  %const2 = Constant f32() [1]
  %0 = sub(%para1_x, %const1) : (f32(2), f32()) -> (f32(2))
  %1 = div(%0, %const2) : (f32(2), f32()) -> (f32(2))
  Return(%1)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_NE(r.text.find("Return(%para1_x)"), std::string::npos) << r.text;
}

TEST(AlgebraicSimplifyTest, ZeroMinusXAndOneOverXStay) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2)) {
  %const1 = Constant f32() [0]
  %const2 = Constant f32() [1]
  %0 = sub(%const1, %para1_x) : (f32(), f32(2)) -> (f32(2))
  %1 = div(%const2, %0) : (f32(), f32(2)) -> (f32(2))
  Return(%1)
}
)");
  EXPECT_FALSE(r.changed);
}

TEST(AlgebraicSimplifyTest, XMinusXIsZeroForIntegers) {
  auto r = simplify(R"(
subgraph @main(%para1_x: i64(3)) {
  %0 = sub(%para1_x, %para1_x) : (i64(3), i64(3)) -> (i64(3))
  Return(%0)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: i64(3)) {
  %const1 = Constant i64(3) [0, 0, 0]
  Return(%const1)
}
)"));
}

TEST(AlgebraicSimplifyTest, XMinusXStaysForFloatsBecauseInfMinusInfIsNaN) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(3)) {
  %0 = sub(%para1_x, %para1_x) : (f32(3), f32(3)) -> (f32(3))
  Return(%0)
}
)");
  EXPECT_FALSE(r.changed);
}

TEST(AlgebraicSimplifyTest, DoubleNegation) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  %1 = neg(%0) : (f32(2)) -> (f32(2))
  %2 = neg(%1) : (f32(2)) -> (f32(2))
  Return(%2)
}
)");
  EXPECT_TRUE(r.changed);
  // -(-(-x)): the inner pair cancels; one negation remains.
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  Return(%0)
}
)"));
}

TEST(AlgebraicSimplifyTest, ReshapeOfReshapeAndReshapeToSameShape) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2, 3)) {
  %0 = reshape(%para1_x) {shape: [6]} : (f32(2, 3)) -> (f32(6))
  %1 = reshape(%0) {shape: [3, -1]} : (f32(6)) -> (f32(3, 2))
  %2 = reshape(%para1_x) {shape: [2, 3]} : (f32(2, 3)) -> (f32(2, 3))
  Return(%1, %2)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2, 3)) {
  %0 = reshape(%para1_x) {shape: [3, -1]} : (f32(2, 3)) -> (f32(3, 2))
  Return(%0, %para1_x)
}
)"));
}

TEST(AlgebraicSimplifyTest, TransposeOfTransposeComposesOrCancels) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2, 3, 4)) {
  %0 = transpose(%para1_x) {perm: [1, 2, 0]} : (f32(2, 3, 4)) -> (f32(3, 4, 2))
  %1 = transpose(%0) {perm: [1, 0, 2]} : (f32(3, 4, 2)) -> (f32(4, 3, 2))
  %2 = transpose(%para1_x) {perm: []} : (f32(2, 3, 4)) -> (f32(4, 3, 2))
  %3 = transpose(%2) {perm: []} : (f32(4, 3, 2)) -> (f32(2, 3, 4))
  %4 = transpose(%para1_x) {perm: [0, 1, 2]} : (f32(2, 3, 4)) -> (f32(2, 3, 4))
  Return(%1, %3, %4)
}
)");
  EXPECT_TRUE(r.changed);
  // x's axes (0, 1, 2) -> (1, 2, 0) -> (2, 1, 0): one transpose with perm [2, 1, 0].
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2, 3, 4)) {
  %0 = transpose(%para1_x) {perm: [2, 1, 0]} : (f32(2, 3, 4)) -> (f32(4, 3, 2))
  Return(%0, %para1_x, %para1_x)
}
)"));
}

TEST(AlgebraicSimplifyTest, CastToSameDtypeOnly) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = cast(%para1_x) {dtype: Float32} : (f32(2)) -> (f32(2))
  %1 = cast(%0) {dtype: Int32} : (f32(2)) -> (i32(2))
  Return(%1)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = cast(%para1_x) {dtype: Int32} : (f32(2)) -> (i32(2))
  Return(%0)
}
)"));
}

TEST(AlgebraicSimplifyTest, WorksInsideSubgraphs) {
  auto r = simplify(R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = call(%para1_x) {graph: "f"} : (f32(2)) -> (f32(2))
  Return(%0)
}

subgraph @f(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  %1 = neg(%0) : (f32(2)) -> (f32(2))
  Return(%1)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_NE(r.text.find("subgraph @f(%para1_x: <Tensor[Float32], (2)>) {\n  Return(%para1_x)\n}"),
            std::string::npos)
      << r.text;
}

}  // namespace
}  // namespace mf::passes
