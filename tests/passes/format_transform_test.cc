// format-transform: float32 convolutions and pools run channels-last with transposes only at the
// edges of a chain at every jit_level, the compiled graph computes the same bits as without the
// pass, and disable_format_transform (a disabled pass) leaves every convolution NCHW.
#include <gtest/gtest.h>

#include <cstring>

#include "ir/graph.h"
#include "ir/op_def.h"
#include "passes/compiler.h"
#include "runtime/graph_executor.h"
#include "runtime/memory_pool.h"
#include "tests/passes/float_graph_util.h"

namespace mf::passes {
namespace {

using testing::random_values;
using testing::weight;

ir::Attrs conv(int64_t stride, int64_t pad, int64_t groups = 1) {
  return {{"stride", std::vector<int64_t>{stride, stride}},
          {"padding", std::vector<int64_t>{pad, pad}},
          {"groups", groups}};
}

// A resnet-like block and a mobilenet-like tail in one graph: stem conv, max pool, two 3x3 convs
// with a per-channel bias add and relu, a residual add, a depthwise conv, a clip, a concat of two
// branches, then global average pooling and a flatten (which must see NCHW again).
std::unique_ptr<ir::Graph> block_graph(ir::DType dtype = ir::DType::kFloat32) {
  auto g = std::make_unique<ir::Graph>("block");
  ir::Value x = g->add_parameter("x", {dtype, {2, 3, 16, 16}});
  auto cast = [&](ir::Value v) {
    return dtype == ir::DType::kFloat32 ? v
                                        : g->add_node("cast", {v}, {{"dtype", dtype}})->output();
  };
  ir::Value y = g->add_node("conv2d", {x, cast(weight(*g, {8, 3, 3, 3}, 1))}, conv(1, 1))->output();
  y = g->add_node("max_pool2d", {y}, {{"kernel", std::vector<int64_t>{2, 2}}})->output();
  ir::Value a = g->add_node("conv2d", {y, cast(weight(*g, {8, 8, 3, 3}, 2))}, conv(1, 1))->output();
  a = g->add_node("add", {a, cast(weight(*g, {8, 1, 1}, 3))})->output();
  a = g->add_node("relu", {a})->output();
  a = g->add_node("conv2d", {a, cast(weight(*g, {8, 8, 3, 3}, 4))}, conv(1, 1))->output();
  ir::Value r = g->add_node("relu", {g->add_node("add", {a, y})->output()})->output();
  ir::Value d =
      g->add_node("conv2d", {r, cast(weight(*g, {8, 1, 3, 3}, 5))}, conv(1, 1, 8))->output();
  // ONNX Clip (relu6), as the importer writes it: maximum and minimum with scalar constants.
  d = g->add_node("maximum", {d, cast(g->add_constant<float>({}, {0.f}))})->output();
  d = g->add_node("minimum", {d, cast(g->add_constant<float>({}, {6.f}))})->output();
  ir::Value c = g->add_node("concat", {d, r}, {{"axis", int64_t{1}}})->output();
  ir::Value p = g->add_node("global_avg_pool", {c})->output();
  g->add_output(g->add_node("reshape", {p}, {{"shape", std::vector<int64_t>{2, 16}}})->output());
  return g;
}

CompiledGraph compiled(std::unique_ptr<ir::Graph> g, JitLevel level,
                       std::vector<std::string> disable = {}) {
  CompileOptions options;
  options.jit_level = level;
  options.deterministic = true;
  options.disable_passes = std::move(disable);
  return compile(std::move(g), options);
}

int count_ops(const ir::Graph& g, std::string_view op) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.op() == op ? 1 : 0;
  return n;
}

// Every conv2d and pool's data_format.
std::vector<std::string> formats(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::Node& node : g.nodes()) {
    if (node.op() == "conv2d" || node.op() == "max_pool2d") {
      out.push_back(ir::attr_string(node.attrs(), "data_format", node.op()));
    }
  }
  return out;
}

// Convolutions on the same (channels-last) kernels either way.
std::vector<float> run(const CompiledGraph& c, const std::vector<float>& input) {
  return testing::run_on_floats(c, input, /*deterministic=*/true);
}

TEST(FormatTransformTest, ChainRunsChannelsLastWithTransposesOnlyAtItsEdges) {
  const CompiledGraph c = compiled(block_graph(), JitLevel::kO1);
  EXPECT_EQ(formats(*c.graph), std::vector<std::string>(5, "NHWC"));
  // One transpose into the chain (x), one out of it (before global_avg_pool); the per-channel
  // bias became a folded (1, 1, 1, 8) constant.
  EXPECT_EQ(count_ops(*c.graph, "transpose"), 2);
}

TEST(FormatTransformTest, SameBitsAsTheNchwGraph) {
  const std::vector<float> x = random_values(2 * 3 * 16 * 16, 7);
  const std::vector<float> nhwc = run(compiled(block_graph(), JitLevel::kO1), x);
  const std::vector<float> nchw =
      run(compiled(block_graph(), JitLevel::kO1, {"format-transform"}), x);
  ASSERT_EQ(nhwc.size(), nchw.size());
  EXPECT_EQ(std::memcmp(nhwc.data(), nchw.data(), nhwc.size() * sizeof(float)), 0);
}

// A DenseNet-like block: two convolutions concatenated, then a pre-activation batch norm and relu
// before the next convolution, and a batch norm on the block's output.
std::unique_ptr<ir::Graph> dense_graph() {
  auto g = std::make_unique<ir::Graph>("dense");
  ir::Value x = g->add_parameter("x", {ir::DType::kFloat32, {2, 3, 9, 11}});
  auto positive = [&](int64_t n, float base) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = base + 0.07f * static_cast<float>(i);
    return g->add_constant<float>({n}, v);
  };
  auto batch_norm = [&](ir::Value v, int64_t channels) {
    return g
        ->add_node("batch_norm", {v, positive(channels, 0.5f), weight(*g, {channels}, 21),
                                  weight(*g, {channels}, 22), positive(channels, 0.3f)})
        ->output();
  };
  ir::Value a = g->add_node("conv2d", {x, weight(*g, {6, 3, 3, 3}, 1)}, conv(1, 1))->output();
  ir::Value b = g->add_node("conv2d", {x, weight(*g, {5, 3, 1, 1}, 2)}, conv(1, 0))->output();
  ir::Value c = g->add_node("concat", {a, b}, {{"axis", int64_t{1}}})->output();
  ir::Value y = g->add_node("relu", {batch_norm(c, 11)})->output();
  y = g->add_node("conv2d", {y, weight(*g, {7, 11, 3, 3}, 3)}, conv(1, 1))->output();
  g->add_output(batch_norm(y, 7));
  return g;
}

TEST(FormatTransformTest, BatchNormsBetweenConvolutionsStayChannelsLast) {
  for (const JitLevel level : {JitLevel::kO0, JitLevel::kO1}) {
    const CompiledGraph c = compiled(dense_graph(), level);
    int channels_last = 0;
    for (const ir::Node& node : c.graph->nodes()) {
      if (node.op() == "batch_norm") {
        channels_last += ir::attr_string(node.attrs(), "data_format", "batch_norm") == "NHWC";
      }
    }
    EXPECT_EQ(channels_last, 2);
    // Into the chain (x, used by two convolutions) and out of it (the output): no pair around a
    // batch norm.
    EXPECT_LE(count_ops(*c.graph, "transpose"), 3);
    const std::vector<float> x = random_values(2 * 3 * 9 * 11, 5);
    const std::vector<float> nchw = run(compiled(dense_graph(), level, {"format-transform"}), x);
    const std::vector<float> nhwc = run(c, x);
    ASSERT_EQ(nhwc.size(), nchw.size());
    EXPECT_EQ(std::memcmp(nhwc.data(), nchw.data(), nhwc.size() * sizeof(float)), 0);
  }
}

TEST(FormatTransformTest, DisabledEveryConvolutionStaysNchw) {
  for (const JitLevel level : {JitLevel::kO0, JitLevel::kO1}) {
    const CompiledGraph c = compiled(block_graph(), level, {"format-transform"});
    EXPECT_EQ(formats(*c.graph), std::vector<std::string>(5, "NCHW"));
    EXPECT_EQ(count_ops(*c.graph, "transpose"), 0);
  }
}

// O0 runs no algebraic simplification, so the pass itself must leave no transpose pair between
// two convolutions: the chain is channels-last with transposes only at its edges (the per-channel
// bias, not folded at O0, keeps a reshape and a transpose of its own).
TEST(FormatTransformTest, AtO0TooTheChainPassesChannelsLastWithoutTransposePairs) {
  const CompiledGraph c = compiled(block_graph(), JitLevel::kO0);
  EXPECT_EQ(formats(*c.graph), std::vector<std::string>(5, "NHWC"));
  EXPECT_EQ(count_ops(*c.graph, "transpose"), 3);
  const std::vector<float> x = random_values(2 * 3 * 16 * 16, 7);
  const std::vector<float> nhwc = run(c, x);
  const std::vector<float> nchw =
      run(compiled(block_graph(), JitLevel::kO0, {"format-transform"}), x);
  ASSERT_EQ(nhwc.size(), nchw.size());
  EXPECT_EQ(std::memcmp(nhwc.data(), nchw.data(), nhwc.size() * sizeof(float)), 0);
}

TEST(FormatTransformTest, Float64ConvolutionsAreLeftAlone) {
  const CompiledGraph c = compiled(block_graph(ir::DType::kFloat64), JitLevel::kO1);
  EXPECT_EQ(formats(*c.graph), std::vector<std::string>(5, "NCHW"));
}

TEST(FormatTransformTest, AFullSizeOperandKeepsItsNchwOrder) {
  // conv(x) + y with y a full NCHW activation: the add cannot take y in channels-last order
  // without a transpose of its own, so the conv's output is transposed back before it.
  auto g = std::make_unique<ir::Graph>("residual");
  ir::Value x = g->add_parameter("x", {ir::DType::kFloat32, {1, 4, 6, 6}});
  ir::Value y = g->add_node("conv2d", {x, weight(*g, {4, 4, 3, 3}, 1)}, conv(1, 1))->output();
  g->add_output(g->add_node("add", {y, x})->output());
  const CompiledGraph c = compiled(std::move(g), JitLevel::kO1);
  EXPECT_EQ(count_ops(*c.graph, "transpose"), 2);
  const std::vector<float> in = random_values(4 * 36, 3);
  auto again = std::make_unique<ir::Graph>("residual");
  ir::Value x2 = again->add_parameter("x", {ir::DType::kFloat32, {1, 4, 6, 6}});
  ir::Value y2 =
      again->add_node("conv2d", {x2, weight(*again, {4, 4, 3, 3}, 1)}, conv(1, 1))->output();
  again->add_output(again->add_node("add", {y2, x2})->output());
  const std::vector<float> a = run(c, in);
  const std::vector<float> b =
      run(compiled(std::move(again), JitLevel::kO0, {"format-transform"}), in);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace mf::passes
