// SinkExecutor honours inter_op_parallelism (issue #15): independent steps of a sunk graph run at
// once, each step exactly once, with the same bits as the serial loop.

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <set>

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

TEST(SinkInterOpTest, IndependentStepsRunAtOnce) {
  auto g = two_branches();
  const std::vector<TensorArg> inputs = {random_arg(f32({64, 64}), 1),
                                         random_arg(f32({64, 64}), 2)};
  for (int parallelism : {1, 2}) {
    SCOPED_TRACE(parallelism);
    // Each branch's first step waits (bounded) until the other's has finished too: only
    // concurrent execution lets both see each other.
    std::mutex mutex;
    std::condition_variable changed;
    std::set<std::string> finished;
    bool overlapped = false;
    RunOptions options;
    options.inter_op_parallelism = parallelism;
    options.deterministic = true;
    options.on_step = [&](const ir::Node& node) {
      if (node.op() != "matmul") return;
      std::unique_lock lock(mutex);
      finished.insert(std::to_string(node.id()));
      changed.notify_all();
      // The first to finish waits for the other; run serially, the other cannot start meanwhile.
      if (finished.size() == 1 &&
          changed.wait_for(lock, std::chrono::seconds(2), [&] { return finished.size() == 2; })) {
        overlapped = true;
      }
    };
    auto executor = make_sink_executor(plan_of(*g, passes::MemoryLevel::kO1));
    executor->run(inputs, options);
    EXPECT_EQ(overlapped, parallelism == 2);
  }
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
