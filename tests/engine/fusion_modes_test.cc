// Every sample network at every fusion opt_level 0..3, at jit O1 and O2, equals PYNATIVE. Every
// level promises bit-identical results by default (expansion only where bit-exact, the fused
// kernels call the plain kernels' own math on the same SIMD/scalar split, reductions in the same
// order), so the comparison is of bytes, both sides under deterministic=ON; composites expanded by
// request (--enable_expand_ops) agree within 1e-5 relative.
//
// Equal values alone would also pass if no fusion happened, so each case also asserts the fusion
// that did: graph_kernel_flags (with --dump_as_text) reach the cell's compile, whose fusion passes
// report at the requested level which kernels formed and from which members; the kernel counts per
// network and level are listed below and change only with the fusion rules. A negative control
// shows the byte comparison catches a compile that is off by one ulp in one output.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "engine/graph/driver.h"
#include "engine/graph/trace.h"
#include "engine/models/registry.h"
#include "engine_fixture.h"
#include "passes/pass.h"
#include "tests/unique_temp_path.h"

namespace mf {
namespace {

namespace fs = std::filesystem;
using testing::EngineTest;
using testing::run_net;

struct FusionCase {
  std::string net;
  std::string jit_level;
  int opt_level;
};

// Fused kernels each network forms at opt_level 1, 2 and 3 (the same at jit O1 and O2): what the
// fusion passes do today. A rule change that alters them must update this table on purpose.
const std::map<std::string, std::array<int, 3>>& expected_fused_kernels() {
  static const std::map<std::string, std::array<int, 3>> table = {
      {"mlp", {2, 3, 3}},         {"cnn", {4, 5, 5}},           {"transformer", {0, 6, 6}},
      {"elementwise", {1, 1, 1}}, {"clamp_chain", {1, 1, 1}},   {"layernorm", {0, 0, 0}},
      {"softmax", {0, 0, 0}},     {"layernorm_ops", {3, 3, 1}}, {"softmax_ops", {1, 1, 1}},
      {"chain", {5, 5, 5}},       {"lenet5", {4, 5, 5}},
  };
  return table;
}

// The fusion passes that report at each opt_level.
std::set<std::string> expected_passes(int level) {
  std::set<std::string> passes;
  if (level >= 1) {
    passes.insert({"conv-epilogue-fusion", "elementwise-fusion", "expand-composite-ops"});
  }
  if (level >= 2) passes.insert("matmul-epilogue-fusion");
  if (level >= 3) passes.insert({"parallel-fusion", "stitch-fusion"});
  return passes;
}

// What the graph_kernel_dump/ reports under `dir` say: passes, their stated level, the kernels.
struct FusionDump {
  std::set<std::string> passes;
  std::set<int> levels;
  int kernels = 0;
  std::vector<std::string> problems;  // malformed kernel records
};

FusionDump read_fusion_dump(const fs::path& dir) {
  FusionDump dump;
  const fs::path reports = dir / "graph_kernel_dump";
  if (!fs::is_directory(reports)) return dump;
  const std::regex header(R"(# graph_kernel_dump: pass '([a-z-]+)' at fusion opt_level (\d+))");
  const std::regex members(R"(  members \((\d+)\): (.*))");
  for (const auto& entry : fs::directory_iterator(reports)) {
    std::ifstream in(entry.path());
    std::string kernel;
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_match(line, m, header)) {
        dump.passes.insert(m[1]);
        dump.levels.insert(std::stoi(m[2]));
      } else if (line.rfind("fused kernel ", 0) == 0) {
        ++dump.kernels;
        kernel = line;
      } else if (std::regex_match(line, m, members)) {
        // "a, b, c": as many names as the count says, and at least two (one op is no fusion).
        const int count = std::stoi(m[1]);
        const std::string list = m[2];
        const int listed = 1 + int(std::count(list.begin(), list.end(), ','));
        if (count < 2 || listed != count) {
          dump.problems.push_back(kernel + ": " + line);
        }
      }
    }
  }
  return dump;
}

class FusionModesTest : public EngineTest, public ::testing::WithParamInterface<FusionCase> {
 protected:
  fs::path dir_ = testing::unique_temp_path("mf_fusion_modes");
  void TearDown() override {
    EngineTest::TearDown();
    fs::remove_all(dir_);
  }
};

TEST_P(FusionModesTest, GraphAtEveryOptLevelEqualsPynativeBitForBitAndFuses) {
  const FusionCase& c = GetParam();
  const testing::NetRun eager =
      testing::run_net_reported(c.net, {{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
  const testing::NetRun graph = testing::run_net_reported(
      c.net,
      {{"mode", "GRAPH_MODE"},
       {"deterministic", "ON"},
       {"save_graphs_path", dir_.string()},
       {"jit_config", {{"jit_level", c.jit_level}}},
       {"graph_kernel_flags", "--opt_level=" + std::to_string(c.opt_level) + " --dump_as_text"}});
  EXPECT_EQ(graph.report.jit_level, c.jit_level);
  EXPECT_EQ(graph.report.fusion_level, c.opt_level);
  EXPECT_EQ(graph.report.executor, c.jit_level == "O2" ? "SinkExecutor" : "KernelExecutor");

  const FusionDump dump = read_fusion_dump(dir_);
  EXPECT_EQ(dump.passes, expected_passes(c.opt_level));
  if (c.opt_level > 0) EXPECT_EQ(dump.levels, std::set<int>{c.opt_level});
  const auto expected = expected_fused_kernels().find(c.net);
  ASSERT_NE(expected, expected_fused_kernels().end())
      << "no expected fusion listed for sample network " << c.net << "; add it to the table";
  EXPECT_EQ(dump.kernels, c.opt_level == 0 ? 0 : expected->second[size_t(c.opt_level - 1)]);
  for (const std::string& problem : dump.problems) ADD_FAILURE() << problem;

  EXPECT_EQ(testing::first_byte_difference(graph.outputs, eager.outputs), "") << c.net;
}

std::vector<FusionCase> all_cases() {
  std::vector<FusionCase> cases;
  for (const models::NetSpec& spec : models::all_nets()) {
    const std::string& net = spec.name;
    for (const char* jit : {"O1", "O2"}) {
      for (int level = 0; level <= 3; ++level) cases.push_back({net, jit, level});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllNetsOptLevels, FusionModesTest, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) {
                           return info.param.net + "_jit" + info.param.jit_level + "_opt" +
                                  std::to_string(info.param.opt_level);
                         });

// The negative control of the comparison above: a pass that moves one output by a single ulp
// (multiplies it by 1 + 2^-23, where the output is nonzero) must make the GRAPH run differ from
// PYNATIVE in first_byte_difference, and a pass that changes nothing must not. If this control
// passed with the broken pass, the modes comparison could miss a broken compile.
class OneUlpUp final : public passes::Pass {
 public:
  std::string_view name() const override { return "test-one-ulp-up"; }
  bool run(ir::Graph& graph) override {
    ir::Constant* factor = graph.add_constant<float>({}, {std::nextafter(1.0f, 2.0f)});
    graph.set_output(0, graph.add_node("mul", {graph.outputs()[0], factor})->output());
    return true;
  }
};

class Unchanged final : public passes::Pass {
 public:
  std::string_view name() const override { return "test-unchanged"; }
  bool run(ir::Graph&) override { return false; }
};

using FusionModesControlTest = EngineTest;

std::vector<double> graph_run_with(const std::string& net_name, passes::PassFactory extra) {
  context::set({{"mode", "GRAPH_MODE"}, {"deterministic", "ON"}});
  const context::Snapshot snapshot = context::snapshot();
  const context::Policy policy = context::derive_policy(snapshot);
  const models::NetSpec& spec = models::find_net(net_name);
  auto net = spec.make(0);
  const Tensor x = spec.make_input(0);
  engine::TraceResult trace = engine::Tracer::trace(*net, x, policy.max_call_depth.value,
                                                    policy.reserve_class_name_in_scope.value);
  engine::DriverOptions options = engine::driver_options(policy, net_name);
  options.compile.extra_passes.push_back(std::move(extra));
  auto network = engine::compile(std::move(trace.graph), x.type(), policy,
                                 context::fingerprint(snapshot, policy), options);
  std::vector<runtime::TensorArg> out = engine::run(
      *network, engine::bind_inputs(*net, trace.bindings, x), policy, snapshot, net_name);
  return engine::tensor_of(std::move(out.at(0))).to_doubles();
}

TEST_F(FusionModesControlTest, AOneUlpChangeFromABrokenPassIsCaughtAndNoChangeIsNot) {
  const std::vector<double> eager =
      testing::run_net("mlp", {{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
  EXPECT_NE(testing::first_byte_difference(
                graph_run_with("mlp", [] { return std::make_unique<OneUlpUp>(); }), eager),
            "")
      << "a one-ulp change went unnoticed";
  EXPECT_EQ(testing::first_byte_difference(
                graph_run_with("mlp", [] { return std::make_unique<Unchanged>(); }), eager),
            "");
}

class FusionToleranceTest : public EngineTest {};

// Forced expansions change rounding (a scalar log per row becomes a vector log, a row kernel's
// sums become tensor-wide reductions); the stated bound is 1e-5 relative plus 1e-6 absolute.
TEST_F(FusionToleranceTest, ForcedExpansionsStayWithinTheStatedTolerance) {
  for (const char* net : {"transformer", "softmax", "layernorm"}) {
    const std::vector<double> eager = run_net(net, {{"mode", "PYNATIVE_MODE"}});
    for (int level = 1; level <= 3; ++level) {
      const std::vector<double> graph = run_net(
          net, {{"mode", "GRAPH_MODE"},
                {"jit_config", {{"jit_level", "O1"}}},
                {"graph_kernel_flags",
                 "--opt_level=" + std::to_string(level) +
                     " --enable_expand_ops=softmax,log_softmax,layer_norm,gelu_tanh,bias_add"}});
      ASSERT_EQ(graph.size(), eager.size());
      for (size_t i = 0; i < eager.size(); ++i) {
        ASSERT_LE(std::abs(graph[i] - eager[i]), 1e-5 * std::abs(eager[i]) + 1e-6)
            << net << " at opt_level " << level << ", element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace mf
