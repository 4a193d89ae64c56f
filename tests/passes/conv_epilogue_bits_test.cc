// conv-epilogue-fusion end to end: a mobilenet/resnet-like chain (convolutions with their bias
// inline, as ONNX imports them, each followed by a relu or a ReLU6 clip) compiled at every jit
// level and fusion level gives the bytes of the unfused graph at that jit level, in NCHW (O0) and
// channels-last (O1), with deterministic on and off; and the activations did fuse.

#include <gtest/gtest.h>

#include <cstring>

#include "ir/graph.h"
#include "passes/compiler.h"
#include "runtime/graph_executor.h"
#include "runtime/memory_pool.h"
#include "tests/passes/random_weights.h"

namespace mf::passes {
namespace {

using testing::random_values;
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

std::vector<uint8_t> run(const CompiledGraph& c, const std::vector<float>& input,
                         bool deterministic) {
  auto executor = runtime::make_kernel_executor(c.plan);
  const ir::TensorType type = c.graph->parameter(0)->type();
  auto buffer = runtime::default_pool().allocate(input.size() * sizeof(float), "input");
  std::memcpy(buffer->data(), input.data(), input.size() * sizeof(float));
  const runtime::TensorArg arg{type, buffer};
  runtime::RunOptions options;
  options.deterministic = deterministic;
  std::vector<runtime::TensorArg> out = executor->run({&arg, 1}, options);
  const uint8_t* data = static_cast<const uint8_t*>(out.at(0).buffer->data());
  return std::vector<uint8_t>(data, data + ir::num_elements(out[0].type.shape) * sizeof(float));
}

// Against the same jit level at fusion 0: without determinism, channels-last (O1) and NCHW (O0)
// convolutions may take different oneDNN kernels, so the levels are not compared with each other.
TEST(ConvEpilogueBitsTest, EveryFusionLevelGivesTheUnfusedBytes) {
  const std::vector<float> x = random_values(2 * 8 * 16 * 16, 99);
  for (JitLevel level : {JitLevel::kO0, JitLevel::kO1}) {
    const CompiledGraph reference = compiled(level, 0);
    EXPECT_EQ(fused_activations(*reference.graph), 0);
    for (bool deterministic : {true, false}) {
      const std::vector<uint8_t> expected = run(reference, x, deterministic);
      for (int fusion = 1; fusion <= 3; ++fusion) {
        SCOPED_TRACE(std::string("jit ") + std::string(to_string(level)) + ", fusion " +
                     std::to_string(fusion) + ", deterministic " + std::to_string(deterministic));
        const CompiledGraph c = compiled(level, fusion);
        EXPECT_EQ(fused_activations(*c.graph), 4);
        EXPECT_TRUE(run(c, x, deterministic) == expected);
      }
    }
  }
}

}  // namespace
}  // namespace mf::passes
