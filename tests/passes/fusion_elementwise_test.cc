// elementwise-fusion on IR text: chains become one fused node whose body holds the members;
// reductions only as tails below opt_level 3; several outputs from opt_level 2; flags honoured.

#include "tests/passes/fusion_test_util.h"

namespace mf::passes {
namespace {

using testing::expand;
using testing::fusion_options;

constexpr const char* kChain = R"(
subgraph @main(%para1_x: f32(4, 8), %para2_b: f32(8)) {
  %0 = mul(%para1_x, %para2_b) : (f32(4, 8), f32(8)) -> (f32(4, 8))
  %1 = exp(%0) : (f32(4, 8)) -> (f32(4, 8))
  %2 = add(%1, %para1_x) : (f32(4, 8), f32(4, 8)) -> (f32(4, 8))
  Return(%2)
}
)";

TEST(ElementwiseFusionTest, ChainBecomesOneFusedNode) {
  auto pass = make_elementwise_fusion(fusion_options(1));
  auto r = testing::run_pass(*pass, kChain);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(4, 8), %para2_b: f32(8)) {
  %0 = fused(%para1_x, %para2_b) {graph: "fused_0"} : (f32(4, 8), f32(8)) -> (f32(4, 8))
  Return(%0)
}

subgraph @fused_0(%para1_x0: f32(4, 8), %para2_x1: f32(8)) {
  %0 = mul(%para1_x0, %para2_x1) : (f32(4, 8), f32(8)) -> (f32(4, 8))
  %1 = exp(%0) : (f32(4, 8)) -> (f32(4, 8))
  %2 = add(%1, %para1_x0) : (f32(4, 8), f32(4, 8)) -> (f32(4, 8))
  Return(%2)
}
)")) << r.text;
}

constexpr const char* kReduceThenBroadcast = R"(
subgraph @main(%para1_x: f32(4, 8)) {
  %0 = exp(%para1_x) : (f32(4, 8)) -> (f32(4, 8))
  %1 = reduce_sum(%0) {axes: [1], keep_dims: true} : (f32(4, 8)) -> (f32(4, 1))
  %2 = div(%0, %1) : (f32(4, 8), f32(4, 1)) -> (f32(4, 8))
  Return(%2)
}
)";

TEST(ElementwiseFusionTest, ConstantsMoveIntoTheBodyAndLeaveTheGraph) {
  auto pass = make_elementwise_fusion(fusion_options(1));
  auto r = testing::run_pass(*pass, R"(
subgraph @main(%para1_x: f32(4)) {
  %const1 = Constant <Tensor[Float32], ()> [1.5]
  %0 = mul(%para1_x, %const1) : (f32(4), f32()) -> (f32(4))
  %1 = exp(%0) : (f32(4)) -> (f32(4))
  Return(%1)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(4)) {
  %0 = fused(%para1_x) {graph: "fused_0"} : (f32(4)) -> (f32(4))
  Return(%0)
}

subgraph @fused_0(%para1_x0: f32(4)) {
  %const1 = Constant <Tensor[Float32], ()> [1.5]
  %0 = mul(%para1_x0, %const1) : (f32(4), f32()) -> (f32(4))
  %1 = exp(%0) : (f32(4)) -> (f32(4))
  Return(%1)
}
)")) << r.text;
}

TEST(ElementwiseFusionTest, ReduceIsATailNotAProducerBelowLevel3) {
  auto pass = make_elementwise_fusion(fusion_options(2));
  auto r = testing::run_pass(*pass, kReduceThenBroadcast);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(4, 8)) {
  %0 = fused(%para1_x) {graph: "fused_0"} : (f32(4, 8)) -> (f32(4, 8), f32(4, 1))
  %1 = div(%0.0, %0.1) : (f32(4, 8), f32(4, 1)) -> (f32(4, 8))
  Return(%1)
}

subgraph @fused_0(%para1_x0: f32(4, 8)) {
  %0 = exp(%para1_x0) : (f32(4, 8)) -> (f32(4, 8))
  %1 = reduce_sum(%0) {axes: [1], keep_dims: true} : (f32(4, 8)) -> (f32(4, 1))
  Return(%0, %1)
}
)")) << r.text;
}

TEST(ElementwiseFusionTest, SeveralOutputsOnlyFromLevel2) {
  const char* text = R"(
subgraph @main(%para1_x: f32(4, 8)) {
  %0 = exp(%para1_x) : (f32(4, 8)) -> (f32(4, 8))
  %1 = neg(%0) : (f32(4, 8)) -> (f32(4, 8))
  %2 = abs(%0) : (f32(4, 8)) -> (f32(4, 8))
  Return(%1, %2)
}
)";
  auto level1 = testing::run_pass(*make_elementwise_fusion(fusion_options(1)), text);
  EXPECT_FALSE(level1.changed) << level1.text;
  auto level2 = testing::run_pass(*make_elementwise_fusion(fusion_options(2)), text);
  EXPECT_TRUE(level2.changed);
  EXPECT_NE(level2.text.find("fused("), std::string::npos) << level2.text;
  EXPECT_EQ(level2.text.find("= exp("), level2.text.rfind("= exp(")) << level2.text;
}

TEST(ElementwiseFusionTest, RecomputeDuplicatesACheapProducer) {
  const char* text = R"(
subgraph @main(%para1_x: f32(4, 8)) {
  %0 = exp(%para1_x) : (f32(4, 8)) -> (f32(4, 8))
  %1 = neg(%0) : (f32(4, 8)) -> (f32(4, 8))
  %2 = abs(%0) : (f32(4, 8)) -> (f32(4, 8))
  Return(%1, %2)
}
)";
  CompileOptions options = fusion_options(1);
  options.fusion.recompute = true;
  auto r = testing::run_pass(*make_elementwise_fusion(options), text);
  EXPECT_TRUE(r.changed);
  // Two kernels, each computing exp itself: exp's result never goes to memory.
  size_t exps = 0;
  for (size_t at = r.text.find("exp("); at != std::string::npos; at = r.text.find("exp(", at + 1)) {
    ++exps;
  }
  EXPECT_EQ(exps, 2u) << r.text;
  const std::string main = r.text.substr(0, r.text.find("subgraph @fused"));
  EXPECT_EQ(main.find("exp("), std::string::npos) << r.text;
}

TEST(ElementwiseFusionTest, DisabledOpsAndTheSizeLimitSplitKernels) {
  CompileOptions options = fusion_options(1);
  options.fusion.disable_cluster_ops = {"exp"};
  auto r = testing::run_pass(*make_elementwise_fusion(options), kChain);
  EXPECT_FALSE(r.changed) << r.text;  // exp cut the chain into single ops: nothing to fuse
  options = fusion_options(1);
  options.fusion.composite_op_limit_size = 2;
  r = testing::run_pass(*make_elementwise_fusion(options), kChain);
  EXPECT_TRUE(r.changed);
  EXPECT_NE(r.text.find("mul("), r.text.find("fused(")) << r.text;
}

TEST(ElementwiseFusionTest, NeverAcrossOpaqueViewOrCast) {
  const char* text = R"(
subgraph @main(%para1_x: f32(4, 8), %para2_w: f32(8, 8)) {
  %0 = exp(%para1_x) : (f32(4, 8)) -> (f32(4, 8))
  %1 = matmul(%0, %para2_w) {transpose_a: false, transpose_b: false} : (f32(4, 8), f32(8, 8)) -> (f32(4, 8))
  %2 = neg(%1) : (f32(4, 8)) -> (f32(4, 8))
  %3 = reshape(%2) {shape: [32]} : (f32(4, 8)) -> (f32(32))
  %4 = abs(%3) : (f32(32)) -> (f32(32))
  Return(%4)
}
)";
  auto r = testing::run_pass(*make_elementwise_fusion(fusion_options(2)), text);
  EXPECT_FALSE(r.changed) << r.text;
  EXPECT_EQ(r.text, expand(text));
}

TEST(ElementwiseFusionTest, UnknownClusterOpIsRejectedWithTheFlagNamed) {
  CompileOptions options = fusion_options(1);
  options.fusion.disable_cluster_ops = {"mull"};
  try {
    make_elementwise_fusion(options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--disable_cluster_ops=mull names no registered op"),
              std::string::npos)
        << e.what();
  }
  options.fusion.disable_cluster_ops = {"matmul"};
  EXPECT_THROW(make_elementwise_fusion(options), Error);
}

}  // namespace
}  // namespace mf::passes
