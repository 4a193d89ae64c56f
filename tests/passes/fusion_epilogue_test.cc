// matmul-epilogue-fusion on IR text: add(matmul, bias row) becomes matmul_bias, in either operand
// order; a product used elsewhere or an operand that is not a bias row stays, with the reason.

#include <filesystem>

#include "tests/passes/fusion_test_util.h"
#include "tests/unique_temp_path.h"

namespace mf::passes {
namespace {

using testing::expand;
using testing::fusion_options;

TEST(MatmulEpilogueFusionTest, BiasAddFoldsIntoTheMatmulInEitherOrder) {
  const auto dir = mf::testing::unique_temp_path("mf_epilogue_fused_test");
  const CompileOptions options = testing::dumping_options(2, dir);
  auto pass = make_matmul_epilogue_fusion(options);
  auto r = testing::run_pass(*pass, R"(
subgraph @main(%para1_x: f32(4, 8), %para2_w: f32(6, 8), %para3_b: f32(6), %para4_c: f32(1, 6)) {
  %0 = matmul(%para1_x, %para2_w) {transpose_a: false, transpose_b: true} : (f32(4, 8), f32(6, 8)) -> (f32(4, 6))
  %1 = add(%0, %para3_b) : (f32(4, 6), f32(6)) -> (f32(4, 6))
  %2 = matmul(%para1_x, %para2_w) {transpose_a: false, transpose_b: true} : (f32(4, 8), f32(6, 8)) -> (f32(4, 6))
  %3 = add(%para4_c, %2) : (f32(1, 6), f32(4, 6)) -> (f32(4, 6))
  %4 = mul(%1, %3) : (f32(4, 6), f32(4, 6)) -> (f32(4, 6))
  Return(%4)
}
)");
  EXPECT_TRUE(r.changed);
  const std::string dump =
      testing::read_file(dir / "graph_kernel_dump" / "matmul-epilogue-fusion.txt");
  EXPECT_NE(dump.find("fused kernel matmul_bias#"), std::string::npos) << dump;
  EXPECT_NE(dump.find("members (2): matmul#0, add#1"), std::string::npos) << dump;
  EXPECT_NE(dump.find("memory traffic saved: 192 bytes"), std::string::npos) << dump;
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(4, 8), %para2_w: f32(6, 8), %para3_b: f32(6), %para4_c: f32(1, 6)) {
  %0 = matmul_bias(%para1_x, %para2_w, %para3_b) {transpose_a: false, transpose_b: true} : (f32(4, 8), f32(6, 8), f32(6)) -> (f32(4, 6))
  %1 = matmul_bias(%para1_x, %para2_w, %para4_c) {transpose_a: false, transpose_b: true} : (f32(4, 8), f32(6, 8), f32(1, 6)) -> (f32(4, 6))
  %2 = mul(%0, %1) : (f32(4, 6), f32(4, 6)) -> (f32(4, 6))
  Return(%2)
}
)")) << r.text;
}

TEST(MatmulEpilogueFusionTest, SharedProductsAndNonBiasOperandsStayWithTheReason) {
  const auto dir = mf::testing::unique_temp_path("mf_epilogue_test");
  const CompileOptions options = testing::dumping_options(2, dir);
  const char* text = R"(
subgraph @main(%para1_x: f32(4, 8), %para2_w: f32(8, 6), %para3_y: f32(4, 6), %para4_b: f32(6)) {
  %0 = matmul(%para1_x, %para2_w) {transpose_a: false, transpose_b: false} : (f32(4, 8), f32(8, 6)) -> (f32(4, 6))
  %1 = add(%0, %para3_y) : (f32(4, 6), f32(4, 6)) -> (f32(4, 6))
  %2 = matmul(%para1_x, %para2_w) {transpose_a: false, transpose_b: false} : (f32(4, 8), f32(8, 6)) -> (f32(4, 6))
  %3 = add(%2, %para4_b) : (f32(4, 6), f32(6)) -> (f32(4, 6))
  %4 = mul(%3, %2) : (f32(4, 6), f32(4, 6)) -> (f32(4, 6))
  Return(%1, %4)
}
)";
  auto r = testing::run_pass(*make_matmul_epilogue_fusion(options), text);
  EXPECT_FALSE(r.changed) << r.text;
  const std::string dump =
      testing::read_file(dir / "graph_kernel_dump" / "matmul-epilogue-fusion.txt");
  EXPECT_NE(dump.find("add#1 into matmul#0 in @main: its other operand "
                      "<Tensor[Float32], (4, 6)> is not one bias value"),
            std::string::npos)
      << dump;
  EXPECT_NE(dump.find("add#3 into matmul#2 in @main: the product is also used"), std::string::npos)
      << dump;
  std::filesystem::remove_all(dir);
}

// A Linear over a 3-D input as ONNX imports it: reshape to 2-D, matmul, reshape back, add the bias.
// The reshape keeps the product's last axis, so the bias folds and the reshape moves after the
// kernel; a reshape that splits the last axis (attention heads) stops it.
TEST(MatmulEpilogueFusionTest, BiasAddFoldsThroughAReshapeThatKeepsTheLastAxis) {
  const auto dir = mf::testing::unique_temp_path("mf_epilogue_reshape_test");
  const CompileOptions options = testing::dumping_options(2, dir);
  auto r = testing::run_pass(*make_matmul_epilogue_fusion(options), R"(
subgraph @main(%para1_x: f32(6, 8), %para2_w: f32(8, 4), %para3_b: f32(4), %para4_h: f32(2)) {
  %0 = matmul(%para1_x, %para2_w) {transpose_a: false, transpose_b: false} : (f32(6, 8), f32(8, 4)) -> (f32(6, 4))
  %1 = reshape(%0) {shape: [2, 3, 4]} : (f32(6, 4)) -> (f32(2, 3, 4))
  %2 = add(%para3_b, %1) : (f32(4), f32(2, 3, 4)) -> (f32(2, 3, 4))
  %3 = matmul(%para1_x, %para2_w) {transpose_a: false, transpose_b: false} : (f32(6, 8), f32(8, 4)) -> (f32(6, 4))
  %4 = reshape(%3) {shape: [3, 2, 2, 2]} : (f32(6, 4)) -> (f32(3, 2, 2, 2))
  %5 = add(%4, %para4_h) : (f32(3, 2, 2, 2), f32(2)) -> (f32(3, 2, 2, 2))
  Return(%2, %5)
}
)");
  EXPECT_TRUE(r.changed);
  const std::string dump =
      testing::read_file(dir / "graph_kernel_dump" / "matmul-epilogue-fusion.txt");
  EXPECT_NE(dump.find("members (3): matmul#0, reshape#1, add#2"), std::string::npos) << dump;
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(6, 8), %para2_w: f32(8, 4), %para3_b: f32(4), %para4_h: f32(2)) {
  %0 = matmul_bias(%para1_x, %para2_w, %para3_b) {transpose_a: false, transpose_b: false} : (f32(6, 8), f32(8, 4), f32(4)) -> (f32(6, 4))
  %1 = reshape(%0) {shape: [2, 3, 4]} : (f32(6, 4)) -> (f32(2, 3, 4))
  %2 = matmul(%para1_x, %para2_w) {transpose_a: false, transpose_b: false} : (f32(6, 8), f32(8, 4)) -> (f32(6, 4))
  %3 = reshape(%2) {shape: [3, 2, 2, 2]} : (f32(6, 4)) -> (f32(3, 2, 2, 2))
  %4 = add(%3, %para4_h) : (f32(3, 2, 2, 2), f32(2)) -> (f32(3, 2, 2, 2))
  Return(%1, %4)
}
)")) << r.text;
}

}  // namespace
}  // namespace mf::passes
