// SinkExecutor honours inter_op_parallelism: independent steps of a sunk graph run at
// once, each step exactly once, with the same bits as the serial loop.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "ir/graph.h"
#include "ir/verifier.h"
#include "passes/plan_memory.h"
#include "runtime/graph_executor.h"
#include "runtime/memory_pool.h"
#include "tests/runtime/tensor_args.h"

namespace mf::runtime {
namespace {

using testing::f32;
using testing::random_arg;

using ir::DType;
using ir::Graph;
using ir::TensorType;

std::shared_ptr<const Plan> plan_of(const Graph& g, passes::MemoryLevel level) {
  ir::verify(g);
  passes::CompileOptions options;
  options.memory_level = level;
  return std::make_shared<Plan>(passes::plan_memory(g, options));
}

// Two independent branches joined at the end.
std::unique_ptr<Graph> two_branches() {
  auto g = std::make_unique<Graph>("branches");
  auto* x = g->add_parameter("x", f32({64, 64}));
  auto* w = g->add_parameter("w", f32({64, 64}), true);
  auto* a = g->add_node("sigmoid", {g->add_node("matmul", {x, w})});
  auto* b = g->add_node("relu", {g->add_node("matmul", {w, x})});
  g->add_output(g->add_node("add", {a, b}));
  return g;
}

bool same_bits(const TensorArg& a, const TensorArg& b) {
  const size_t n = ir::num_elements(a.type.shape) * ir::dtype_size(a.type.dtype);
  return a.type == b.type && std::memcmp(a.buffer->data(), b.buffer->data(), n) == 0;
}

// With two workers, each branch's matmul waits until the other's has finished too: only
// concurrent execution lets both get there, so finishing at all proves the overlap (the bound
// only turns a regression into a failure instead of a hang; no clock decides a pass).
TEST(SinkInterOpTest, IndependentStepsRunAtOnce) {
  auto g = two_branches();
  const std::vector<TensorArg> inputs = {random_arg(f32({64, 64}), 1),
                                         random_arg(f32({64, 64}), 2)};
  std::mutex mutex;
  std::condition_variable changed;
  std::set<int64_t> finished;
  bool both_seen = true;
  RunOptions options;
  options.inter_op_parallelism = 2;
  options.deterministic = true;
  options.on_step = [&](const ir::Node& node) {
    if (node.op() != "matmul") return;
    std::unique_lock lock(mutex);
    finished.insert(node.id());
    changed.notify_all();
    if (!changed.wait_for(lock, std::chrono::minutes(2), [&] { return finished.size() == 2; })) {
      both_seen = false;
    }
  };
  auto executor = make_sink_executor(plan_of(*g, passes::MemoryLevel::kO1));
  executor->run(inputs, options);
  EXPECT_TRUE(both_seen) << "the branches' matmuls never ran at once";
  EXPECT_EQ(finished.size(), 2u);
}

// With one worker every step runs on the calling thread, one after another.
TEST(SinkInterOpTest, OneWorkerRunsEveryStepOnTheCaller) {
  auto g = two_branches();
  const std::vector<TensorArg> inputs = {random_arg(f32({64, 64}), 1),
                                         random_arg(f32({64, 64}), 2)};
  std::set<std::thread::id> threads;
  int steps = 0;
  RunOptions options;
  options.inter_op_parallelism = 1;
  options.deterministic = true;
  options.on_step = [&](const ir::Node&) {
    threads.insert(std::this_thread::get_id());
    ++steps;
  };
  auto executor = make_sink_executor(plan_of(*g, passes::MemoryLevel::kO1));
  executor->run(inputs, options);
  EXPECT_EQ(steps, 5);
  EXPECT_EQ(threads, std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST(SinkInterOpTest, ParallelRunsGiveTheSerialBitsEveryTime) {
  auto g = two_branches();
  const std::vector<TensorArg> inputs = {random_arg(f32({64, 64}), 3),
                                         random_arg(f32({64, 64}), 4)};
  for (auto level : {passes::MemoryLevel::kO0, passes::MemoryLevel::kO1}) {
    RunOptions serial;
    serial.deterministic = true;
    RunOptions parallel = serial;
    parallel.inter_op_parallelism = 2;
    const auto expected = make_sink_executor(plan_of(*g, level))->run(inputs, serial);
    auto sink = make_sink_executor(plan_of(*g, level));
    std::atomic<int> steps{0};
    parallel.on_step = [&](const ir::Node&) { ++steps; };
    constexpr int kRuns = 200;
    for (int i = 0; i < kRuns; ++i) {
      const auto got = sink->run(inputs, parallel);
      ASSERT_TRUE(same_bits(got[0], expected[0])) << "run " << i;
    }
    EXPECT_EQ(steps.load(), kRuns * 5);  // every step exactly once per run
  }
}

}  // namespace
}  // namespace mf::runtime
