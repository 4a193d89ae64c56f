// The fused-kernel evaluator against the plain kernels: at each fusion opt_level 1..3 a graph run
// with its fused kernels gives the same bits as the same graph expanded but run op by op (the
// fusion passes disabled), and, where expansion is bit-exact, as opt_level 0. Elementwise chains
// with broadcasting, reduce tails and stitched rows, at 1 and several threads, both executors.

#include "runtime/fused_kernel.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "base/error.h"
#include "engine/graph/driver.h"
#include "ir/graph.h"
#include "ir/printer.h"
#include "runtime/graph_executor.h"
#include "runtime/storage.h"
#include "tests/runtime/tensor_args.h"

namespace mf::runtime {
namespace {

using testing::f32;
using testing::random_arg;

using ir::DType;
using ir::Graph;
using ir::TensorType;

bool same_bits(const TensorArg& a, const TensorArg& b) {
  const size_t n = ir::num_elements(a.type.shape) * ir::dtype_size(a.type.dtype);
  return a.type == b.type && std::memcmp(a.buffer->data(), b.buffer->data(), n) == 0;
}

using Builder = std::function<void(Graph&)>;

struct Compiled {
  passes::CompiledGraph compiled;
  size_t fused = 0;
};

Compiled compile_at(const Builder& build, int level, passes::JitLevel jit,
                    const std::vector<std::string>& force_expand, bool fuse = true) {
  auto graph = std::make_unique<Graph>("main");
  build(*graph);
  passes::CompileOptions options;
  options.jit_level = jit;
  options.fusion_level = level;
  options.fusion.stitch = level >= 3;
  options.fusion.parallel = level >= 3;
  options.fusion.enable_expand_ops = force_expand;
  if (!fuse) options.disable_passes = {"stitch-fusion", "elementwise-fusion", "parallel-fusion"};
  Compiled out{engine::compile_graph(std::move(graph), options)};
  for (const ir::Node& n : out.compiled.graph->nodes()) out.fused += is_fused(n) ? 1 : 0;
  return out;
}

std::vector<TensorArg> run(const Compiled& c, const std::vector<TensorArg>& inputs, int threads,
                           bool sink) {
  auto executor =
      sink ? make_sink_executor(c.compiled.plan) : make_kernel_executor(c.compiled.plan);
  RunOptions options;
  options.intra_op_threads = threads;
  return executor->run(inputs, options);
}

// Runs `build` unfused and at every fusion level, every thread count and both executors; all must
// agree bit for bit. Returns how many fused nodes each level made.
std::vector<size_t> expect_fused_equals_unfused(const Builder& build,
                                                const std::vector<TensorType>& input_types,
                                                const std::vector<std::string>& force_expand = {}) {
  std::vector<TensorArg> inputs;
  for (size_t i = 0; i < input_types.size(); ++i)
    inputs.push_back(random_arg(input_types[i], 7 + i, 2.0f));
  const Compiled plain = compile_at(build, 0, passes::JitLevel::kO0, {});
  EXPECT_EQ(plain.fused, 0u);
  const std::vector<TensorArg> level0 = run(plain, inputs, 1, false);
  std::vector<size_t> fused;
  for (int level = 1; level <= 3; ++level) {
    const Compiled c = compile_at(build, level, passes::JitLevel::kO1, force_expand);
    const Compiled unfused =
        compile_at(build, level, passes::JitLevel::kO1, force_expand, /*fuse=*/false);
    EXPECT_EQ(unfused.fused, 0u);
    const std::vector<TensorArg> want =
        force_expand.empty() ? level0 : run(unfused, inputs, 1, false);
    fused.push_back(c.fused);
    for (int threads : {1, 2, 3}) {
      for (bool sink : {false, true}) {
        const std::vector<TensorArg> got = run(c, inputs, threads, sink);
        EXPECT_EQ(got.size(), want.size());
        for (size_t k = 0; k < got.size() && k < want.size(); ++k) {
          EXPECT_TRUE(same_bits(got[k], want[k]))
              << "output " << k << " at opt_level " << level << ", " << threads << " threads, "
              << (sink ? "sink" : "kernel") << " executor\n"
              << ir::print_graph(*c.compiled.graph);
        }
      }
    }
  }
  return fused;
}

TEST(FusedKernelTest, ElementwiseChainWithBroadcastingIsBitIdentical) {
  // Odd sizes: several chunks, partial tiles and a scalar tail in every op.
  const TensorType x = f32({3, 40001}), b = f32({40001}), c = f32({3, 1});
  auto build = [&](Graph& g) {
    ir::Value px = g.add_parameter("x", x), pb = g.add_parameter("b", b);
    ir::Value pc = g.add_parameter("c", c);
    ir::Value half = g.add_constant<float>({}, {0.5f});
    ir::Value t = g.add_node("tanh", {g.add_node("add", {g.add_node("mul", {px, pb}), pc})});
    ir::Value e = g.add_node("mul", {g.add_node("exp", {px}), half});
    ir::Value s = g.add_node("sigmoid", {g.add_node("sub", {t, e})});
    g.add_output(g.add_node("gelu_tanh", {s}));
  };
  const auto fused = expect_fused_equals_unfused(build, {x, b, c});
  EXPECT_EQ(fused[0], 1u) << "one kernel for the whole chain at opt_level 1";
}

// Outputs of 8 MiB and more leave through a tile buffer and streaming stores: several outputs, one
// returned twice, and a length that leaves a partial tile and a tail shorter than one SIMD store.
TEST(FusedKernelTest, LargeOutputsStreamedAreBitIdentical) {
  const TensorType x = f32({2 * 1024 * 1024 + 1029});
  auto build = [&](Graph& g) {
    ir::Value px = g.add_parameter("x", x);
    ir::Value t = g.add_node("tanh", {g.add_node("mul", {px, px})});
    ir::Value y = g.add_node("sub", {t, g.add_node("sigmoid", {px})});
    g.add_output(y);
    g.add_output(g.add_node("neg", {t}));
    g.add_output(y);
  };
  const auto fused = expect_fused_equals_unfused(build, {x});
  EXPECT_GE(fused[0], 1u);
}

TEST(FusedKernelTest, ReduceTailAndSeveralOutputs) {
  const TensorType x = f32({129, 77});
  auto build = [&](Graph& g) {
    ir::Value px = g.add_parameter("x", x);
    ir::Value sq = g.add_node("mul", {px, g.add_node("exp", {px})});
    ir::Value sum = g.add_node("reduce_sum", {sq}, {{"axes", std::vector<int64_t>{1}}});
    g.add_output(sum);
    g.add_output(g.add_node("neg", {sq}));
  };
  const auto fused = expect_fused_equals_unfused(build, {x});
  EXPECT_GE(fused[1], 1u);
}

TEST(FusedKernelTest, SoftmaxAndLayerNormStitchBitIdentically) {
  const TensorType x = f32({100, 1024}), gamma = f32({1024}), beta = f32({1024});
  auto build = [&](Graph& g) {
    ir::Value px = g.add_parameter("x", x);
    ir::Value pg = g.add_parameter("gamma", gamma), pb = g.add_parameter("beta", beta);
    ir::Value soft = g.add_node("softmax", {px}, {{"axis", int64_t{-1}}});
    g.add_output(g.add_node("layer_norm", {soft, pg, pb}));
  };
  // layer_norm's expansion is not bit-exact against its own kernel (a vector sqrt per row for a
  // scalar one), so it is forced here and the fused kernels are compared with the expansion.
  const auto fused = expect_fused_equals_unfused(build, {x, gamma, beta}, {"layer_norm"});
  EXPECT_EQ(fused[2], 1u) << "softmax and layer_norm stitched into one kernel at opt_level 3";
  // By default softmax (rows of 1024) expands bit-exactly and layer_norm stays whole.
  expect_fused_equals_unfused(build, {x, gamma, beta});
}

TEST(FusedKernelTest, RejectsBodiesItCannotRun) {
  Graph body("body");
  ir::Value x = body.add_parameter("x", f32({4, 8}));
  body.add_output(body.add_node("matmul", {x, body.add_parameter("w", f32({8, 2}))}));
  EXPECT_NE(FusedKernel::unsupported(body).find("neither elementwise nor a reduction"),
            std::string::npos)
      << FusedKernel::unsupported(body);
}

}  // namespace
}  // namespace mf::runtime
