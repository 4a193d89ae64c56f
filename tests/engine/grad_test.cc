// Gradients in both modes: the sample networks' gradients (input and every parameter) are the same
// bits in PYNATIVE (the tape) and in GRAPH (the grad transform) at every jit_level and fusion
// opt_level with deterministic=ON, and agree with central finite differences of the forward; the
// API's contracts (sensitivity, unread weights, a value used twice, errors naming the op and its
// scope) hold in both modes.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/op_def.h"

#include "engine/autodiff/grad.h"
#include "engine/graph/jit.h"
#include "engine/models/registry.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine_fixture.h"
#include "runtime/memory_pool.h"

namespace mf {
namespace {

using testing::EngineTest;
namespace fs = std::filesystem;

// Every gradient of sample network `name` (seed 0) on its input, flattened in order: input, then
// each parameter in named_parameters() order; and the value.
std::vector<std::vector<double>> net_gradients(const std::string& name,
                                               const context::Json& settings) {
  context::set(settings);
  const models::NetSpec& spec = models::find_net(name);
  auto net = spec.make(0);
  GradSpec grad_spec;
  for (const auto& [parameter, tensor] : net->named_parameters()) {
    grad_spec.weights.push_back(tensor);
  }
  GradFunction grad = value_and_grad(*net, grad_spec);
  const Gradients g = grad(spec.make_input(0));
  std::vector<std::vector<double>> out{g.value.to_doubles(), g.input.to_doubles()};
  for (const Tensor& w : g.weights) out.push_back(w.to_doubles());
  engine::sync();
  return out;
}

struct GradCase {
  std::string net;
  std::string jit_level;
  int opt_level;
};

class GradModesTest : public EngineTest, public ::testing::WithParamInterface<GradCase> {};

TEST_P(GradModesTest, GraphGradientsEqualPynativeBitForBit) {
  const GradCase& c = GetParam();
  const auto eager = net_gradients(c.net, {{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
  context::reset();
  const auto graph =
      net_gradients(c.net, {{"mode", "GRAPH_MODE"},
                            {"deterministic", "ON"},
                            {"jit_config", {{"jit_level", c.jit_level}}},
                            {"graph_kernel_flags", "--opt_level=" + std::to_string(c.opt_level)}});
  ASSERT_EQ(eager.size(), graph.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(testing::first_byte_difference(graph[i], eager[i]), "")
        << c.net << " result " << i << " (0: value, 1: input, then parameters)";
  }
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> cases;
  for (const char* net : {"mlp", "cnn", "transformer"}) {
    cases.push_back({net, "O0", 0});
    for (const char* level : {"O1", "O2"}) {
      for (int opt = 0; opt <= 3; ++opt) cases.push_back({net, level, opt});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(SampleNets, GradModesTest, ::testing::ValuesIn(grad_cases()),
                         [](const auto& info) {
                           return info.param.net + "_" + info.param.jit_level + "_opt" +
                                  std::to_string(info.param.opt_level);
                         });

// The chain of rules, checked against the forward: for the input and for each parameter, the
// directional derivative of sum(output) along a random +-1 direction, by central differences of
// the float32 forward, against <gradient, direction>. Every element moves at once, so the
// difference stands well above the forward's rounding (one element at a time it does not, on the
// transformer).
class GradFiniteDifferenceTest : public EngineTest,
                                 public ::testing::WithParamInterface<std::string> {};

TEST_P(GradFiniteDifferenceTest, GradientsMatchFiniteDifferencesOfTheForward) {
  context::set({{"mode", "PYNATIVE_MODE"}});
  const models::NetSpec& spec = models::find_net(GetParam());
  auto net = spec.make(0);
  GradSpec grad_spec;
  std::vector<std::string> names;
  for (const auto& [name, tensor] : net->named_parameters()) {
    grad_spec.weights.push_back(tensor);
    names.push_back(name);
  }
  const Tensor x = spec.make_input(0);
  GradFunction grad = value_and_grad(*net, grad_spec);
  const Gradients g = grad(x);
  const auto total = [&](const Tensor& input) {
    double sum = 0;
    for (double v : (*net)(input).to_doubles()) sum += v;
    return sum;
  };
  uint64_t seed = 7;
  struct Check {
    std::string what;
    double expected, numeric, scale;
  };
  std::vector<Check> checks;
  // Moves `target` (a copy when it is the input, in place for a parameter) along the direction.
  const auto check = [&](Tensor target, const Tensor& analytic, const std::string& what,
                         bool is_input) {
    const std::vector<float> original = target.to_vector<float>();
    const std::vector<double> gradient = analytic.to_doubles();
    std::vector<float> direction(original.size());
    double expected = 0, scale = 0;
    for (size_t i = 0; i < original.size(); ++i) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      direction[i] = (seed >> 63) != 0 ? 1.0f : -1.0f;
      expected += gradient[i] * direction[i];
      scale += std::fabs(gradient[i]);
    }
    const float h = 1e-3f;
    const auto evaluate = [&](float step) {
      std::vector<float> moved = original;
      for (size_t i = 0; i < moved.size(); ++i) moved[i] += step * direction[i];
      Tensor t = Tensor::from_vector(moved, target.shape());
      if (is_input) return total(t);
      std::memcpy(target.mutable_raw_data(), t.raw_data(), t.nbytes());
      return total(x);
    };
    const double numeric = (evaluate(h) - evaluate(-h)) / (2.0 * h);
    evaluate(0.0f);
    checks.push_back({what, expected, numeric, scale});
  };
  check(x, g.input, "input", true);
  // Five parameters spread over the network, first and last included: each check runs the
  // forward twice more (the transformer's sixteen took 22 s).
  const size_t checked = std::min<size_t>(names.size(), 5);
  for (size_t k = 0; k < checked; ++k) {
    const size_t i = checked == 1 ? 0 : k * (names.size() - 1) / (checked - 1);
    check(grad_spec.weights[i], g.weights[i], names[i], false);
  }
  // The float32 forward's rounding, seen through the difference, is a thousandth of the largest
  // directional derivative at most here; it decides for a gradient that is zero in exact
  // arithmetic (the attention's key bias: softmax ignores a shift shared by a row).
  double largest = 0;
  for (const Check& c : checks) largest = std::max(largest, std::fabs(c.expected));
  for (const Check& c : checks) {
    EXPECT_NEAR(c.expected, c.numeric, 2e-2 * c.scale + 1e-3 * largest) << c.what;
  }
}

INSTANTIATE_TEST_SUITE_P(SampleNets, GradFiniteDifferenceTest,
                         ::testing::Values("mlp", "cnn", "transformer"));

// A cell of ops written by the test: y = x * x + x, reduced; d/dx = 2x + 1 (x used three times:
// the contributions are summed in both modes).
class Polynomial : public nn::Cell {
 public:
  Polynomial() : Cell("Polynomial") {}
  Tensor forward(const Tensor& x) override { return ops::reduce_sum(ops::add(ops::mul(x, x), x)); }
};

class GradApiTest : public EngineTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(GradApiTest, AValueUsedSeveralTimesSumsItsContributions) {
  context::set({{"mode", GetParam()}});
  Polynomial net;
  GradFunction grad = value_and_grad(net);
  const Tensor x = Tensor::from_vector<float>({1.0f, -2.0f, 0.5f}, {3});
  const Gradients g = grad(x);
  EXPECT_EQ(g.value.to_vector<float>(), std::vector<float>({1.0f + 1.0f + 4.0f - 2.0f + 0.75f}));
  EXPECT_EQ(g.input.to_vector<float>(), std::vector<float>({3.0f, -3.0f, 2.0f}));
}

TEST_P(GradApiTest, SensitivitySeedsTheBackward) {
  context::set({{"mode", GetParam()}});
  nn::Dense dense(3, 2, 0);
  GradFunction grad = value_and_grad(dense, GradSpec{.input = true, .sens_param = true});
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor ones = Tensor::ones({2, 2});
  const Tensor twice = Tensor::full({2, 2}, 2.0);
  const std::vector<double> a = grad(x, ones).input.to_doubles();
  const std::vector<double> b = grad(x, twice).input.to_doubles();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_DOUBLE_EQ(b[i], 2 * a[i]);
  EXPECT_THROW(grad(x), Error);  // sens_param and no sensitivity
}

// A parameter the output does not read gets zeros; a tensor that is not a parameter is refused.
class TwoBranches : public nn::Cell {
 public:
  TwoBranches() : Cell("TwoBranches") {
    used_ = &register_parameter("used", Tensor::full({3}, 2.0));
    unused_ = &register_parameter("unused", Tensor::full({2}, 5.0));
  }
  Tensor forward(const Tensor& x) override { return ops::reduce_sum(ops::mul(x, *used_)); }
  Tensor *used_, *unused_;
};

TEST_P(GradApiTest, UnreadWeightsGetZerosAndStrangersAreRefused) {
  context::set({{"mode", GetParam()}});
  TwoBranches net;
  GradFunction grad =
      value_and_grad(net, GradSpec{.input = false, .weights = {*net.used_, *net.unused_}});
  const Gradients g = grad(Tensor::from_vector<float>({1, 2, 3}, {3}));
  EXPECT_FALSE(g.input.defined());
  EXPECT_EQ(g.weights[0].to_vector<float>(), std::vector<float>({1, 2, 3}));
  EXPECT_EQ(g.weights[1].to_vector<float>(), std::vector<float>({0, 0}));
  try {
    value_and_grad(net, GradSpec{.weights = {Tensor::ones({3})}});
    ADD_FAILURE() << "a stranger tensor was accepted as a weight";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not one of its parameters"), std::string::npos)
        << e.what();
  }
}

// An op with no backward rule, on the gradient's path: the error names the op and its scope.
const ir::OpRegistration kNoRuleOp =
    ir::define_op("test_copy_without_rule")
        .arity(1)
        .traits(ir::Trait::kPure)
        .infer([](std::span<const ir::TensorType> in, const ir::Attrs&) {
          return std::vector<ir::TensorType>{in[0]};
        })
        .kernel([](const ir::KernelContext& ctx) {
          std::memcpy(ctx.outputs[0].data, ctx.inputs[0].data,
                      size_t(ctx.inputs[0].size()) * ir::dtype_size(ctx.inputs[0].type.dtype));
        })
        .reference([](std::span<const ir::RefTensor> in, const ir::Attrs&) {
          return std::vector<ir::RefTensor>{in[0]};
        })
        .samples({{{ir::TensorType{DType::kFloat32, {2}}}, {}}});

class NoRule : public nn::Cell {
 public:
  NoRule() : Cell("NoRule") {}
  Tensor forward(const Tensor& x) override {
    return ops::call("test_copy_without_rule", {ops::relu(x)})[0];
  }
};

TEST_P(GradApiTest, AnOpWithoutARuleIsAnErrorNamingItAndItsScope) {
  context::set({{"mode", GetParam()}});
  NoRule net;
  GradFunction grad = value_and_grad(net);
  try {
    grad(Tensor::ones({4}));
    engine::sync();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(
        message.find("op `test_copy_without_rule` at Default/net-NoRule has no gradient rule"),
        std::string::npos)
        << message;
  }
}

TEST_P(GradApiTest, FunctionsOfSeveralTensorsDifferentiateByPosition) {
  context::set({{"mode", GetParam()}});
  const Tensor a = Tensor::from_vector<float>({1, 2}, {2});
  const Tensor b = Tensor::from_vector<float>({3, 5}, {2});
  const FunctionGradients g = value_and_grad(
      [](const std::vector<Tensor>& args) { return ops::reduce_sum(ops::mul(args[0], args[1])); },
      {a, b}, {1, 0});
  EXPECT_EQ(g.value.to_vector<float>(), std::vector<float>({13}));
  EXPECT_EQ(g.inputs[0].to_vector<float>(), std::vector<float>({1, 2}));  // d/db = a
  EXPECT_EQ(g.inputs[1].to_vector<float>(), std::vector<float>({3, 5}));  // d/da = b
  EXPECT_THROW(value_and_grad([](const std::vector<Tensor>& args) { return args[0]; }, {a}, {1}),
               Error);
}

// A custom bprop replaces the derived backward in both modes, nested in another cell, reading a
// weight of its cell (a capture of the traced bprop in GRAPH mode).
class Scaled : public nn::Cell {
 public:
  Scaled() : Cell("Scaled") { w_ = &register_parameter("w", Tensor::full({3}, 3.0)); }
  Tensor forward(const Tensor& x) override { return ops::mul(x, *w_); }
  bool has_bprop() const override { return true; }
  Tensor bprop(const Tensor&, const Tensor&, const Tensor& dout) override {
    return ops::mul(ops::mul(dout, *w_), ops::scalar(2.0));  // twice the true gradient
  }
  Tensor* w_;
};

class AroundScaled : public nn::Cell {
 public:
  AroundScaled()
      : Cell("AroundScaled"), inner_(register_child("inner", std::make_unique<Scaled>())) {}
  Tensor forward(const Tensor& x) override { return ops::reduce_sum(inner_(ops::mul(x, x))); }
  Scaled& inner_;
};

TEST_P(GradApiTest, ACustomBpropReplacesTheDerivedBackward) {
  context::set({{"mode", GetParam()}});
  AroundScaled net;
  GradFunction grad = value_and_grad(net);
  const Gradients g = grad(Tensor::from_vector<float>({1, -2, 0.5f}, {3}));
  // d/dx of sum(w * x^2) is 2wx = 6x; the bprop doubles the inner step: 12x.
  EXPECT_EQ(g.input.to_vector<float>(), std::vector<float>({12, -24, 6}));
  // The differentiated cell's own bprop too: all-ones sensitivity, so 2w.
  Scaled alone;
  GradFunction top = value_and_grad(alone);
  EXPECT_EQ(top(Tensor::ones({3})).input.to_vector<float>(), std::vector<float>({6, 6, 6}));
}

INSTANTIATE_TEST_SUITE_P(BothModes, GradApiTest, ::testing::Values("PYNATIVE_MODE", "GRAPH_MODE"));

// save_graphs writes the differentiated graph, its backward nodes under Gradients/.
class GradDumpTest : public testing::EngineTestWithDir {};

TEST_F(GradDumpTest, TheDifferentiatedGraphIsDumpedWithGradientScopes) {
  context::set({{"mode", "GRAPH_MODE"}, {"save_graphs", 1}, {"save_graphs_path", dir_.string()}});
  Polynomial net;
  GradFunction grad = value_and_grad(net);
  grad(Tensor::ones({3}));
  ASSERT_FALSE(grad.graph_report().dump_files.empty());
  bool found = false;
  for (const fs::path& file : grad.graph_report().dump_files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    found = found || text.str().find("Gradients/Default/net-Polynomial") != std::string::npos;
  }
  EXPECT_TRUE(found) << "no dump shows a Gradients/ scope";
}

}  // namespace
}  // namespace mf

namespace mf {
namespace {

class GradZeroBatchTest : public testing::EngineTest {};

// A batch of 0: every gradient has its tensor's shape, the weights' are zeros (a sum over no
// samples), in both modes.
TEST_F(GradZeroBatchTest, AnEmptyBatchGivesEmptyAndZeroGradients) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::reset();
    context::set({{"mode", mode}});
    models::Mlp net({6, 5, 3}, 1);
    GradSpec spec;
    for (const auto& [name, tensor] : net.named_parameters()) spec.weights.push_back(tensor);
    GradFunction grad = value_and_grad(net, spec);
    const Gradients g = grad(Tensor::zeros({0, 6}));
    EXPECT_EQ(g.value.shape(), (Shape{0, 3})) << mode;
    EXPECT_EQ(g.input.shape(), (Shape{0, 6})) << mode;
    ASSERT_EQ(g.weights.size(), spec.weights.size());
    for (size_t i = 0; i < g.weights.size(); ++i) {
      EXPECT_EQ(g.weights[i].shape(), spec.weights[i].shape()) << mode << " " << i;
      for (double v : g.weights[i].to_doubles()) EXPECT_EQ(v, 0.0) << mode << " " << i;
    }
  }
}

}  // namespace
}  // namespace mf

namespace mf {
namespace {

// A cell marked for jit inside a PYNATIVE gradient: its forward runs compiled (one task, not its
// ops) and the tape records it as one step whose backward is its gradient compiled as one graph.
// With deterministic=ON the result has the same bits as the same network op by op, and the
// differentiated graph is dumped like GRAPH mode's.
class JitCellOnTapeTest : public testing::EngineTestWithDir {};

TEST_F(JitCellOnTapeTest, RunsAsOneStepWithACompiledBackwardAndTheSameBits) {
  context::set({{"mode", "PYNATIVE_MODE"},
                {"deterministic", "ON"},
                {"save_graphs", 1},
                {"save_graphs_path", dir_.string()}});
  std::vector<float> values(3 * 8);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.1f * float(i % 7) - 0.3f;
  const Tensor x = Tensor::from_vector(values, {3, 8});
  auto differentiate = [&](models::Mlp& net) {
    std::vector<Tensor> weights;
    for (const auto& [name, p] : net.trainable_params()) weights.push_back(p);
    // The cell twice: its two steps' contributions to x and to the weights add up.
    const FunctionGradients g = value_and_grad(
        [&](const std::vector<Tensor>& a) { return ops::mul(net(a[0]), net(ops::neg(a[0]))); }, {x},
        {0}, weights);
    std::vector<std::vector<double>> all{g.value.to_doubles(), g.inputs[0].to_doubles()};
    for (const Tensor& w : g.weights) all.push_back(w.to_doubles());
    return all;
  };
  models::Mlp op_by_op({8, 16, 4}, 7), jitted({8, 16, 4}, 7);
  jitted.set_jit(true);
  const auto expected = differentiate(op_by_op);
  EXPECT_TRUE(std::filesystem::is_empty(dir_)) << "op by op, nothing compiles";
  const auto got = differentiate(jitted);
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(jitted.graph_report().jit_region) << "the forward ran compiled";
  bool backward_dumped = false;
  for (const auto& file : std::filesystem::recursive_directory_iterator(dir_)) {
    backward_dumped =
        backward_dumped || file.path().filename().string().find("Gradients_") != std::string::npos;
  }
  EXPECT_TRUE(backward_dumped) << "no compiled gradient was dumped";
  // A second call reuses both compiled forms.
  EXPECT_EQ(differentiate(jitted), expected);
  EXPECT_FALSE(jitted.graph_report().compiled);
}

}  // namespace
}  // namespace mf

namespace mf {
namespace {

// A residual block whose hidden activation (8x wider than its input) only the backward needs.
class WideBlock : public nn::Cell {
 public:
  explicit WideBlock(uint64_t seed) : Cell("WideBlock") {
    up_ = &register_child("up", std::make_unique<nn::Dense>(32, 256, seed));
    relu_ = &register_child("relu", std::make_unique<nn::ReLU>());
    down_ = &register_child("down", std::make_unique<nn::Dense>(256, 32, seed + 1));
  }
  Tensor forward(const Tensor& x) override { return ops::add(x, (*down_)((*relu_)((*up_)(x)))); }

 private:
  nn::Cell *up_, *relu_, *down_;
};

class Tower : public nn::Cell {
 public:
  Tower() : Cell("Tower") {
    for (int i = 0; i < 4; ++i) {
      blocks_.push_back(
          &register_child("block" + std::to_string(i), std::make_unique<WideBlock>(10 * i + 1)));
    }
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (nn::Cell* b : blocks_) h = (*b)(h);
    return ops::tanh(h);
  }
  void recompute_blocks(bool on) {
    for (nn::Cell* b : blocks_) b->recompute(on);
  }

 private:
  std::vector<nn::Cell*> blocks_;
};

// Cell::recompute: the same gradient bits with less memory, in both modes: GRAPH plans a lower
// peak (the blocks' hidden activations are computed again just before their backward instead of
// living through it), PYNATIVE measures one in the pool.
class RecomputeTest : public testing::EngineTest,
                      public ::testing::WithParamInterface<std::string> {};

TEST_P(RecomputeTest, SameGradientBitsWithALowerPeak) {
  context::set({{"mode", GetParam()}, {"deterministic", "ON"}});
  std::vector<float> values(256 * 32);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * float(int(i % 23) - 11);
  const Tensor x = Tensor::from_vector(values, {256, 32});
  Tower tower;
  std::vector<Tensor> weights;
  for (const auto& [name, p] : tower.trainable_params()) weights.push_back(p);
  GradFunction grad = value_and_grad(tower, GradSpec{.input = true, .weights = weights});
  auto run = [&](size_t& peak) {
    engine::sync();
    runtime::default_pool().reset_peak();
    const size_t before = runtime::default_pool().stats().in_use_bytes;
    Gradients g = grad(x);
    std::vector<std::vector<double>> all{g.value.to_doubles(), g.input.to_doubles()};
    for (const Tensor& w : g.weights) all.push_back(w.to_doubles());
    engine::sync();
    peak = GetParam() == "GRAPH_MODE" ? grad.graph_report().planned_peak_bytes
                                      : runtime::default_pool().stats().peak_in_use_bytes - before;
    return all;
  };
  size_t kept_peak = 0, recomputed_peak = 0;
  const auto kept = run(kept_peak);
  tower.recompute_blocks(true);
  const auto recomputed = run(recomputed_peak);
  EXPECT_EQ(recomputed, kept);
  // Each block's 256x256 float hidden activation (256 KiB, what its backward reads) no longer
  // lives from forward to backward: only the block being differentiated holds its own (about
  // 0.65 MiB less of 1.8-2.0 MiB here).
  EXPECT_LT(recomputed_peak + 2 * 256 * 1024, kept_peak)
      << "recompute did not lower the peak: " << recomputed_peak << " vs " << kept_peak;
  tower.recompute_blocks(false);
  size_t again = 0;
  EXPECT_EQ(run(again), kept) << "turning recompute off compiles the kept form again";
}

INSTANTIATE_TEST_SUITE_P(BothModes, RecomputeTest,
                         ::testing::Values("PYNATIVE_MODE", "GRAPH_MODE"));

}  // namespace
}  // namespace mf

namespace mf {
namespace {

// Recompute on networks written for other purposes: every child of each sample network that
// trains recomputed, in both modes, the gradients keep their bits.
class RecomputeSampleNetsTest : public testing::EngineTest,
                                public ::testing::WithParamInterface<std::string> {};

TEST_P(RecomputeSampleNetsTest, EveryChildRecomputedKeepsTheGradientBits) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    SCOPED_TRACE(mode);
    context::set({{"mode", mode}, {"deterministic", "ON"}});
    const models::NetSpec& spec = models::find_net(GetParam());
    auto net = spec.make(3);
    const Tensor x = spec.make_input(3);
    std::vector<Tensor> weights;
    for (const auto& [name, p] : net->trainable_params()) weights.push_back(p);
    GradFunction grad = value_and_grad(*net, GradSpec{.input = false, .weights = weights});
    auto all = [&] {
      const Gradients g = grad(x);
      std::vector<std::vector<double>> out{g.value.to_doubles()};
      for (const Tensor& w : g.weights) out.push_back(w.to_doubles());
      return out;
    };
    const auto kept = all();
    size_t marked = 0;
    for (const auto& [name, child] : net->named_children()) {
      child->recompute(true);
      ++marked;
    }
    ASSERT_GT(marked, 0u);
    EXPECT_EQ(all(), kept);
  }
}

INSTANTIATE_TEST_SUITE_P(SampleNets, RecomputeSampleNetsTest,
                         ::testing::Values("mlp", "cnn", "lenet5", "transformer"));

}  // namespace
}  // namespace mf
