// Gradients through ops::cond: GRAPH mode's backward is a cond of the branches' backwards, and it
// gives PYNATIVE's bits (the tape differentiates the branch that ran) at every jit_level, whichever
// branch the data takes, with the cond at the top, inside a branch or inside a child cell, and
// with its inputs also used outside it. A compiled while loop is a clear error.

#include <gtest/gtest.h>

#include "engine/autodiff/grad.h"
#include "engine/graph/control_flow.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine_fixture.h"
#include "tests/tensor_bytes.h"

namespace mf {
namespace {

using testing::EngineTest;

// h = dense(x); y = cond(sum(h) > 0, tanh(h) * h * w, exp(h * w) + h) + h * w: h and w are read
// inside both branches and outside the cond, so their gradient sums cross it.
class Branchy : public nn::Cell {
 public:
  Branchy() : Cell("Branchy") {
    dense_ = &register_child("dense", std::make_unique<nn::Dense>(4, 3, 11));
    w_ = &register_parameter("w", Tensor::from_vector<float>({0.5f, -1.25f, 2.0f}, {3}));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = (*dense_)(x);
    const Tensor w = *w_;
    const Tensor y = ops::cond(
        ops::greater(ops::reduce_sum(h), ops::scalar(0.0)),
        [&] { return ops::mul(ops::mul(ops::tanh(h), h), w); },
        [&] {
          // A cond inside a branch.
          return ops::cond(
              ops::greater(ops::reduce_sum(x), ops::scalar(0.0)),
              [&] { return ops::add(ops::exp(ops::mul(h, w)), h); },
              [&] { return ops::mul(h, h); });
        });
    return ops::add(y, ops::mul(h, w));
  }
  nn::Dense* dense_;
  Tensor* w_;
};

// Branchy as a child: its conds live in the child's subgraphs.
class Outer : public nn::Cell {
 public:
  Outer() : Cell("Outer") { inner_ = &register_child("inner", std::make_unique<Branchy>()); }
  Tensor forward(const Tensor& x) override { return ops::tanh((*inner_)(x)); }
  Branchy* inner_;
};

std::vector<uint8_t> all_bytes(const Gradients& g) {
  std::vector<uint8_t> out = testing::bytes_of(g.value);
  const auto append = [&](const Tensor& t) {
    const std::vector<uint8_t> b = testing::bytes_of(t);
    out.insert(out.end(), b.begin(), b.end());
  };
  append(g.input);
  for (const Tensor& w : g.weights) append(w);
  return out;
}

template <typename Net>
std::vector<uint8_t> gradient_bytes(const Tensor& x, const char* mode, const char* level) {
  context::set({{"mode", mode}, {"deterministic", "ON"}, {"jit_config", {{"jit_level", level}}}});
  Net net;
  std::vector<Tensor> weights;
  for (const auto& [name, t] : net.trainable_params()) weights.push_back(t);
  GradFunction grad = value_and_grad(net, GradSpec{.input = true, .weights = weights});
  const Gradients g = grad(x);
  if (std::string(mode) == "GRAPH_MODE") EXPECT_TRUE(grad.graph_report().ran);
  return all_bytes(g);
}

TEST_F(EngineTest, CondGradientsAreTheTapesBitsInEveryModeAndBranch) {
  // Inputs that take each way through the two conds (the dense layer's sign decides the first).
  std::vector<Tensor> inputs;
  for (uint64_t seed = 1; seed <= 8; ++seed) inputs.push_back(Tensor::randn({2, 4}, seed));
  for (const Tensor& x : inputs) {
    const std::vector<uint8_t> eager = gradient_bytes<Branchy>(x, "PYNATIVE_MODE", "O0");
    const std::vector<uint8_t> eager_outer = gradient_bytes<Outer>(x, "PYNATIVE_MODE", "O0");
    for (const char* level : {"O0", "O1", "O2"}) {
      EXPECT_EQ(gradient_bytes<Branchy>(x, "GRAPH_MODE", level), eager) << level;
      EXPECT_EQ(gradient_bytes<Outer>(x, "GRAPH_MODE", level), eager_outer) << level;
    }
  }
}

TEST_F(EngineTest, CondGradientsAreTheDerivatives) {
  // y = cond(sum(x) > 0, x * x, sin-free 3x): dy/dx = 2x or 3.
  class Square : public nn::Cell {
   public:
    Square() : Cell("Square") {}
    Tensor forward(const Tensor& x) override {
      return ops::cond(
          ops::greater(ops::reduce_sum(x), ops::scalar(0.0)), [&] { return ops::mul(x, x); },
          [&] { return ops::mul(x, ops::scalar(3.0)); });
    }
  };
  context::set({{"mode", "GRAPH_MODE"}});
  Square net;
  GradFunction grad = value_and_grad(net);
  EXPECT_EQ(grad(Tensor::from_vector<float>({1, 2}, {2})).input.to_vector<float>(),
            (std::vector<float>{2, 4}));
  EXPECT_EQ(grad(Tensor::from_vector<float>({-1, -2}, {2})).input.to_vector<float>(),
            (std::vector<float>{3, 3}));
  EXPECT_FALSE(grad.graph_report().compiled) << "one compiled gradient serves both branches";
}

TEST_F(EngineTest, ACompiledWhileLoopsGradientIsAClearError) {
  class Doubling : public nn::Cell {
   public:
    Doubling() : Cell("Doubling") {}
    Tensor forward(const Tensor& x) override {
      return ops::while_loop(
          [](const std::vector<Tensor>& v) {
            return ops::greater(ops::scalar(10.0), ops::reduce_sum(v[0]));
          },
          [](const std::vector<Tensor>& v) {
            return std::vector<Tensor>{ops::mul(v[0], ops::scalar(2.0))};
          },
          {x})[0];
    }
  };
  context::set({{"mode", "GRAPH_MODE"}});
  Doubling net;
  GradFunction grad = value_and_grad(net);
  try {
    grad(Tensor::ones({2}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a compiled while loop is not differentiated"),
              std::string::npos)
        << e.what();
  }
  context::set({{"mode", "PYNATIVE_MODE"}});
  EXPECT_EQ(grad(Tensor::ones({2})).input.to_vector<float>(), (std::vector<float>{8, 8}));
}

}  // namespace
}  // namespace mf
