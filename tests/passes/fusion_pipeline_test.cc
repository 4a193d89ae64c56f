// Fusion in the pass table and the dumps: each level's rows (and the flags that add or remove
// rows) show in describe_pipeline; graph_kernel_dump/ explains a fused and a rejected case.

#include <filesystem>
#include <fstream>
#include <sstream>

#include "passes/compiler.h"
#include "passes/pass_table.h"
#include "tests/passes/fusion_test_util.h"
#include "tests/unique_temp_path.h"

namespace mf::passes {
namespace {

using testing::fusion_options;

std::vector<std::string> rows_of(const CompileOptions& options) {
  std::vector<std::string> out;
  for (const PipelineRow& row : describe_pipeline(options)) {
    out.push_back(row.name + " | " + row.origin + " | " + row.group);
  }
  return out;
}

bool has_row(const std::vector<std::string>& rows, const std::string& row) {
  return std::find(rows.begin(), rows.end(), row) != rows.end();
}

TEST(FusionPipelineTest, EachLevelAddsItsRows) {
  CompileOptions o;
  o.jit_level = JitLevel::kO1;
  for (const std::string& row : rows_of(o)) EXPECT_EQ(row.find("fusion"), std::string::npos) << row;
  o = fusion_options(1);
  auto rows = rows_of(o);
  EXPECT_TRUE(has_row(rows, "expand-composite-ops | fusion opt_level 1 | "));
  EXPECT_TRUE(has_row(rows, "elementwise-fusion | fusion opt_level 1 | "));
  EXPECT_FALSE(has_row(rows, "stitch-fusion | fusion opt_level 3 | "));
  o = fusion_options(2);
  rows = rows_of(o);
  EXPECT_TRUE(
      has_row(rows, "common-subexpression-elimination | fusion opt_level 2 | fusion-simplify"));
  EXPECT_TRUE(has_row(rows, "algebraic-simplification | fusion opt_level 2 | fusion-simplify"));
  EXPECT_TRUE(has_row(rows, "matmul-epilogue-fusion | fusion opt_level 2 | "));
  EXPECT_FALSE(
      has_row(rows_of(fusion_options(1)), "matmul-epilogue-fusion | fusion opt_level 2 | "));
  o = fusion_options(3);
  rows = rows_of(o);
  EXPECT_TRUE(has_row(rows, "stitch-fusion | fusion opt_level 3 | "));
  EXPECT_TRUE(has_row(rows, "parallel-fusion | fusion opt_level 3 | "));
}

TEST(FusionPipelineTest, FlagsAddAndRemoveFusionPasses) {
  CompileOptions o = fusion_options(1);
  o.fusion.stitch = true;
  auto rows = rows_of(o);
  EXPECT_TRUE(has_row(rows, "stitch-fusion | --enable_stitch_fusion | "));
  EXPECT_FALSE(has_row(rows, "parallel-fusion | --enable_parallel_fusion | "));
  o.enable_passes = {"parallel-fusion"};
  EXPECT_TRUE(has_row(rows_of(o), "parallel-fusion | --enable_pass | "));
  o = fusion_options(3);
  o.disable_passes = {"stitch-fusion", "elementwise-fusion"};
  rows = rows_of(o);
  for (const std::string& row : rows) {
    EXPECT_FALSE(row.starts_with("stitch-fusion") || row.starts_with("elementwise-fusion")) << row;
  }
  // No fusion at all: the flags alone do not turn fusion passes on.
  o = CompileOptions();
  o.fusion.stitch = true;
  EXPECT_FALSE(has_row(rows_of(o), "stitch-fusion | --enable_stitch_fusion | "));
}

// At opt_level 2 a bias add after a matmul joins the product even where an activation follows:
// matmul-epilogue-fusion runs before elementwise-fusion, which would take the add into a fused
// kernel with the relu (a bias row loaded per tile there, next to nothing inside oneDNN).
TEST(FusionPipelineTest, ABiasBeforeAnActivationJoinsTheMatmul) {
  auto graph = testing::parse(R"(
subgraph @main(%para1_x: f32(4, 8), %para2_w: f32(8, 6), %para3_b: f32(6)) {
  %0 = matmul(%para1_x, %para2_w) {transpose_a: false, transpose_b: false} : (f32(4, 8), f32(8, 6)) -> (f32(4, 6))
  %1 = add(%0, %para3_b) : (f32(4, 6), f32(6)) -> (f32(4, 6))
  %2 = relu(%1) : (f32(4, 6)) -> (f32(4, 6))
  Return(%2)
}
)");
  const CompiledGraph compiled = compile(std::move(graph), fusion_options(2));
  std::vector<std::string> ops;
  for (const ir::Node& node : compiled.graph->nodes()) ops.push_back(node.op());
  EXPECT_EQ(ops, (std::vector<std::string>{"matmul_bias", "relu"}));
}

TEST(FusionPipelineTest, DumpExplainsFusedAndRejectedCandidates) {
  const auto dir = mf::testing::unique_temp_path("mf_fusion_dump_test");
  std::filesystem::remove_all(dir);
  auto graph = testing::parse(R"(
subgraph @main(%para1_x: f32(4, 16), %para2_y: f32(4, 16)) {
  %0 = exp(%para1_x) : (f32(4, 16)) -> (f32(4, 16))
  %1 = reduce_sum(%0) {axes: [1], keep_dims: true} : (f32(4, 16)) -> (f32(4, 1))
  %2 = div(%0, %1) : (f32(4, 16), f32(4, 1)) -> (f32(4, 16))
  %3 = mul(%2, %para2_y) : (f32(4, 16), f32(4, 16)) -> (f32(4, 16))
  %4 = neg(%3) : (f32(4, 16)) -> (f32(4, 16))
  %5 = abs(%4) : (f32(4, 16)) -> (f32(4, 16))
  Return(%5)
}
)");
  CompileOptions options = fusion_options(1);
  options.fusion.dump_as_text = true;
  options.fusion.disable_cluster_ops = {"mul"};
  options.dump.dir = dir;
  compile(std::move(graph), options);
  const std::string text = testing::read_file(dir / "graph_kernel_dump" / "elementwise-fusion.txt");
  EXPECT_NE(text.find("fused kernel @fused_"), std::string::npos) << text;
  EXPECT_NE(text.find("rule: elementwise chain"), std::string::npos) << text;
  EXPECT_NE(text.find("(enabled by opt_level 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("members (2): neg#"), std::string::npos) << text;
  EXPECT_NE(text.find("memory traffic saved: 512 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("disabled by --disable_cluster_ops=mul"), std::string::npos) << text;
  EXPECT_NE(text.find("reduce not allowed as a producer at opt_level 1"), std::string::npos)
      << text;
  EXPECT_TRUE(std::filesystem::exists(dir / "graph_kernel_dump" / "expand-composite-ops.txt"));
  std::filesystem::remove_all(dir);
}

TEST(FusionPipelineTest, SizeLimitRejectionIsExplained) {
  const auto dir = mf::testing::unique_temp_path("mf_fusion_limit_test");
  std::filesystem::remove_all(dir);
  auto graph = testing::parse(R"(
subgraph @main(%para1_x: f32(8)) {
  %0 = exp(%para1_x) : (f32(8)) -> (f32(8))
  %1 = neg(%0) : (f32(8)) -> (f32(8))
  %2 = abs(%1) : (f32(8)) -> (f32(8))
  Return(%2)
}
)");
  CompileOptions options = fusion_options(1);
  options.fusion.dump_as_text = true;
  options.fusion.composite_op_limit_size = 2;
  options.dump.dir = dir;
  compile(std::move(graph), options);
  const std::string text = testing::read_file(dir / "graph_kernel_dump" / "elementwise-fusion.txt");
  EXPECT_NE(text.find("exceeds composite_op_limit_size 2"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mf::passes
