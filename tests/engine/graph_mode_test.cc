// The backbone: every sample network gives the same outputs in PYNATIVE and in GRAPH at every
// jit_level and memory level (bit for bit with deterministic=ON; kernels here split work in fixed
// chunks, so they are bit-identical even without it, and the test holds them to that), plus the
// GRAPH-mode contract: compile once per signature, recompile with a reason, JitConfig beats the
// global level, precompile_only, control flow, max_call_depth.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/engine_state.h"
#include "engine/graph/control_flow.h"
#include "engine/graph/graph_mode.h"
#include "engine/graph/jit.h"
#include "engine/models/registry.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine_fixture.h"

namespace mf {
namespace {

using testing::EngineTest;
using testing::run_net;

struct ModeCase {
  std::string net;
  std::string jit_level;
  std::string memory_level;
};

class ModesAgreeTest : public EngineTest, public ::testing::WithParamInterface<ModeCase> {};

TEST_P(ModesAgreeTest, GraphEqualsPynativeBitForBit) {
  const ModeCase& c = GetParam();
  // Both sides deterministic (kernels may pick other algorithms otherwise), compared as bytes:
  // +0 and -0, or two NaNs, are not "equal" here.
  const testing::NetRun eager =
      testing::run_net_reported(c.net, {{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
  const testing::NetRun graph =
      testing::run_net_reported(c.net, {{"mode", "GRAPH_MODE"},
                                        {"deterministic", "ON"},
                                        {"jit_config", {{"jit_level", c.jit_level}}},
                                        {"memory_optimize_level", c.memory_level}});
  // What ran: PYNATIVE compiled nothing; GRAPH compiled at the level asked for, with the executor
  // and memory regime that level and memory_optimize_level promise.
  EXPECT_TRUE(eager.report.executor.empty()) << eager.report.executor;
  EXPECT_FALSE(eager.report.compiled);
  EXPECT_TRUE(graph.report.compiled);
  EXPECT_TRUE(graph.report.ran);
  EXPECT_EQ(graph.report.jit_level, c.jit_level);
  EXPECT_EQ(graph.report.executor, c.jit_level == "O2" ? "SinkExecutor" : "KernelExecutor");
  EXPECT_EQ(graph.report.fusion_level, c.jit_level == "O0" ? 0 : 2);
  // memory_optimize_level O1 plans an arena for the intermediates. None are left in softmax and
  // layernorm (one op each), nor in the elementwise chains once fusion (jit O1, O2) makes each
  // one kernel.
  const bool no_intermediates =
      c.net == "softmax" || c.net == "layernorm" ||
      ((c.net == "elementwise" || c.net == "clamp_chain") && c.jit_level != "O0");
  const bool arena = c.memory_level == "O1" && !no_intermediates;
  EXPECT_EQ(graph.report.memory_regime, arena ? "planned arena" : "pooled, freed after last use");
  // `mf context explain` says what this run did: its executor line names the executor and the
  // memory the run used, at every executor x memory level.
  context::set({{"mode", "GRAPH_MODE"},
                {"jit_config", {{"jit_level", c.jit_level}}},
                {"memory_optimize_level", c.memory_level}});
  const std::string explained = engine::current_policy()->executor.reason;
  EXPECT_NE(explained.find(graph.report.executor), std::string::npos) << explained;
  EXPECT_NE(explained.find(c.memory_level == "O1" ? "one arena" : "from the pool"),
            std::string::npos)
      << explained;
  EXPECT_EQ(explained.find(c.memory_level == "O1" ? "from the pool" : "one arena"),
            std::string::npos)
      << explained;
  const std::string diff = testing::first_byte_difference(graph.outputs, eager.outputs);
  EXPECT_EQ(diff, "") << c.net;
}

std::vector<ModeCase> all_cases() {
  std::vector<ModeCase> cases;
  for (const models::NetSpec& spec : models::all_nets()) {
    const std::string& net = spec.name;
    for (const char* jit : {"O0", "O1", "O2"}) {
      for (const char* mem : {"O0", "O1"}) cases.push_back({net, jit, mem});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllNetsLevels, ModesAgreeTest, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) {
                           return info.param.net + "_jit" + info.param.jit_level + "_mem" +
                                  info.param.memory_level;
                         });

class GraphModeTest : public EngineTest {};

TEST_F(GraphModeTest, CompilesOncePerSignatureAndSaysWhyItRecompiles) {
  context::set({{"mode", "GRAPH_MODE"}});
  nn::Dense dense(8, 4, 1);
  dense(Tensor::randn({2, 8}, 1));
  EXPECT_TRUE(dense.graph_report().compiled);
  dense(Tensor::randn({2, 8}, 2));
  EXPECT_FALSE(dense.graph_report().compiled);
  dense(Tensor::randn({5, 8}, 2));
  EXPECT_TRUE(dense.graph_report().compiled);
  EXPECT_EQ(dense.graph_report().recompile_reason,
            "input x changed from <Tensor[Float32], (2, 8)> to <Tensor[Float32], (5, 8)>");
  context::set({{"jit_config", {{"jit_level", "O1"}}}});
  dense(Tensor::randn({5, 8}, 2));
  EXPECT_TRUE(dense.graph_report().compiled);
  EXPECT_NE(dense.graph_report().recompile_reason.find("compile settings changed"),
            std::string::npos);
  // Back to the first settings and shape: the cached form is reused.
  context::set({{"jit_config", {{"jit_level", ""}}}});
  dense(Tensor::randn({2, 8}, 3));
  EXPECT_FALSE(dense.graph_report().compiled);
}

TEST_F(GraphModeTest, ANetworksJitConfigBeatsTheGlobalLevel) {
  context::set({{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", "O0"}}}});
  nn::Dense dense(8, 4, 1);
  dense.set_jit_config({"O2"});
  dense(Tensor::randn({2, 8}, 1));
  EXPECT_EQ(dense.graph_report().executor, "SinkExecutor");
  dense.set_jit_config({});
  dense(Tensor::randn({2, 8}, 1));
  EXPECT_EQ(dense.graph_report().executor, "KernelExecutor");
  EXPECT_THROW(dense.set_jit_config({"O3"}), Error);
}

// A call reuses the policy derived at the last one, and the form it ran, only while the context's
// version, the network's own jit level and the input type are unchanged.
TEST_F(GraphModeTest, TheLastFormIsReusedOnlyWhileItsSettingsHold) {
  context::set({{"mode", "GRAPH_MODE"}});
  nn::Dense dense(8, 4, 1);
  const Tensor x = Tensor::randn({2, 8}, 1);
  const auto first = dense(x).to_doubles();
  EXPECT_EQ(dense(x).to_doubles(), first);
  EXPECT_FALSE(dense.graph_report().compiled);
  context::set({{"pynative_synchronize", true}});  // re-derived; not compile-relevant
  dense(x);
  EXPECT_FALSE(dense.graph_report().compiled);
  dense.set_jit_config({"O2"});  // no context change, a new level for this network
  dense(x);
  EXPECT_TRUE(dense.graph_report().compiled);
  EXPECT_EQ(dense.graph_report().executor, "SinkExecutor");
  dense(Tensor::randn({3, 8}, 1));
  EXPECT_TRUE(dense.graph_report().compiled);
  dense.set_jit_config({});
  EXPECT_EQ(dense(x).to_doubles(), first);
  EXPECT_FALSE(dense.graph_report().compiled);
  EXPECT_EQ(dense.graph_report().executor, "KernelExecutor");
  dense.clear_compiled();
  EXPECT_EQ(dense(x).to_doubles(), first);
  EXPECT_TRUE(dense.graph_report().compiled);
}

TEST_F(GraphModeTest, WeightsAreBoundAtEveryRunNotBakedIn) {
  context::set({{"mode", "GRAPH_MODE"}});
  nn::Dense dense(3, 2, 1);
  Tensor x = Tensor::ones({1, 3});
  const auto before = dense(x).to_doubles();
  dense.set_parameter("bias", Tensor::from_vector<float>({10, 20}, {2}));
  const auto after = dense(x).to_doubles();
  EXPECT_FALSE(dense.graph_report().compiled);
  EXPECT_NE(before, after);
  context::set({{"mode", "PYNATIVE_MODE"}});
  EXPECT_EQ(dense(x).to_doubles(), after);
}

TEST_F(GraphModeTest, PrecompileOnlyCompilesWithoutRunning) {
  context::set({{"mode", "GRAPH_MODE"}, {"precompile_only", true}});
  nn::Dense dense(8, 4, 1);
  Tensor y = dense(Tensor::randn({2, 8}, 1));
  EXPECT_FALSE(y.defined());
  EXPECT_TRUE(dense.graph_report().compiled);
  EXPECT_FALSE(dense.graph_report().ran);
}

TEST_F(GraphModeTest, SymbolicTensorsCannotBeReadWhileTracing) {
  context::set({{"mode", "GRAPH_MODE"}});
  auto peek = jit([](const Tensor& x) {
    Tensor y = ops::relu(x);
    y.to_vector<float>();
    return y;
  });
  try {
    peek(Tensor::ones({2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic"), std::string::npos) << e.what();
  }
}

Tensor piecewise(const Tensor& x) {
  Tensor total = ops::reduce_sum(x);
  return ops::cond(
      ops::greater(total, ops::scalar(0)), [&] { return ops::mul(x, ops::scalar(2)); },
      [&] { return ops::neg(x); });
}

TEST_F(GraphModeTest, CondTakesTheBranchTheDataChoosesInBothModes) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::set({{"mode", mode}});
    auto f = jit(piecewise);
    EXPECT_EQ(f(Tensor::from_vector<float>({1, 2}, {2})).to_vector<float>(),
              (std::vector<float>{2, 4}))
        << mode;
    EXPECT_EQ(f(Tensor::from_vector<float>({-1, -2}, {2})).to_vector<float>(),
              (std::vector<float>{1, 2}))
        << mode;
  }
}

TEST_F(GraphModeTest, WhileLoopRunsUntilItsConditionFailsInBothModes) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::set({{"mode", mode}});
    Tensor limit = Tensor::full({}, 100.0);  // captured from outside the loop
    auto f = jit([&](const Tensor& x) {
      return ops::while_loop(
                 [&](const std::vector<Tensor>& v) {
                   return ops::less(ops::reduce_max(v[0]), limit);
                 },
                 [](const std::vector<Tensor>& v) {
                   return std::vector<Tensor>{ops::mul(v[0], ops::scalar(2))};
                 },
                 {x})
          .front();
    });
    EXPECT_EQ(f(Tensor::from_vector<float>({1, 3}, {2})).to_vector<float>(),
              (std::vector<float>{64, 192}))
        << mode;
  }
}

// A compiled function that reads another cell's parameters binds them at every call, however
// small (a bias of two): an optimizer or set_data changes them in place, and a value copied into
// the graph at the first call would go stale without a word.
TEST_F(GraphModeTest, ACompiledFunctionSeesTheParametersItReadsChange) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::set({{"mode", mode}});
    nn::Dense dense(3, 2, 7);
    auto f = jit([&](const Tensor& x) { return dense(x); });
    const Tensor x = Tensor::from_vector<float>({1, 2, 3}, {1, 3});
    EXPECT_EQ(f(x).to_vector<float>(), dense(x).to_vector<float>()) << mode;
    for (auto& [name, tensor] : dense.named_parameters()) {
      Tensor t = tensor;
      auto* values = static_cast<float*>(t.mutable_raw_data());
      for (int64_t i = 0; i < t.numel(); ++i) values[i] += 100.0f;
    }
    const std::vector<float> want = dense(x).to_vector<float>();
    EXPECT_GT(want[0], 100.0f) << mode;
    EXPECT_EQ(f(x).to_vector<float>(), want) << mode;
    // A parameter replaced by another tensor is followed too.
    dense.set_parameter("bias", Tensor::from_vector<float>({-1, -2}, {2}));
    EXPECT_EQ(f(x).to_vector<float>(), dense(x).to_vector<float>()) << mode;
  }
}

// A cell that nests `depth` levels of itself.
class Nested : public nn::Cell {
 public:
  explicit Nested(int depth) : Cell("Nested") {
    if (depth > 0) inner_ = &register_child("inner", std::make_unique<Nested>(depth - 1));
  }
  Tensor forward(const Tensor& x) override {
    return inner_ ? (*inner_)(ops::relu(x)) : ops::neg(x);
  }

 private:
  Nested* inner_ = nullptr;
};

TEST_F(GraphModeTest, NestingBeyondMaxCallDepthFailsSayingWhere) {
  context::set({{"mode", "GRAPH_MODE"}, {"max_call_depth", 5}});
  Nested shallow(3);
  EXPECT_EQ(shallow(Tensor::ones({2})).to_vector<float>(), (std::vector<float>{-1, -1}));
  Nested deep(8);
  try {
    deep(Tensor::ones({2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds max_call_depth 5"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Default/net-Nested/inner-Nested"), std::string::npos)
        << e.what();
  }
}

TEST_F(GraphModeTest, InterOpParallelismGivesTheSameResults) {
  const auto serial =
      run_net("transformer", {{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", "O1"}}}});
  const auto parallel = run_net("transformer", {{"mode", "GRAPH_MODE"},
                                                {"jit_config", {{"jit_level", "O1"}}},
                                                {"inter_op_parallel_num", 2}});
  EXPECT_EQ(parallel, serial);
}

// Memory O0 frees each tensor after its last reader, so its planned peak is the live set; O1's
// arena with in-place reuse is never above it (on cnn both are the same live set).
TEST_F(GraphModeTest, MemoryLevelO1PlansNoMoreThanO0OnTransformerAndCnn) {
  for (const char* name : {"transformer", "cnn"}) {
    size_t peak[2];
    for (int level = 0; level < 2; ++level) {
      context::set({{"mode", "GRAPH_MODE"},
                    {"precompile_only", true},
                    {"memory_optimize_level", level ? "O1" : "O0"}});
      auto net = models::find_net(name).make(0);
      (*net)(models::find_net(name).make_input(0));
      peak[level] = net->graph_report().planned_peak_bytes;
    }
    EXPECT_LE(peak[1], peak[0]) << name;
  }
}

TEST_F(GraphModeTest, ShapeErrorsWhileTracingNameTheOpAndScope) {
  context::set({{"mode", "GRAPH_MODE"}});
  nn::Dense dense(8, 4, 1);
  auto bad = jit([&](const Tensor& x) { return ops::matmul(x, x); });
  try {
    bad(Tensor::ones({2, 3}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("while tracing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mf
