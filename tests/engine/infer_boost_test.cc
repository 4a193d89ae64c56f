// jit_config.infer_boost=on: weights are compiled in as constants, the outputs stay the bits of
// PYNATIVE (deterministic=ON) on every sample network, a replaced weight recompiles rather than
// running with the old values, and the compile cache tells weight sets apart.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/graph/graph_mode.h"
#include "engine/models/registry.h"
#include "engine/nn/cell.h"
#include "engine_fixture.h"

namespace mf {
namespace {

using testing::EngineTest;
using testing::run_net;

class InferBoostNetsTest : public EngineTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(InferBoostNetsTest, SameBitsAsPynative) {
  const std::vector<double> eager =
      run_net(GetParam(), {{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
  for (const char* level : {"O0", "O1", "O2"}) {
    const std::vector<double> boosted =
        run_net(GetParam(), {{"mode", "GRAPH_MODE"},
                             {"deterministic", "ON"},
                             {"jit_config", {{"jit_level", level}, {"infer_boost", "on"}}}});
    ASSERT_EQ(boosted.size(), eager.size());
    EXPECT_EQ(std::memcmp(boosted.data(), eager.data(), eager.size() * sizeof(double)), 0)
        << GetParam() << " at " << level;
  }
}

std::vector<std::string> net_names() {
  std::vector<std::string> names;
  for (const models::NetSpec& spec : models::all_nets()) names.push_back(spec.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllNets, InferBoostNetsTest, ::testing::ValuesIn(net_names()),
                         [](const auto& info) { return info.param; });

TEST_F(EngineTest, InferBoostCompilesWeightsInAndAReplacedWeightRecompiles) {
  context::set({{"mode", "GRAPH_MODE"},
                {"deterministic", "ON"},
                {"jit_config", {{"jit_level", "O1"}, {"infer_boost", "on"}}}});
  const models::NetSpec& spec = models::find_net("cnn");
  auto net = spec.make(0);
  const Tensor x = spec.make_input(0);
  const std::vector<double> first = (*net)(x).to_doubles();
  EXPECT_TRUE(net->graph_report().compiled);
  EXPECT_GT(net->graph_report().frozen_weight_bytes, 0u);
  (*net)(x);
  EXPECT_FALSE(net->graph_report().compiled) << "the same weights reuse the compiled graph";

  // Other weights: the frozen graph no longer fits; the call compiles again and its output is
  // what PYNATIVE gives with the new weights.
  const auto [name, old_weight] = net->named_parameters().front();
  net->set_parameter(name, Tensor::uniform(old_weight.shape(), -0.5, 0.5, 99));
  const std::vector<double> replaced = (*net)(x).to_doubles();
  EXPECT_TRUE(net->graph_report().compiled);
  EXPECT_NE(net->graph_report().recompile_reason.find("weight"), std::string::npos)
      << net->graph_report().recompile_reason;
  EXPECT_NE(replaced, first);
  context::set({{"mode", "PYNATIVE_MODE"}});
  const std::vector<double> eager = (*net)(x).to_doubles();
  ASSERT_EQ(eager.size(), replaced.size());
  EXPECT_EQ(std::memcmp(eager.data(), replaced.data(), eager.size() * sizeof(double)), 0);
}

TEST_F(EngineTest, InferBoostOffBindsWeightsAtEveryRun) {
  context::set({{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", "O1"}}}});
  const models::NetSpec& spec = models::find_net("mlp");
  auto net = spec.make(0);
  const Tensor x = spec.make_input(0);
  const std::vector<double> first = (*net)(x).to_doubles();
  EXPECT_EQ(net->graph_report().frozen_weight_bytes, 0u);
  const auto [name, old_weight] = net->named_parameters().front();
  net->set_parameter(name, Tensor::uniform(old_weight.shape(), -0.5, 0.5, 99));
  EXPECT_NE((*net)(x).to_doubles(), first);
  EXPECT_FALSE(net->graph_report().compiled) << "weights are parameters: no recompile";
}

}  // namespace
}  // namespace mf
