// stitch-fusion on IR text: reduce -> broadcast -> elementwise over the same rows becomes one
// kernel; a reduction over other rows, or not broadcast back, does not stitch.

#include "tests/passes/fusion_test_util.h"

namespace mf::passes {
namespace {

using testing::expand;
using testing::fusion_options;

TEST(StitchFusionTest, SoftmaxRowsBecomeOneKernel) {
  const char* text = R"(
subgraph @main(%para1_x: f32(4, 16)) {
  %0 = reduce_max(%para1_x) {axes: [1], keep_dims: true} : (f32(4, 16)) -> (f32(4, 1))
  %1 = sub(%para1_x, %0) : (f32(4, 16), f32(4, 1)) -> (f32(4, 16))
  %2 = exp(%1) : (f32(4, 16)) -> (f32(4, 16))
  %3 = reduce_sum(%2) {axes: [1], keep_dims: true} : (f32(4, 16)) -> (f32(4, 1))
  %4 = div(%2, %3) : (f32(4, 16), f32(4, 1)) -> (f32(4, 16))
  Return(%4)
}
)";
  auto r = testing::run_pass(*make_stitch_fusion(fusion_options(3)), text);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(4, 16)) {
  %0 = fused(%para1_x) {graph: "fused_0"} : (f32(4, 16)) -> (f32(4, 16))
  Return(%0)
}

subgraph @fused_0(%para1_x0: f32(4, 16)) {
  %0 = reduce_max(%para1_x0) {axes: [1], keep_dims: true} : (f32(4, 16)) -> (f32(4, 1))
  %1 = sub(%para1_x0, %0) : (f32(4, 16), f32(4, 1)) -> (f32(4, 16))
  %2 = exp(%1) : (f32(4, 16)) -> (f32(4, 16))
  %3 = reduce_sum(%2) {axes: [1], keep_dims: true} : (f32(4, 16)) -> (f32(4, 1))
  %4 = div(%2, %3) : (f32(4, 16), f32(4, 1)) -> (f32(4, 16))
  Return(%4)
}
)")) << r.text;
}

TEST(StitchFusionTest, LeavesWhatDoesNotStitchToElementwiseFusion) {
  const char* text = R"(
subgraph @main(%para1_x: f32(4, 16)) {
  %0 = exp(%para1_x) : (f32(4, 16)) -> (f32(4, 16))
  %1 = reduce_sum(%0) {axes: [1], keep_dims: false} : (f32(4, 16)) -> (f32(4))
  %2 = neg(%0) : (f32(4, 16)) -> (f32(4, 16))
  Return(%1, %2)
}
)";
  auto r = testing::run_pass(*make_stitch_fusion(fusion_options(3)), text);
  EXPECT_FALSE(r.changed) << r.text;
}

}  // namespace
}  // namespace mf::passes
