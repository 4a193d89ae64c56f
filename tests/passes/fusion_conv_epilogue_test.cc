// conv-epilogue-fusion on IR text: resnet's conv -> add -> relu becomes one conv2d with
// residual=true and activation "relu" (the add in either operand order); a convolution whose
// result is used elsewhere, a broadcast add and a float64 convolution stay, with the reason.

#include <filesystem>

#include "tests/passes/fusion_test_util.h"
#include "tests/unique_temp_path.h"

namespace mf::passes {
namespace {

using testing::expand;

TEST(ConvEpilogueFusionTest, ResidualAddAndReluFoldIntoTheConvolution) {
  const auto dir = mf::testing::unique_temp_path("mf_conv_epilogue_fused_test");
  const CompileOptions options = testing::dumping_options(1, dir);
  auto pass = make_conv_epilogue_fusion(options);
  auto r = testing::run_pass(*pass, R"(
subgraph @main(%para1_x: f32(1, 4, 6, 6), %para2_w: f32(4, 4, 3, 3), %para3_b: f32(4)) {
  %0 = conv2d(%para1_x, %para2_w, %para3_b) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3), f32(4)) -> (f32(1, 4, 6, 6))
  %1 = relu(%0) : (f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %2 = conv2d(%1, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %3 = add(%para1_x, %2) : (f32(1, 4, 6, 6), f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %4 = relu(%3) : (f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  Return(%4)
}
)");
  EXPECT_TRUE(r.changed);
  const std::string dump = testing::read_file(dir / "graph_kernel_dump" / "conv-epilogue-fusion.txt");
  EXPECT_NE(dump.find("members (2): conv2d#2, add#3"), std::string::npos) << dump;
  EXPECT_NE(dump.find("convolution epilogue: residual add"), std::string::npos) << dump;
  EXPECT_NE(dump.find("convolution epilogue: relu"), std::string::npos) << dump;
  // Each epilogue saves writing and reading back one 1x4x6x6 float32 tensor: 2 * 576 bytes.
  EXPECT_NE(dump.find("memory traffic saved: 1152 bytes"), std::string::npos) << dump;
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(1, 4, 6, 6), %para2_w: f32(4, 4, 3, 3), %para3_b: f32(4)) {
  %0 = conv2d(%para1_x, %para2_w, %para3_b) {activation: "relu", data_format: "NCHW", dilation: [1, 1], groups: 1, padding: [1, 1], residual: false, stride: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3), f32(4)) -> (f32(1, 4, 6, 6))
  %1 = conv2d(%0, %para2_w, %para1_x) {activation: "relu", data_format: "NCHW", dilation: [1, 1], groups: 1, padding: [1, 1], residual: true, stride: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3), f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  Return(%1)
}
)")) << r.text;
}

TEST(ConvEpilogueFusionTest, SharedResultsBroadcastsAndFloat64StayWithTheReason) {
  const auto dir = mf::testing::unique_temp_path("mf_conv_epilogue_test");
  const CompileOptions options = testing::dumping_options(1, dir);
  const char* text = R"(
subgraph @main(%para1_x: f32(1, 4, 6, 6), %para2_w: f32(4, 4, 3, 3), %para3_c: f32(4, 1, 1), %para4_d: f64(1, 4, 6, 6), %para5_v: f64(4, 4, 3, 3)) {
  %0 = conv2d(%para1_x, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %1 = relu(%0) : (f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %2 = conv2d(%para1_x, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %3 = add(%2, %para3_c) : (f32(1, 4, 6, 6), f32(4, 1, 1)) -> (f32(1, 4, 6, 6))
  %4 = conv2d(%para4_d, %para5_v) {padding: [1, 1]} : (f64(1, 4, 6, 6), f64(4, 4, 3, 3)) -> (f64(1, 4, 6, 6))
  %5 = relu(%4) : (f64(1, 4, 6, 6)) -> (f64(1, 4, 6, 6))
  Return(%0, %1, %3, %5)
}
)";
  auto r = testing::run_pass(*make_conv_epilogue_fusion(options), text);
  EXPECT_FALSE(r.changed) << r.text;
  const std::string dump = testing::read_file(dir / "graph_kernel_dump" / "conv-epilogue-fusion.txt");
  EXPECT_NE(dump.find("relu#1 into conv2d#0 in @main: the convolution's result is also used"),
            std::string::npos)
      << dump;
  EXPECT_NE(dump.find("add#3 into conv2d#2 in @main: its other operand <Tensor[Float32], (4, 1, "
                      "1)> is not a tensor of the convolution's type"),
            std::string::npos)
      << dump;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mf::passes
