// Op by op, a graph file's kernels are made before its first op (as compiling makes them for a
// graph): the first run at a thread count prepares every node with a oneDNN primitive, later runs
// at that count prepare nothing, another count prepares again, and the outputs do not change. The
// graph's constants become tensors once, not on every run.

#include <gtest/gtest.h>

#include <thread>

#include "engine/eager/ir_runner.h"
#include "engine_fixture.h"
#include "ir/graph.h"

namespace mf {
namespace {

using IrRunnerPrepareTest = testing::EngineTest;

std::unique_ptr<ir::Graph> conv_then_matmul() {
  auto g = std::make_unique<ir::Graph>("main");
  const ir::TensorType f32x{DType::kFloat32, {1, 4, 8, 8}};
  const ir::TensorType f32w{DType::kFloat32, {8, 4, 3, 3}};
  ir::Value x = g->add_parameter("x", f32x);
  ir::Value w = g->add_parameter("w", f32w);
  ir::Value y = g->add_node("conv2d", {x, w},
                            {{"stride", std::vector<int64_t>{1, 1}},
                             {"padding", std::vector<int64_t>{1, 1}},
                             {"groups", int64_t{1}}})
                    ->output();
  y = g->add_node("relu", {y})->output();  // no primitive: not counted
  y = g->add_node("reshape", {y}, {{"shape", std::vector<int64_t>{8, 64}}})->output();
  ir::Value m = g->add_parameter("m", {DType::kFloat32, {64, 16}});
  g->add_output(g->add_node("matmul", {y, m})->output());
  return g;
}

TEST_F(IrRunnerPrepareTest, KernelsAreMadeBeforeTheFirstOpOncePerThreadCount) {
  context::set({{"runtime_num_threads", 1}});
  engine::IrRunner runner(conv_then_matmul());
  const std::vector<float> first = runner.run({}, 7).at(0).second.to_vector<float>();
  EXPECT_EQ(runner.eager_prepare_report().kernels, 2u);  // the convolution and the matmul
  EXPECT_GT(runner.eager_prepare_report().ms, 0.0);
  EXPECT_EQ(runner.run({}, 7).at(0).second.to_vector<float>(), first);
  EXPECT_EQ(runner.eager_prepare_report().kernels, 0u) << "made again at the same thread count";
  if (std::thread::hardware_concurrency() < 2) return;
  context::set({{"runtime_num_threads", 2}});
  runner.run({}, 7);
  EXPECT_EQ(runner.eager_prepare_report().kernels, 2u) << "a new thread count needs its own";
}

// A constant's tensor is made once per runner, not copied out of the graph on every run.
TEST_F(IrRunnerPrepareTest, ConstantsAreMadeOnceNotPerRun) {
  auto g = std::make_unique<ir::Graph>("main");
  ir::Value x = g->add_parameter("x", {DType::kFloat32, {4}});
  ir::Value c = g->add_constant<float>({4}, {1.f, 2.f, 3.f, 4.f});
  g->add_output(g->add_node("add", {x, c})->output());
  g->add_output(c);
  engine::IrRunner runner(std::move(g));
  const auto first = runner.run({}, 1);
  const auto second = runner.run({}, 1);
  EXPECT_EQ(first.at(1).second.raw_data(), second.at(1).second.raw_data());
  EXPECT_EQ(second.at(1).second.to_vector<float>(), (std::vector<float>{1.f, 2.f, 3.f, 4.f}));
  EXPECT_EQ(first.at(0).second.to_vector<float>(), second.at(0).second.to_vector<float>());
}

TEST_F(IrRunnerPrepareTest, CompiledRunsPrepareNothingOpByOp) {
  context::set({{"mode", "GRAPH_MODE"}});
  engine::IrRunner runner(conv_then_matmul());
  runner.run({}, 7);
  EXPECT_EQ(runner.eager_prepare_report().kernels, 0u);
  EXPECT_GT(runner.graph_report().prepared_kernels, 0u);  // the compiled form made them
}

}  // namespace
}  // namespace mf
