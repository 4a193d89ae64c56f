// Cells called with several inputs (MindSpore's construct(self, x, y, ...)): the same bits in
// PYNATIVE, GRAPH at every jit_level and jit in PYNATIVE; the inputs after the first bound at
// every call (never baked in, never confused with x, each other or a weight); a new count or type
// compiles again and says which input changed; gradients through them in both modes; and they are
// never parameters.

#include <gtest/gtest.h>

#include "engine/autodiff/grad.h"
#include "engine/autodiff/tape.h"
#include "engine/engine_state.h"
#include "engine/graph/graph_mode.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine_fixture.h"
#include "tests/tensor_bytes.h"

namespace mf {
namespace {

using testing::EngineTest;

// dense(x) * gate: a child of two inputs.
class Gated : public nn::Cell {
 public:
  Gated() : Cell("Gated") {
    dense_ = &register_child("dense", std::make_unique<nn::Dense>(4, 3, 7));
  }
  Tensor forward(const Tensor& x) override { return ops::mul((*dense_)(x), extra_input(0)); }
  nn::Dense* dense_;
};

// gated(x, gate) + shift * w: three inputs, one weight of its own.
class ThreeInputs : public nn::Cell {
 public:
  ThreeInputs() : Cell("ThreeInputs") {
    gated_ = &register_child("gated", std::make_unique<Gated>());
    w_ = &register_parameter("w", Tensor::full({3}, 0.5));
  }
  Tensor forward(const Tensor& x) override {
    const std::vector<Tensor> gated_inputs{x, extra_input(0)};
    return ops::add((*gated_)(gated_inputs), ops::mul(extra_input(1), *w_));
  }
  Gated* gated_;
  Tensor* w_;
};

Tensor call(nn::Cell& cell, const std::vector<Tensor>& inputs) {
  Tensor y = cell(std::span<const Tensor>(inputs));
  y.sync();
  return y;
}

struct Inputs {
  Tensor x = Tensor::randn({2, 4}, 1);
  Tensor gate = Tensor::randn({2, 3}, 2);
  Tensor shift = Tensor::randn({2, 3}, 3);
  std::vector<Tensor> all() const { return {x, gate, shift}; }
};

TEST_F(EngineTest, SeveralInputsGiveTheSameBitsInEveryMode) {
  const Inputs in;
  context::set({{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
  ThreeInputs net;
  const std::vector<uint8_t> eager = testing::bytes_of(call(net, in.all()));
  for (const char* level : {"O0", "O1", "O2"}) {
    context::set(
        {{"mode", "GRAPH_MODE"}, {"deterministic", "ON"}, {"jit_config", {{"jit_level", level}}}});
    EXPECT_EQ(testing::bytes_of(call(net, in.all())), eager) << level;
    EXPECT_TRUE(net.graph_report().compiled) << level;
  }
  context::set({{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
  net.set_jit(true);
  EXPECT_EQ(testing::bytes_of(call(net, in.all())), eager) << "jit in PYNATIVE";
  EXPECT_TRUE(net.graph_report().ran);
}

TEST_F(EngineTest, InputsAfterTheFirstAreBoundAtEveryCall) {
  const Inputs in;
  ThreeInputs net;
  const Tensor other_gate = Tensor::randn({2, 3}, 9);
  const std::vector<Tensor> second{in.x, other_gate, in.shift};
  const std::vector<uint8_t> expected = testing::bytes_of(call(net, second));  // PYNATIVE
  context::set({{"mode", "GRAPH_MODE"}});
  call(net, in.all());
  EXPECT_TRUE(net.graph_report().compiled);
  EXPECT_EQ(testing::bytes_of(call(net, second)), expected);
  EXPECT_FALSE(net.graph_report().compiled) << "same types: the compiled form serves";
}

TEST_F(EngineTest, TheSameTensorTwiceOrAWeightAsAnInputStaysItsOwnInput) {
  const Inputs in;
  ThreeInputs net;
  const Tensor weight_shaped = Tensor::randn({2, 3}, 4);
  // Traced first with one tensor as gate and shift, and with the cell's weight as shift: later
  // calls with distinct tensors must not read the first call's aliasing into the graph.
  context::set({{"mode", "GRAPH_MODE"}});
  call(net, {in.x, weight_shaped, weight_shaped});
  const std::vector<uint8_t> graph = testing::bytes_of(call(net, in.all()));
  EXPECT_FALSE(net.graph_report().compiled);
  context::set({{"mode", "PYNATIVE_MODE"}});
  EXPECT_EQ(graph, testing::bytes_of(call(net, in.all())));

  ThreeInputs broadcast;
  const Tensor w = *broadcast.w_;
  context::set({{"mode", "GRAPH_MODE"}});
  call(broadcast, {in.x, in.gate, w});  // (3,) broadcasts like (2, 3)
  const Tensor other = Tensor::randn({3}, 5);
  const std::vector<uint8_t> graph_w = testing::bytes_of(call(broadcast, {in.x, in.gate, other}));
  EXPECT_FALSE(broadcast.graph_report().compiled);
  context::set({{"mode", "PYNATIVE_MODE"}});
  EXPECT_EQ(graph_w, testing::bytes_of(call(broadcast, {in.x, in.gate, other})));
}

TEST_F(EngineTest, ANewCountOrTypeOfInputsCompilesAgainAndSaysWhich) {
  const Inputs in;
  ThreeInputs net;
  context::set({{"mode", "GRAPH_MODE"}});
  call(net, in.all());
  call(net, {in.x, Tensor::randn({1, 3}, 6), in.shift});
  EXPECT_TRUE(net.graph_report().compiled);
  EXPECT_NE(net.graph_report().recompile_reason.find("input 1 changed from"), std::string::npos)
      << net.graph_report().recompile_reason;
  try {
    call(net, {in.x, in.gate});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ThreeInputs reads input 2 of a call with 2 inputs"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(EngineTest, InputsAfterTheFirstAreNotParameters) {
  const Inputs in;
  ThreeInputs net;
  call(net, in.all());
  for (const auto& [name, t] : net.named_parameters()) {
    EXPECT_TRUE(name == "w" || name.rfind("gated.", 0) == 0) << name;
    EXPECT_NE(t.impl(), in.gate.impl());
  }
  EXPECT_TRUE(net.extra_inputs().empty()) << "a call's inputs are dropped when it returns";
}

// The gradient of the first input and the weights, in GRAPH (one compiled graph) and on the tape.
TEST_F(EngineTest, GradientsWithSeveralInputsAgreeAcrossModes) {
  const Inputs in;
  std::vector<std::vector<uint8_t>> results;
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::set({{"mode", mode}, {"deterministic", "ON"}});
    ThreeInputs net;
    std::vector<Tensor> weights;
    for (const auto& [name, t] : net.trainable_params()) weights.push_back(t);
    GradFunction grad = value_and_grad(net, GradSpec{.input = true, .weights = weights});
    const std::vector<Tensor> inputs = in.all();
    const Gradients g = grad(std::span<const Tensor>(inputs));
    std::vector<uint8_t> all = testing::bytes_of(g.value);
    for (const Tensor& t : g.weights) {
      const std::vector<uint8_t> b = testing::bytes_of(t);
      all.insert(all.end(), b.begin(), b.end());
    }
    const std::vector<uint8_t> b = testing::bytes_of(g.input);
    all.insert(all.end(), b.begin(), b.end());
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
}

// On the tape, the inputs after the first get gradients too, also through a jit or recomputed
// cell (which then records its ops rather than one step of x alone).
TEST_F(EngineTest, TheTapeGivesEveryInputItsGradient) {
  const Inputs in;
  for (int marked = 0; marked < 3; ++marked) {
    ThreeInputs net;
    if (marked == 1) net.set_jit(true);
    if (marked == 2) net.recompute();
    const FunctionGradients g = value_and_grad(
        [&](const std::vector<Tensor>& args) { return ops::reduce_sum(call(net, args)); }, in.all(),
        {0, 1, 2});
    // d/d shift = w (0.5 everywhere); d/d gate = dense(x).
    EXPECT_EQ(g.inputs[2].to_vector<float>(), std::vector<float>(6, 0.5f)) << marked;
    const Tensor dense_x = (*net.gated_->dense_)(in.x);
    EXPECT_EQ(testing::bytes_of(g.inputs[1]), testing::bytes_of(dense_x)) << marked;
  }
}

class GatedWithBprop : public Gated {
 public:
  bool has_bprop() const override { return true; }
  Tensor bprop(const Tensor& x, const Tensor&, const Tensor&) override { return x; }
};

TEST_F(EngineTest, ABpropOfOneInputRefusesACallOfSeveral) {
  const Inputs in;
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::set({{"mode", mode}});
    GatedWithBprop cell;
    GradFunction grad = value_and_grad(cell);
    const std::vector<Tensor> inputs{in.x, in.gate};
    try {
      grad(std::span<const Tensor>(inputs));
      engine::sync();
      ADD_FAILURE() << mode << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("bprop of Gated"), std::string::npos) << e.what();
    }
  }
}

TEST_F(EngineTest, DeclaredInputsCompileOnceForEverySize) {
  ThreeInputs net;
  const auto declared = [](int64_t columns) {
    return std::pair<ir::SymbolicShape, DType>{{{-1, "batch"}, {columns, ""}}, DType::kFloat32};
  };
  net.set_inputs({declared(4), declared(3), declared(3)});
  int compiles = 0;
  for (int64_t batch : {1, 5, 16}) {
    SCOPED_TRACE(batch);
    const std::vector<Tensor> in{Tensor::randn({batch, 4}, 1), Tensor::randn({batch, 3}, 2),
                                 Tensor::randn({batch, 3}, 3)};
    context::set({{"mode", "PYNATIVE_MODE"}});
    const std::vector<double> eager = call(net, in).to_doubles();
    context::set({{"mode", "GRAPH_MODE"}});
    const std::vector<double> graph = call(net, in).to_doubles();
    compiles += net.graph_report().compiled ? 1 : 0;
    EXPECT_EQ(net.graph_report().dynamic_note, "one compile serves every size");
    ASSERT_EQ(graph.size(), eager.size());
    for (size_t k = 0; k < graph.size(); ++k) EXPECT_NEAR(graph[k], eager[k], 1e-5);
  }
  EXPECT_EQ(compiles, 1);
  // 'batch' is one size across the inputs, and the count is the declared one.
  const auto fails_with = [&](const std::vector<Tensor>& in, const std::string& what) {
    try {
      call(net, in);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  fails_with({Tensor::randn({2, 4}, 1), Tensor::randn({3, 3}, 2), Tensor::randn({2, 3}, 3)},
             "input 'x1' dimension 0");
  fails_with({Tensor::randn({2, 4}, 1), Tensor::randn({2, 3}, 2)},
             "declared with 3 inputs by set_inputs and is called with 2");
}

}  // namespace
}  // namespace mf
