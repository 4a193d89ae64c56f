// conv-epilogue-fusion on IR text: relu(conv) and a clip (maximum, then minimum with scalar
// constants, either operand order) become one conv2d with its activation; a convolution whose
// result is used elsewhere, a clip with a tensor bound, an add and a float64 convolution stay.

#include <filesystem>

#include "tests/passes/fusion_test_util.h"
#include "tests/unique_temp_path.h"

namespace mf::passes {
namespace {

using testing::expand;

TEST(ConvEpilogueFusionTest, ReluAndClipFoldIntoTheConvolution) {
  const auto dir = mf::testing::unique_temp_path("mf_conv_epilogue_fused_test");
  const CompileOptions options = testing::dumping_options(1, dir);
  auto pass = make_conv_epilogue_fusion(options);
  auto r = testing::run_pass(*pass, R"(
subgraph @main(%para1_x: f32(1, 4, 6, 6), %para2_w: f32(4, 4, 3, 3), %para3_b: f32(4)) {
  %const1 = Constant f32() [0]
  %const2 = Constant f32() [6]
  %0 = conv2d(%para1_x, %para2_w, %para3_b) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3), f32(4)) -> (f32(1, 4, 6, 6))
  %1 = relu(%0) : (f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %2 = conv2d(%1, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %3 = maximum(%const1, %2) : (f32(), f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %4 = minimum(%3, %const2) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  Return(%4)
}
)");
  EXPECT_TRUE(r.changed);
  const std::string dump =
      testing::read_file(dir / "graph_kernel_dump" / "conv-epilogue-fusion.txt");
  EXPECT_NE(dump.find("members (2): conv2d#0, relu#1"), std::string::npos) << dump;
  EXPECT_NE(dump.find("members (3): conv2d#2, maximum#3, minimum#4"), std::string::npos) << dump;
  EXPECT_NE(dump.find("convolution epilogue: clip as a post-op"), std::string::npos) << dump;
  // relu: one 1x4x6x6 float32 tensor not written and read back (2 * 576 bytes); clip: two.
  EXPECT_NE(dump.find("memory traffic saved: 1152 bytes"), std::string::npos) << dump;
  EXPECT_NE(dump.find("memory traffic saved: 2304 bytes"), std::string::npos) << dump;
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(1, 4, 6, 6), %para2_w: f32(4, 4, 3, 3), %para3_b: f32(4)) {
  %const1 = Constant f32() [0]
  %const2 = Constant f32() [6]
  %0 = conv2d(%para1_x, %para2_w, %para3_b) {activation: "relu", clip_max: 0.0, clip_min: 0.0, data_format: "NCHW", dilation: [1, 1], groups: 1, padding: [1, 1], stride: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3), f32(4)) -> (f32(1, 4, 6, 6))
  %1 = conv2d(%0, %para2_w) {activation: "clip", clip_max: 6.0, clip_min: 0.0, data_format: "NCHW", dilation: [1, 1], groups: 1, padding: [1, 1], stride: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  Return(%1)
}
)")) << r.text;
}

// The clip op (the ONNX importer's form of Clip with both bounds) folds as its two ops do; with a
// tensor bound, or bounds out of order, it stays.
TEST(ConvEpilogueFusionTest, TheClipOpFoldsWithScalarBoundsOnly) {
  auto pass = make_conv_epilogue_fusion(testing::fusion_options(1));
  auto r = testing::run_pass(*pass, R"(
subgraph @main(%para1_x: f32(1, 4, 6, 6), %para2_w: f32(4, 4, 3, 3), %para3_lo: f32(1, 4, 6, 6)) {
  %const1 = Constant f32() [0]
  %const2 = Constant f32() [6]
  %0 = conv2d(%para1_x, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %1 = clip(%0, %const1, %const2) : (f32(1, 4, 6, 6), f32(), f32()) -> (f32(1, 4, 6, 6))
  %2 = conv2d(%1, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %3 = clip(%2, %para3_lo, %const2) : (f32(1, 4, 6, 6), f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %4 = conv2d(%3, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %5 = clip(%4, %const2, %const1) : (f32(1, 4, 6, 6), f32(), f32()) -> (f32(1, 4, 6, 6))
  Return(%5)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(1, 4, 6, 6), %para2_w: f32(4, 4, 3, 3), %para3_lo: f32(1, 4, 6, 6)) {
  %const1 = Constant f32() [0]
  %const2 = Constant f32() [6]
  %0 = conv2d(%para1_x, %para2_w) {activation: "clip", clip_max: 6.0, clip_min: 0.0, data_format: "NCHW", dilation: [1, 1], groups: 1, padding: [1, 1], stride: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %1 = conv2d(%0, %para2_w) {activation: "none", clip_max: 0.0, clip_min: 0.0, data_format: "NCHW", dilation: [1, 1], groups: 1, padding: [1, 1], stride: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %2 = clip(%1, %para3_lo, %const2) : (f32(1, 4, 6, 6), f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %3 = conv2d(%2, %para2_w) {activation: "none", clip_max: 0.0, clip_min: 0.0, data_format: "NCHW", dilation: [1, 1], groups: 1, padding: [1, 1], stride: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %4 = clip(%3, %const2, %const1) : (f32(1, 4, 6, 6), f32(), f32()) -> (f32(1, 4, 6, 6))
  Return(%4)
}
)")) << r.text;
}

TEST(ConvEpilogueFusionTest, SharedResultsTensorBoundsAddsAndFloat64Stay) {
  const auto dir = mf::testing::unique_temp_path("mf_conv_epilogue_test");
  const CompileOptions options = testing::dumping_options(1, dir);
  const char* text = R"(
subgraph @main(%para1_x: f32(1, 4, 6, 6), %para2_w: f32(4, 4, 3, 3), %para3_d: f64(1, 4, 6, 6), %para4_v: f64(4, 4, 3, 3)) {
  %const1 = Constant f32() [6]
  %0 = conv2d(%para1_x, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %1 = relu(%0) : (f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %2 = conv2d(%para1_x, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %3 = maximum(%2, %para1_x) : (f32(1, 4, 6, 6), f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %4 = minimum(%3, %const1) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %5 = conv2d(%para1_x, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %6 = add(%5, %para1_x) : (f32(1, 4, 6, 6), f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %7 = conv2d(%para3_d, %para4_v) {padding: [1, 1]} : (f64(1, 4, 6, 6), f64(4, 4, 3, 3)) -> (f64(1, 4, 6, 6))
  %8 = relu(%7) : (f64(1, 4, 6, 6)) -> (f64(1, 4, 6, 6))
  Return(%0, %1, %4, %6, %8)
}
)";
  auto r = testing::run_pass(*make_conv_epilogue_fusion(options), text);
  EXPECT_FALSE(r.changed) << r.text;
  const std::string dump =
      testing::read_file(dir / "graph_kernel_dump" / "conv-epilogue-fusion.txt");
  EXPECT_NE(dump.find("relu#1 into conv2d#0 in @main: the convolution's result is also used"),
            std::string::npos)
      << dump;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mf::passes

namespace mf::passes {
namespace {

// The library activations (EfficientNet's SiLU and squeeze-excitation sigmoid, MobileNetV3's
// hardswish and hardsigmoid as ONNX imports them) fold into the convolution with
// deterministic=OFF, and stay separate ops, with their bits, with deterministic=ON.
constexpr const char* kLibraryActivations = R"(
subgraph @main(%para1_x: f32(1, 4, 6, 6), %para2_w: f32(4, 4, 3, 3)) {
  %const1 = Constant f32() [0.16666667]
  %const2 = Constant f32() [0.5]
  %const3 = Constant f32() [0]
  %const4 = Constant f32() [1]
  %0 = conv2d(%para1_x, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %1 = sigmoid(%0) : (f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %2 = mul(%1, %0) : (f32(1, 4, 6, 6), f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %3 = conv2d(%2, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %4 = mul(%3, %const1) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %5 = add(%4, %const2) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %6 = maximum(%5, %const3) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %7 = minimum(%6, %const4) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %8 = mul(%3, %7) : (f32(1, 4, 6, 6), f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %9 = conv2d(%8, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %10 = sigmoid(%9) : (f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %11 = conv2d(%10, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %12 = mul(%11, %const1) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %13 = add(%12, %const2) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %14 = maximum(%13, %const3) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %15 = minimum(%14, %const4) : (f32(1, 4, 6, 6), f32()) -> (f32(1, 4, 6, 6))
  %16 = conv2d(%15, %para2_w) {padding: [1, 1]} : (f32(1, 4, 6, 6), f32(4, 4, 3, 3)) -> (f32(1, 4, 6, 6))
  %17 = sigmoid(%16) : (f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %18 = mul(%16, %17) : (f32(1, 4, 6, 6), f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  %19 = add(%16, %18) : (f32(1, 4, 6, 6), f32(1, 4, 6, 6)) -> (f32(1, 4, 6, 6))
  Return(%19)
}
)";

std::vector<std::string> activations(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = text.find("activation: \""); at != std::string::npos;
       at = text.find("activation: \"", at + 1)) {
    const size_t begin = at + 13;
    out.push_back(text.substr(begin, text.find('"', begin) - begin));
  }
  return out;
}

TEST(ConvEpilogueFusionTest, LibraryActivationsFoldOnlyWhenNotDeterministic) {
  CompileOptions options = testing::fusion_options(1);
  options.deterministic = false;
  auto r = testing::run_pass(*make_conv_epilogue_fusion(options), kLibraryActivations);
  EXPECT_TRUE(r.changed);
  // The last silu's convolution is also read by the add: it stays, and so does its activation.
  EXPECT_EQ(activations(r.text),
            (std::vector<std::string>{"silu", "hardswish", "sigmoid", "hardsigmoid", "none"}))
      << r.text;
  EXPECT_EQ(r.text.find("= sigmoid(%"), r.text.rfind("= sigmoid(%")) << "one sigmoid left";

  options.deterministic = true;
  r = testing::run_pass(*make_conv_epilogue_fusion(options), kLibraryActivations);
  EXPECT_FALSE(r.changed) << r.text;
}

}  // namespace
}  // namespace mf::passes
