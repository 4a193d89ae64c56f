// conv-epilogue-fusion end to end: a mobilenet/resnet-like chain (convolutions with their bias
// inline, as ONNX imports them, each followed by a relu or a ReLU6 clip) compiled at every jit
// level and fusion level gives the bytes of the unfused graph at that jit level, in NCHW (O0) and
// channels-last (O1), with deterministic on and off; and the activations did fuse.

#include <gtest/gtest.h>

#include "ir/graph.h"
#include "passes/compiler.h"
#include "tests/passes/float_graph_util.h"

namespace mf::passes {
namespace {

using testing::random_values;
using testing::run_on_floats;
using testing::same_bytes;
using testing::weight;

// x -> conv 3x3 + relu -> conv 1x1 + clip -> depthwise 3x3 + clip -> conv 3x3/2 + relu. The 16x16
// planes take oneDNN's direct kernels, the 1x1 and the 8x8 output its plain-layout path (where the
// activation runs after the primitive).
std::unique_ptr<ir::Graph> chain_graph() {
  auto g = std::make_unique<ir::Graph>("chain");
  ir::Value y = g->add_parameter("x", {ir::DType::kFloat32, {2, 8, 16, 16}});
  uint32_t seed = 1;
  auto conv = [&](ir::Value x, int64_t out, int64_t in_per_group, int64_t k, int64_t stride,
                  int64_t groups) {
    ir::Attrs attrs = {{"stride", std::vector<int64_t>{stride, stride}},
                       {"padding", std::vector<int64_t>{k / 2, k / 2}},
                       {"groups", groups}};
    return g
        ->add_node("conv2d",
                   {x, weight(*g, {out, in_per_group, k, k}, seed++), weight(*g, {out}, seed++)},
                   attrs)
        ->output();
  };
  auto clip = [&](ir::Value x) {
    x = g->add_node("maximum", {x, g->add_constant<float>({}, {0.f})})->output();
    return g->add_node("minimum", {g->add_constant<float>({}, {0.5f}), x})->output();
  };
  y = g->add_node("relu", {conv(y, 16, 8, 3, 1, 1)})->output();
  y = clip(conv(y, 32, 16, 1, 1, 1));
  y = clip(conv(y, 32, 1, 3, 1, 32));
  y = g->add_node("relu", {conv(y, 16, 32, 3, 2, 1)})->output();
  g->add_output(y);
  return g;
}

CompiledGraph compiled(JitLevel level, int fusion_level) {
  CompileOptions options;
  options.jit_level = level;
  options.fusion_level = fusion_level;
  options.deterministic = true;
  return compile(chain_graph(), options);
}

int fused_activations(const ir::Graph& g) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) {
    if (node.op() == "conv2d" && ir::attr_string(node.attrs(), "activation", "conv2d") != "none") {
      ++n;
    }
  }
  return n;
}

// Against the same jit level at fusion 0: without determinism, channels-last (O1) and NCHW (O0)
// convolutions may take different oneDNN kernels, so the levels are not compared with each other.
TEST(ConvEpilogueBitsTest, EveryFusionLevelGivesTheUnfusedBytes) {
  const std::vector<float> x = random_values(2 * 8 * 16 * 16, 99);
  for (JitLevel level : {JitLevel::kO0, JitLevel::kO1}) {
    const CompiledGraph reference = compiled(level, 0);
    EXPECT_EQ(fused_activations(*reference.graph), 0);
    for (bool deterministic : {true, false}) {
      const std::vector<float> expected = run_on_floats(reference, x, deterministic);
      for (int fusion = 1; fusion <= 3; ++fusion) {
        SCOPED_TRACE(std::string("jit ") + std::string(to_string(level)) + ", fusion " +
                     std::to_string(fusion) + ", deterministic " + std::to_string(deterministic));
        const CompiledGraph c = compiled(level, fusion);
        EXPECT_EQ(fused_activations(*c.graph), 4);
        EXPECT_TRUE(same_bytes(run_on_floats(c, x, deterministic), expected));
      }
    }
  }
}

}  // namespace
}  // namespace mf::passes
