// mf bisect: on a correct engine nothing diverges; a deliberately broken rewrite, injected through
// the test-only CompileOptions::extra_passes hook, is named as the first divergence; a fused kernel
// whose evaluation disagrees with its body run op by op is named as the culprit kernel.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include "mf_cli.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "context/context.h"
#include "engine/graph/bisect.h"
#include "engine/models/registry.h"
#include "engine/nn/cell.h"
#include "engine/ops.h"
#include "ir/op_def.h"
#include "passes/pass.h"

namespace mf {
namespace {

using testing::MfRun;
using testing::run_mf;

// A "simplification" that is wrong: it adds 1 to the graph's first output.
class OffByOne final : public passes::Pass {
 public:
  std::string_view name() const override { return "test-off-by-one"; }
  bool run(ir::Graph& graph) override {
    const ir::Value output = graph.outputs()[0];
    ir::Constant* one = graph.add_constant<float>({}, {1.0f});
    ir::Node* shifted = graph.add_node("add", {output, one});
    graph.set_output(0, shifted->output());
    return true;
  }
};

// A rewrite that changes nothing: the pipeline grows, the output does not.
class DoesNothing final : public passes::Pass {
 public:
  std::string_view name() const override { return "test-does-nothing"; }
  bool run(ir::Graph&) override { return false; }
};

// An elementwise op whose tile math (what a fused kernel calls) disagrees with its own kernel by
// 0.5: PYNATIVE and unfused runs give 2x, its fused kernel 2x + 0.5. A broken fused kernel, for
// bisect to name.
void broken_tile(const void* const* in, uint32_t scalars, void* out, int64_t n) {
  const float* x = static_cast<const float*>(in[0]);
  float* y = static_cast<float*>(out);
  for (int64_t i = 0; i < n; ++i) y[i] = x[(scalars & 1u) ? 0 : i] * 2.0f + 0.5f;
}

ir::ElementwiseMath broken_math() {
  ir::ElementwiseMath math;
  math.by_dtype[static_cast<size_t>(ir::DType::kFloat32)] = &broken_tile;
  return math;
}

const ir::OpRegistration kBrokenTile =
    ir::define_op("test_broken_tile")
        .arity(1)
        .traits(ir::Trait::kElementwise | ir::Trait::kPure)
        .infer([](std::span<const ir::TensorType> in, const ir::Attrs&) {
          return std::vector<ir::TensorType>{in[0]};
        })
        .kernel([](const ir::KernelContext& ctx) {
          const float* x = ctx.inputs[0].as<float>();
          float* y = ctx.outputs[0].as<float>();
          for (int64_t i = 0; i < ctx.inputs[0].size(); ++i) y[i] = x[i] * 2.0f;
        })
        .elementwise(broken_math())
        .reference([](std::span<const ir::RefTensor> in, const ir::Attrs&) {
          ir::RefTensor out = in[0];
          for (double& v : out.values) v *= 2;
          return std::vector<ir::RefTensor>{out};
        })
        .samples({{{ir::TensorType{ir::DType::kFloat32, {2}}}, {}}});

class BrokenWhenFused : public nn::Cell {
 public:
  BrokenWhenFused() : Cell("BrokenWhenFused") {}
  Tensor forward(const Tensor& x) override {
    return ops::neg(ops::call("test_broken_tile", {ops::exp(x)}).front());
  }
};

class BisectTest : public ::testing::Test {
 protected:
  void SetUp() override { context::reset(); }
  void TearDown() override { context::reset(); }
};

TEST_F(BisectTest, CorrectEngineHasNoDivergenceAtO1) {
  context::set({{"jit_config", {{"jit_level", "O1"}}}});
  const context::Json mode_before = context::snapshot().get("mode");
  const engine::BisectReport report = engine::bisect(models::find_net("mlp"), {});
  EXPECT_FALSE(report.first_divergence);
  EXPECT_FALSE(report.first_error);
  EXPECT_EQ(report.jit_level, "O1");
  ASSERT_GT(report.pipeline.size(), 4u);
  EXPECT_EQ(report.pipeline.front(), "infer-shapes");
  EXPECT_EQ(report.pipeline.back(), "select-kernels");
  EXPECT_EQ(report.cuts.size(), report.pipeline.size() + 1);  // cut 0 keeps no pass
  EXPECT_LE(report.max_abs_diff, 1e-4);
  // The mode the user had is back.
  EXPECT_EQ(context::snapshot().get("mode"), mode_before);
}

TEST_F(BisectTest, NamesTheBrokenRewrite) {
  context::set({{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", "O1"}}}});
  const context::Json mode_before = context::snapshot().get("mode");
  engine::BisectOptions options;
  options.extra_passes.push_back([] { return std::make_unique<OffByOne>(); });
  const engine::BisectReport report = engine::bisect(models::find_net("mlp"), options);
  ASSERT_TRUE(report.first_divergence);
  const engine::BisectCut& cut = report.cuts[*report.first_divergence];
  EXPECT_EQ(cut.after_pass, "test-off-by-one");
  EXPECT_TRUE(cut.comparison.diverged);
  EXPECT_NEAR(cut.comparison.max_abs_diff, 1.0, 1e-5);
  EXPECT_GE(cut.comparison.worst_index, 0);
  EXPECT_NEAR(cut.comparison.value - cut.comparison.reference, 1.0, 1e-5);
  // Every cut before it agreed, and bisect stopped there.
  for (size_t i = 0; i < *report.first_divergence; ++i) {
    EXPECT_FALSE(report.cuts[i].comparison.diverged) << report.cuts[i].after_pass;
  }
  EXPECT_EQ(report.cuts.size(), *report.first_divergence + 1);
  EXPECT_EQ(context::snapshot().get("mode"), mode_before);
}

TEST_F(BisectTest, NamesTheBrokenFusedKernel) {
  context::set({{"jit_config", {{"jit_level", "O1"}}}, {"graph_kernel_flags", "--opt_level=1"}});
  BrokenWhenFused net;
  const engine::BisectReport report = engine::bisect(net, Tensor::randn({4, 8}, 3), {});
  ASSERT_TRUE(report.first_divergence);
  EXPECT_EQ(report.cuts[*report.first_divergence].after_pass, "elementwise-fusion");
  ASSERT_EQ(report.fused_kernels.size(), 1u);
  ASSERT_TRUE(report.first_divergent_kernel);
  const engine::UnfusedCheck& check = report.unfused[*report.first_divergent_kernel];
  EXPECT_NE(check.kernel.find("fused @fused_"), std::string::npos) << check.kernel;
  // Run op by op, the kernel's body agrees with PYNATIVE; fused, it is 0.5 off.
  EXPECT_TRUE(check.vs_fused.diverged);
  EXPECT_NEAR(std::abs(check.vs_fused.value - check.vs_fused.reference), 0.5, 1e-5);
  EXPECT_FALSE(check.vs_reference.diverged);
}

TEST_F(BisectTest, AHarmlessExtraPassIsCheckedToo) {
  engine::BisectOptions options;
  options.extra_passes.push_back([] { return std::make_unique<DoesNothing>(); });
  const engine::BisectReport report = engine::bisect(models::find_net("chain"), options);
  EXPECT_FALSE(report.first_divergence);
  EXPECT_NE(std::find(report.pipeline.begin(), report.pipeline.end(), "test-does-nothing"),
            report.pipeline.end());
}

TEST_F(BisectTest, ToleranceDecidesDivergence) {
  Tensor reference = Tensor::from_vector(std::vector<float>{0.0f, 1.0f, 100.0f, 3.0f}, {4});
  Tensor close = Tensor::from_vector(std::vector<float>{0.0f, 1.0f, 100.005f, 3.0f}, {4});
  // 0.005 on 100 is 5e-5 relative: within 1e-4, beyond 1e-5.
  EXPECT_FALSE(engine::compare_outputs(reference, close, 1e-4).diverged);
  const engine::Comparison c = engine::compare_outputs(reference, close, 1e-5);
  EXPECT_TRUE(c.diverged);
  EXPECT_EQ(c.worst_index, 2);
  EXPECT_FLOAT_EQ(float(c.reference), 100.0f);
  Tensor other_shape = Tensor::from_vector(std::vector<float>{0.0f, 1.0f, 100.0f, 3.0f}, {2, 2});
  EXPECT_TRUE(engine::compare_outputs(reference, other_shape, 1.0).diverged);
}

TEST(BisectCliTest, CorrectEngineReportsNoDivergence) {
  const MfRun run = run_mf("bisect chain --set jit_config.jit_level=O1");
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("no divergence: "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("cuts checked, max abs diff 0"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("after common-subexpression-elimination"), std::string::npos) << run.out;
}

// The engine never diverges, so the command's divergence path is driven through its test hook: a
// pass that adds 1 to the output. The report names it and the exit status is 3, not 0 or 1.
TEST(BisectCliTest, ADivergenceIsNamedAndExitsThree) {
  const MfRun run = testing::run_mf_with_env("MF_BISECT_INJECT_OFFSET=1",
                                             "bisect chain --set jit_config.jit_level=O1");
  EXPECT_EQ(run.code, 3) << run.out << run.err;
  EXPECT_NE(run.out.find("first divergence: after pass 'injected-offset'"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("abs diff 1"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("a test hook"), std::string::npos) << run.err;
  // A value that is no number is refused (exit 1), not read as 0.
  const MfRun bad = testing::run_mf_with_env("MF_BISECT_INJECT_OFFSET=one", "bisect chain");
  EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("MF_BISECT_INJECT_OFFSET='one' is not a finite number"), std::string::npos)
      << bad.err;
}

TEST(BisectCliTest, BadArgumentsExitOne) {
  MfRun run = run_mf("bisect no_such_net");
  EXPECT_EQ(run.code, 1);
  EXPECT_NE(run.err.find("error: "), std::string::npos);
  EXPECT_NE(run.err.find("no_such_net"), std::string::npos) << run.err;
  run = run_mf("bisect chain --tolerance -1");
  EXPECT_EQ(run.code, 1);
  EXPECT_NE(run.err.find("error: --tolerance must be a finite number >= 0"), std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace mf
