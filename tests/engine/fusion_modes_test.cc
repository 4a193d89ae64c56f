// Every sample network at every fusion opt_level 0..3, at jit O1 and O2, equals PYNATIVE. Every
// level promises bit-identical results by default (expansion only where bit-exact, the fused
// kernels call the plain kernels' own math on the same SIMD/scalar split, reductions in the same
// order), so the comparison is exact; composites expanded by request (--enable_expand_ops) agree
// within 1e-5 relative.

#include <gtest/gtest.h>

#include <cmath>

#include "engine/models/registry.h"
#include "engine_fixture.h"

namespace mf {
namespace {

using testing::EngineTest;
using testing::run_net;

struct FusionCase {
  std::string net;
  std::string jit_level;
  int opt_level;
};

class FusionModesTest : public EngineTest, public ::testing::WithParamInterface<FusionCase> {};

TEST_P(FusionModesTest, GraphAtEveryOptLevelEqualsPynativeBitForBit) {
  const FusionCase& c = GetParam();
  const std::vector<double> eager = run_net(c.net, {{"mode", "PYNATIVE_MODE"}});
  const std::vector<double> graph =
      run_net(c.net, {{"mode", "GRAPH_MODE"},
                      {"deterministic", "ON"},
                      {"jit_config", {{"jit_level", c.jit_level}}},
                      {"graph_kernel_flags", "--opt_level=" + std::to_string(c.opt_level)}});
  ASSERT_EQ(graph.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    ASSERT_EQ(graph[i], eager[i]) << c.net << " element " << i;
  }
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
