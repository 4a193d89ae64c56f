// Every sample network runs in PYNATIVE mode, asynchronously and synchronously, with the same
// result.

#include "engine/models/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engine/ops.h"
#include "engine_fixture.h"
#include "tests/tensor_bytes.h"

namespace mf {
namespace {

using testing::EngineTest;

class ModelsTest : public EngineTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ModelsTest, RunsWithFiniteOutputsAndTheSameResultSyncOrAsync) {
  const models::NetSpec& spec = models::find_net(GetParam());
  auto net = spec.make(0);
  Tensor x = spec.make_input(0);
  const Tensor async_out = (*net)(x);
  for (double v : async_out.to_doubles()) ASSERT_TRUE(std::isfinite(v));
  context::set({{"pynative_synchronize", true}});
  EXPECT_EQ(testing::bytes_of((*net)(x)), testing::bytes_of(async_out));
}

// A batch of 0 is an ordinary shape: every net computes its empty output in every mode, level and
// executor, with the batch-0 shape of its usual output.
TEST_P(ModelsTest, ABatchOfZeroRunsInEveryModeAndLevel) {
  const models::NetSpec& spec = models::find_net(GetParam());
  auto net = spec.make(0);
  const Tensor usual = spec.make_input(0);
  // A network whose input has no batch axis (a plain vector) has no batch to empty.
  if (usual.shape().size() < 2) return;
  Shape expected = (*net)(usual).shape();
  Shape empty_shape = usual.shape();
  empty_shape[0] = 0;
  expected[0] = 0;
  const Tensor empty = Tensor::zeros(empty_shape, usual.dtype());
  for (bool synchronous : {false, true}) {
    context::set({{"mode", "PYNATIVE_MODE"}, {"pynative_synchronize", synchronous}});
    EXPECT_EQ(spec.make(0)->operator()(empty).shape(), expected) << "PYNATIVE";
  }
  for (const char* level : {"O0", "O1", "O2"}) {
    for (int memory : {0, 1}) {
      for (int fusion : {0, 3}) {
        SCOPED_TRACE(std::string("GRAPH ") + level + " memory O" + std::to_string(memory) +
                     " fusion " + std::to_string(fusion));
        context::set({{"mode", "GRAPH_MODE"},
                      {"jit_config", {{"jit_level", level}}},
                      {"memory_optimize_level", memory == 0 ? "O0" : "O1"},
                      {"graph_kernel_flags", "--opt_level=" + std::to_string(fusion)}});
        const Tensor y = (*spec.make(0))(empty);
        EXPECT_EQ(y.shape(), expected);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllNets, ModelsTest,
                         ::testing::Values("mlp", "cnn", "transformer", "elementwise",
                                           "clamp_chain", "layernorm", "softmax", "layernorm_ops",
                                           "softmax_ops", "chain"));

TEST_F(EngineTest, TheRegistryListsEveryNetworkAndRejectsUnknownNames) {
  EXPECT_EQ(models::all_nets().size(), 11u);
  try {
    models::find_net("resnet");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("mlp, cnn, transformer"), std::string::npos) << e.what();
  }
}

TEST_F(EngineTest, OutputShapesAreTheDocumentedOnes) {
  EXPECT_EQ((*models::find_net("mlp").make(0))(models::find_net("mlp").make_input(0)).shape(),
            (Shape{64, 10}));
  EXPECT_EQ((*models::find_net("cnn").make(0))(models::find_net("cnn").make_input(0)).shape(),
            (Shape{32, 10}));
  auto& t = models::find_net("transformer");
  EXPECT_EQ((*t.make(0))(t.make_input(0)).shape(), (Shape{8, 128, 256}));
}

TEST_F(EngineTest, ElementwiseNetworkMatchesItsFormula) {
  auto& spec = models::find_net("elementwise");
  auto net = spec.make(0);
  Tensor x = ops::slice(spec.make_input(0), {0}, {1000});
  const auto xs = x.to_doubles(), ys = (*net)(x).to_doubles();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double u = xs[i] * 1.5 + 0.5;
    const double gelu = 0.5 * u * (1 + std::tanh(0.7978845608028654 * (u + 0.044715 * u * u * u)));
    const double want = gelu / (1 + std::exp(-xs[i])) + std::tanh(xs[i]) - 0.25 * xs[i];
    ASSERT_NEAR(ys[i], want, 1e-5 * (1 + std::abs(want))) << i;
  }
}

// In both modes: GRAPH mode fuses the chain into one kernel run as generated code (where the
// build has the code generator), checked here against the formula in double.
TEST_F(EngineTest, ClampChainMatchesItsFormulaInBothModes) {
  auto& spec = models::find_net("clamp_chain");
  const Tensor x = ops::slice(spec.make_input(0), {0}, {1000});
  const auto xs = x.to_doubles();
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    SCOPED_TRACE(mode);
    context::set({{"mode", mode}, {"jit_config", {{"jit_level", "O1"}}}});
    auto net = spec.make(0);
    const auto ys = (*net)(x).to_doubles();
    ASSERT_EQ(ys.size(), xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      const double u = std::min(std::max(xs[i] * 1.5 + 0.5, 0.0), 6.0);
      const double want = u - 0.25 * xs[i] + std::abs(xs[i]);
      ASSERT_NEAR(ys[i], want, 1e-6 * (1 + std::abs(want))) << i;
    }
  }
}

}  // namespace
}  // namespace mf
