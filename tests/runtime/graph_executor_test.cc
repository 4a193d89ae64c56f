// KernelExecutor and SinkExecutor on real ops: every executor and memory level gives the same bits,
// control flow (call/cond/while, max_call_depth), input checks, error context and allocation reuse.

#include "runtime/graph_executor.h"
#include "tests/runtime/tensor_args.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "base/error.h"
#include "ir/graph.h"
#include "ir/verifier.h"
#include "passes/plan_memory.h"
#include "runtime/kernels/print_sink.h"
#include "runtime/storage.h"

namespace mf::runtime {
namespace {

using testing::f32;
using testing::make_arg;
using testing::random_arg;

using ir::DType;
using ir::Graph;
using ir::TensorType;

std::vector<float> values_of(const TensorArg& arg) {
  std::vector<float> out(ir::num_elements(arg.type.shape));
  std::memcpy(out.data(), arg.buffer->data(), out.size() * sizeof(float));
  return out;
}

bool same_bits(const TensorArg& a, const TensorArg& b) {
  const size_t n = ir::num_elements(a.type.shape) * ir::dtype_size(a.type.dtype);
  return a.type == b.type && std::memcmp(a.buffer->data(), b.buffer->data(), n) == 0;
}

std::shared_ptr<const Plan> plan_of(const Graph& g, passes::MemoryLevel level, bool reuse = true) {
  ir::verify(g);
  passes::CompileOptions options;
  options.memory_level = level;
  options.memory_reuse = reuse;
  return std::make_shared<Plan>(passes::plan_memory(g, options));
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// A small MLP with a side branch, a reshape, a print and two outputs: enough independent work for
// inter-op parallelism and enough dying intermediates for reuse and in-place.
std::unique_ptr<Graph> mlp_graph() {
  auto g = std::make_unique<Graph>("mlp");
  auto* x = g->add_parameter("x", f32({8, 16}));
  auto* w1 = g->add_parameter("w1", f32({16, 32}), true);
  auto* w2 = g->add_parameter("w2", f32({32, 4}), true);
  auto* h = g->add_node("matmul", {x, w1});
  auto* r = g->add_node("relu", {h});
  auto* s = g->add_node("mul", {r, r});
  auto* side = g->add_node("sigmoid", {h});
  auto* t = g->add_node("add", {s, side});
  auto* y = g->add_node("matmul", {t, w2});
  auto* flat = g->add_node("reshape", {y}, {{"shape", std::vector<int64_t>{32}}});
  auto* printed = g->add_node("print", {flat}, {{"prefix", std::string("y:")}});
  auto* c = g->add_constant<float>({}, {0.5f});
  auto* z = g->add_node("mul", {printed, c});
  g->add_output(z);
  g->add_output(y);
  return g;
}

class GraphExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_unique<ops::ScopedPrintSink>(
        [this](std::string_view, const ir::TensorView&) { ++prints_; });
  }
  std::unique_ptr<ops::ScopedPrintSink> sink_;
  int prints_ = 0;
};

// Regression: the scheduler used to scan for roots while launched roots were already releasing
// their successors, so a step could run twice (seen as an extra print under load).
TEST_F(GraphExecutorTest, InterOpParallelRunsEveryStepExactlyOnce) {
  auto g = mlp_graph();
  std::vector<TensorArg> inputs = {random_arg(f32({8, 16}), 1), random_arg(f32({16, 32}), 2),
                                   random_arg(f32({32, 4}), 3)};
  RunOptions parallel;
  parallel.inter_op_parallelism = 2;
  auto executor = make_kernel_executor(plan_of(*g, passes::MemoryLevel::kO1));
  constexpr int kRuns = 300;
  for (int i = 0; i < kRuns; ++i) executor->run(inputs, parallel);
  EXPECT_EQ(prints_, kRuns);
}

// A chain (each step the only reader of the last) runs on one thread even with inter-op
// parallelism: a step's ready successor continues on the thread that finished it, instead of
// becoming a task any thread may take (a thread hop, and the task's overhead, per step).
TEST(GraphExecutorChainTest, AChainRunsOnOneThreadWithInterOpParallelism) {
  auto g = std::make_unique<Graph>("chain");
  ir::Value v = g->add_parameter("x", f32({64}));
  for (int i = 0; i < 12; ++i) {
    v = g->add_node("relu", {v})->output();
    v = g->add_node("print", {v}, {{"prefix", std::string("step")}})->output();
  }
  g->add_output(v);
  std::vector<std::thread::id> threads;
  ops::ScopedPrintSink sink([&](std::string_view, const ir::TensorView&) {
    threads.push_back(std::this_thread::get_id());  // steps of a chain never overlap
  });
  RunOptions parallel;
  parallel.inter_op_parallelism = 2;
  const auto plan = plan_of(*g, passes::MemoryLevel::kO0);
  std::vector<TensorArg> inputs = {random_arg(f32({64}), 1)};
  for (auto& executor : {make_kernel_executor(plan), make_sink_executor(plan)}) {
    for (int run = 0; run < 50; ++run) {
      threads.clear();
      executor->run(inputs, parallel);
      ASSERT_EQ(threads.size(), 12u) << executor->name();
      for (const std::thread::id& id : threads) {
        ASSERT_EQ(id, threads.front()) << executor->name() << ", run " << run;
      }
    }
  }
}

TEST_F(GraphExecutorTest, AllExecutorsAgreeBitForBit) {
  auto g = mlp_graph();
  std::vector<TensorArg> inputs = {random_arg(f32({8, 16}), 1), random_arg(f32({16, 32}), 2),
                                   random_arg(f32({32, 4}), 3)};
  auto o0 = plan_of(*g, passes::MemoryLevel::kO0);
  auto o1 = plan_of(*g, passes::MemoryLevel::kO1);
  RunOptions serial;
  serial.deterministic = true;
  RunOptions parallel = serial;
  parallel.inter_op_parallelism = 2;
  const auto expected = make_kernel_executor(o0)->run(inputs, serial);
  ASSERT_EQ(expected.size(), 2u);
  EXPECT_EQ(expected[0].type, f32({32}));

  std::vector<std::pair<std::string, std::vector<TensorArg>>> runs;
  runs.emplace_back("kernel O1", make_kernel_executor(o1)->run(inputs, serial));
  runs.emplace_back("kernel O0 inter-op 2", make_kernel_executor(o0)->run(inputs, parallel));
  runs.emplace_back("kernel O1 inter-op 2", make_kernel_executor(o1)->run(inputs, parallel));
  runs.emplace_back("sink O1", make_sink_executor(o1)->run(inputs, serial));
  runs.emplace_back("sink O0", make_sink_executor(o0)->run(inputs, serial));
  auto sink = make_sink_executor(o1);
  sink->run(inputs, serial);
  runs.emplace_back("sink O1 second run", sink->run(inputs, serial));
  for (const auto& [name, outputs] : runs) {
    SCOPED_TRACE(name);
    ASSERT_EQ(outputs.size(), expected.size());
    for (size_t k = 0; k < outputs.size(); ++k) EXPECT_TRUE(same_bits(outputs[k], expected[k]));
  }
  EXPECT_EQ(prints_, 1 + static_cast<int>(runs.size()) + 1);

  // The math itself: z = 0.5 * reshape(matmul(relu(h)^2 + sigmoid(h), w2)).
  const std::vector<float> y = values_of(expected[1]);
  const std::vector<float> z = values_of(expected[0]);
  for (size_t i = 0; i < z.size(); ++i) EXPECT_EQ(z[i], y[i] * 0.5f);
}

TEST_F(GraphExecutorTest, ManyRandomRunsInParallelMatchSerial) {
  // A wide graph: many independent branches that reuse arena bytes; races would show as mismatches.
  Graph g("wide");
  auto* x = g.add_parameter("x", f32({64, 64}));
  ir::Value acc = x;
  for (int layer = 0; layer < 4; ++layer) {
    std::vector<ir::Value> branches;
    for (int b = 0; b < 4; ++b) {
      auto* m = g.add_node("matmul", {acc, acc});
      auto* t = g.add_node(b % 2 == 0 ? "tanh" : "sigmoid", {m});
      branches.push_back(g.add_node("neg", {t}));
    }
    ir::Value sum = branches[0];
    for (int b = 1; b < 4; ++b) sum = g.add_node("add", {sum, branches[b]});
    acc = g.add_node("mul", {sum, g.add_constant<float>({}, {0.125f})});
  }
  g.add_output(acc);
  auto plan = plan_of(g, passes::MemoryLevel::kO1);
  std::vector<TensorArg> inputs = {random_arg(f32({64, 64}), 7)};
  RunOptions serial;
  serial.deterministic = true;
  const auto expected = make_kernel_executor(plan)->run(inputs, serial);
  RunOptions parallel = serial;
  parallel.inter_op_parallelism = 4;
  auto executor = make_kernel_executor(plan);
  for (int i = 0; i < 20; ++i) {
    const auto got = executor->run(inputs, parallel);
    ASSERT_TRUE(same_bits(got[0], expected[0])) << "run " << i;
  }
}

// 20 layers of v = tanh(v) + neg(v) on 1 MiB tensors: 60 MiB of intermediates in all, but at most
// four alive at once.
std::unique_ptr<Graph> long_chain_graph() {
  auto g = std::make_unique<Graph>("long_chain");
  ir::Value v = g->add_parameter("x", f32({512, 512}));
  for (int layer = 0; layer < 20; ++layer) {
    auto* a = g->add_node("tanh", {v});
    auto* b = g->add_node("neg", {v});
    v = g->add_node("add", {a, b});
  }
  g->add_output(v);
  return g;
}

// Only freeing each tensor after its last reader (memory O0) or reusing planned bytes (O1) fits the
// limit: the sum of the intermediates is 7.5 times it. Both executors (KernelExecutor, and the
// SinkExecutor of jit O2, which once kept every pooled intermediate across runs).
TEST_F(GraphExecutorTest, SmallLiveSetFitsALimitFarBelowTheSumOfIntermediates) {
  constexpr size_t kMiB = size_t(1) << 20;
  auto g = long_chain_graph();
  const std::vector<TensorArg> inputs = {random_arg(f32({512, 512}), 7)};
  const auto expected =
      make_kernel_executor(plan_of(*g, passes::MemoryLevel::kO0))->run(inputs, {});
  for (auto level : {passes::MemoryLevel::kO0, passes::MemoryLevel::kO1}) {
    auto plan = plan_of(*g, level);
    EXPECT_GE(plan->planned_peak_bytes, 2 * kMiB);
    EXPECT_LE(plan->planned_peak_bytes, 4 * kMiB) << plan->memory_regime();
    for (bool sink : {false, true}) {
      for (int parallelism : {1, 2}) {
        auto pool = make_memory_pool({.max_bytes = 8 * kMiB, .block_bytes = 8 * kMiB});
        RunOptions options;
        options.pool = pool.get();
        options.inter_op_parallelism = parallelism;
        auto executor = sink ? make_sink_executor(plan) : make_kernel_executor(plan);
        const std::string what = std::string(executor->name()) + ", " +
                                 std::string(plan->memory_regime()) + ", inter-op " +
                                 std::to_string(parallelism);
        for (int run = 0; run < 3; ++run) {
          const auto got = executor->run(inputs, options);
          ASSERT_TRUE(same_bits(got[0], expected[0])) << what << ", run " << run;
        }
        const MemoryStats stats = pool->stats();
        EXPECT_LE(stats.peak_in_use_bytes, 5 * kMiB) << what;
        EXPECT_EQ(stats.system_allocations, 1u) << what;
        // Between runs only the arena (O1) stays allocated: no intermediate is kept.
        EXPECT_LE(stats.in_use_bytes, plan->arena_bytes) << what;
      }
    }
  }
}

TEST_F(GraphExecutorTest, InputTypeMismatchNamesParameter) {
  auto g = mlp_graph();
  auto executor = make_kernel_executor(plan_of(*g, passes::MemoryLevel::kO0));
  std::vector<TensorArg> inputs = {random_arg(f32({8, 15}), 1), random_arg(f32({16, 32}), 2),
                                   random_arg(f32({32, 4}), 3)};
  const std::string msg = error_of([&] { executor->run(inputs, {}); });
  EXPECT_NE(msg.find("parameter 'x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("declared <Tensor[Float32], (8, 16)>"), std::string::npos) << msg;
  EXPECT_NE(msg.find("given <Tensor[Float32], (8, 15)>"), std::string::npos) << msg;
  auto sink = make_sink_executor(plan_of(*g, passes::MemoryLevel::kO1));
  EXPECT_NE(error_of([&] { sink->run(inputs, {}); }).find("parameter 'x'"), std::string::npos);
  inputs.pop_back();
  EXPECT_NE(error_of([&] { executor->run(inputs, {}); }).find("takes 3 inputs, got 2"),
            std::string::npos);
}

TEST_F(GraphExecutorTest, KernelErrorNamesNodeAndExecutorStaysUsable) {
  Graph g("bad");
  auto* x = g.add_parameter("x", f32({4}));
  auto* y = g.add_node("relu", {x}, {}, {"Default/net-Bad", "bad.cc:7"});
  g.add_output(y);
  auto plan = plan_of(g, passes::MemoryLevel::kO0);
  // A pool too small for the relu output makes the step fail with OutOfMemory naming the op.
  auto pool = make_memory_pool({.max_bytes = 8, .block_bytes = 8});
  RunOptions tiny;
  tiny.pool = pool.get();
  auto executor = make_kernel_executor(plan);
  std::vector<TensorArg> inputs = {make_arg(f32({4}), {1, -2, 3, -4})};
  const std::string msg = error_of([&] { executor->run(inputs, tiny); });
  EXPECT_NE(msg.find("relu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at node %0 = relu(%para1_x)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Default/net-Bad"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bad.cc:7"), std::string::npos) << msg;
  // Usable afterwards with a pool that has room.
  const auto out = executor->run(inputs, {});
  EXPECT_EQ(values_of(out[0]), (std::vector<float>{1, 0, 3, 0}));
}

// main(p, x) = cond(p, x) with then: x * 2, else: -x.
TEST_F(GraphExecutorTest, CondRunsEitherBranch) {
  Graph g("main");
  auto* p = g.add_parameter("p", {DType::kBool, {}});
  auto* x = g.add_parameter("x", f32({3}));
  Graph* then_g = g.add_subgraph("double");
  auto* tx = then_g->add_parameter("x", f32({3}));
  then_g->add_output(then_g->add_node("add", {tx, tx}));
  Graph* else_g = g.add_subgraph("negate");
  else_g->add_output(else_g->add_node("neg", {else_g->add_parameter("x", f32({3}))}));
  auto* c = g.create_node(
      nullptr, "cond", {p, x},
      {{"then_branch", std::string("double")}, {"else_branch", std::string("negate")}}, {f32({3})});
  g.add_output(g.add_node("relu", {c}));
  for (auto level : {passes::MemoryLevel::kO0, passes::MemoryLevel::kO1}) {
    auto plan = plan_of(g, level);
    for (bool sink : {false, true}) {
      auto executor = sink ? make_sink_executor(plan) : make_kernel_executor(plan);
      for (bool pred : {true, false}) {
        TensorArg parg{{DType::kBool, {}}, default_pool().allocate(64, "test")};
        *static_cast<bool*>(parg.buffer->data()) = pred;
        std::vector<TensorArg> inputs = {parg, make_arg(f32({3}), {1, -2, 3})};
        const auto out = executor->run(inputs, {});
        EXPECT_EQ(values_of(out[0]),
                  pred ? (std::vector<float>{2, 0, 6}) : (std::vector<float>{0, 2, 0}))
            << executor->name() << " pred " << pred;
      }
    }
  }
}

// x = x * 2 while sum(x) < 1024, from ones(1): ten iterations give 1024.
TEST_F(GraphExecutorTest, WhileLoopRunsTenIterations) {
  Graph g("main");
  auto* x = g.add_parameter("x", f32({2}));
  Graph* cond = g.add_subgraph("not_done");
  auto* cx = cond->add_parameter("x", f32({2}));
  auto* first = cond->add_node("reduce_max", {cx}, {{"axes", std::vector<int64_t>{0}}});
  cond->add_output(cond->add_node("less", {first, cond->add_constant<float>({}, {1000.0f})}));
  Graph* body = g.add_subgraph("twice");
  auto* bx = body->add_parameter("x", f32({2}));
  body->add_output(body->add_node("mul", {bx, body->add_constant<float>({}, {2.0f})}));
  auto* loop = g.create_node(
      nullptr, "while", {x},
      {{"cond_graph", std::string("not_done")}, {"body_graph", std::string("twice")}}, {f32({2})});
  g.add_output(loop);
  int steps = 0;
  RunOptions options;
  options.on_step = [&](const ir::Node&) { ++steps; };
  for (auto level : {passes::MemoryLevel::kO0, passes::MemoryLevel::kO1}) {
    auto plan = plan_of(g, level);
    for (bool sink : {false, true}) {
      auto executor = sink ? make_sink_executor(plan) : make_kernel_executor(plan);
      std::vector<TensorArg> inputs = {make_arg(f32({2}), {1, 0.5f})};
      EXPECT_EQ(values_of(executor->run(inputs, options)[0]), (std::vector<float>{1024, 512}));
      // Already done: zero iterations return a copy of the input.
      std::vector<TensorArg> done = {make_arg(f32({2}), {2000, 1})};
      const auto out = executor->run(done, options);
      EXPECT_EQ(values_of(out[0]), (std::vector<float>{2000, 1}));
      EXPECT_NE(out[0].buffer, done[0].buffer);
    }
  }
  EXPECT_GT(steps, 4 * 10 * 3);  // on_step sees the subgraphs' steps too
}

// @f0 calls @f1 calls ... @f{n-1} (each adds 1): depth n.
std::unique_ptr<Graph> nested_calls(int n) {
  auto g = std::make_unique<Graph>("main");
  auto* x = g->add_parameter("x", f32({2}));
  std::vector<Graph*> fs;
  // Names appended, not "f" + std::to_string(i): GCC 12 warns (-Wrestrict, falsely) on that.
  auto name = [](int i) { return std::string("f").append(std::to_string(i)); };
  for (int i = 0; i < n; ++i) fs.push_back(g->add_subgraph(name(i)));
  for (int i = 0; i < n; ++i) {
    auto* px = fs[i]->add_parameter("x", f32({2}));
    ir::Value v = fs[i]->add_node("add", {px, fs[i]->add_constant<float>({}, {1.0f})});
    if (i + 1 < n) {
      v = fs[i]->create_node(nullptr, "call", {v}, {{"graph", name(i + 1)}}, {f32({2})});
    }
    fs[i]->add_output(v);
  }
  g->add_output(g->create_node(nullptr, "call", {x}, {{"graph", std::string("f0")}}, {f32({2})}));
  return g;
}

TEST_F(GraphExecutorTest, NestedCallsWithinMaxCallDepth) {
  auto g = nested_calls(5);
  auto plan = plan_of(*g, passes::MemoryLevel::kO1);
  RunOptions options;
  options.max_call_depth = 5;
  std::vector<TensorArg> inputs = {make_arg(f32({2}), {0, 10})};
  EXPECT_EQ(values_of(make_kernel_executor(plan)->run(inputs, options)[0]),
            (std::vector<float>{5, 15}));
  EXPECT_EQ(values_of(make_sink_executor(plan)->run(inputs, options)[0]),
            (std::vector<float>{5, 15}));
}

TEST_F(GraphExecutorTest, NestedCallsBeyondMaxCallDepthFail) {
  auto g = nested_calls(5);
  auto plan = plan_of(*g, passes::MemoryLevel::kO0);
  RunOptions options;
  options.max_call_depth = 4;
  std::vector<TensorArg> inputs = {make_arg(f32({2}), {0, 10})};
  for (bool sink : {false, true}) {
    auto executor = sink ? make_sink_executor(plan) : make_kernel_executor(plan);
    try {
      executor->run(inputs, options);
      FAIL() << "expected max_call_depth error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("call depth exceeds max_call_depth 4 at node"), std::string::npos) << msg;
      EXPECT_NE(msg.find("in graph @f3"), std::string::npos) << msg;
      EXPECT_NE(msg.find("raise max_call_depth or simplify the network"), std::string::npos);
    }
  }
}

// A recursive subgraph: @count(n) = cond(n < 100, n) then @step(n) = @count(n + 1), else n.
// Recursion depth grows with the count, so a small max_call_depth fails and a large one succeeds.
TEST_F(GraphExecutorTest, RecursionThroughNestedControlFlowIsBounded) {
  Graph g("main");
  auto* n = g.add_parameter("n", f32({}));
  Graph* count = g.add_subgraph("count");
  auto* cn = count->add_parameter("n", f32({}));
  auto* pred = count->add_node("less", {cn, count->add_constant<float>({}, {10.0f})});
  count->add_output(count->create_node(
      nullptr, "cond", {pred, cn},
      {{"then_branch", std::string("step")}, {"else_branch", std::string("done")}}, {f32({})}));
  Graph* step = g.add_subgraph("step");
  auto* sn = step->add_parameter("n", f32({}));
  auto* next = step->add_node("add", {sn, step->add_constant<float>({}, {1.0f})});
  step->add_output(
      step->create_node(nullptr, "call", {next}, {{"graph", std::string("count")}}, {f32({})}));
  Graph* done = g.add_subgraph("done");
  done->add_output(done->add_parameter("n", f32({})));
  g.add_output(g.create_node(nullptr, "call", {n}, {{"graph", std::string("count")}}, {f32({})}));
  auto plan = plan_of(g, passes::MemoryLevel::kO1);
  std::vector<TensorArg> inputs = {make_arg(f32({}), {0})};
  RunOptions options;
  EXPECT_EQ(values_of(make_kernel_executor(plan)->run(inputs, options)[0]),
            (std::vector<float>{10}));
  options.max_call_depth = 8;
  const std::string msg = error_of([&] { make_kernel_executor(plan)->run(inputs, options); });
  EXPECT_NE(msg.find("exceeds max_call_depth 8"), std::string::npos) << msg;
}

TEST_F(GraphExecutorTest, SecondSinkRunAllocatesNothingNewFromTheSystem) {
  auto g = mlp_graph();
  for (auto level : {passes::MemoryLevel::kO0, passes::MemoryLevel::kO1}) {
    auto pool = make_memory_pool({.max_bytes = size_t(1) << 30, .block_bytes = 4096});
    RunOptions options;
    options.pool = pool.get();
    std::vector<TensorArg> inputs = {random_arg(f32({8, 16}), 1), random_arg(f32({16, 32}), 2),
                                     random_arg(f32({32, 4}), 3)};
    auto sink = make_sink_executor(plan_of(*g, level));
    auto first = sink->run(inputs, options);
    first.clear();  // outputs go back to the pool
    const size_t before = pool->stats().system_allocations;
    const size_t in_use = pool->stats().in_use_bytes;
    auto second = sink->run(inputs, options);
    EXPECT_EQ(pool->stats().system_allocations, before);
    // Only the two outputs are new: 32 floats and 8x4 floats, 128 bytes each.
    EXPECT_EQ(pool->stats().in_use_bytes - in_use, 256u);
  }
}

TEST_F(GraphExecutorTest, OnStepSeesEveryNode) {
  auto g = mlp_graph();
  std::vector<std::string> ops;
  RunOptions options;
  options.on_step = [&](const ir::Node& node) { ops.push_back(node.op()); };
  std::vector<TensorArg> inputs = {random_arg(f32({8, 16}), 1), random_arg(f32({16, 32}), 2),
                                   random_arg(f32({32, 4}), 3)};
  make_sink_executor(plan_of(*g, passes::MemoryLevel::kO1))->run(inputs, options);
  EXPECT_EQ(ops.size(), g->num_nodes());
  EXPECT_EQ(ops.front(), "matmul");
  EXPECT_EQ(ops.back(), "mul");
}

}  // namespace
}  // namespace mf::runtime
