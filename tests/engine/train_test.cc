// Training: losses against double-precision references, optimizers against their formulas (kept
// here in double, independent of the engine's float loops), MindSpore's learning-rate functions on
// its documented examples, and TrainOneStepCell: the same weights to the bit in PYNATIVE and GRAPH
// (O0/O1/O2) with deterministic=ON, a learnable problem learned, and a last smaller batch.

#include <gtest/gtest.h>

#include <cmath>

#include "engine/graph/graph_mode.h"
#include "engine/models/registry.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine/train/learning_rate.h"
#include "engine/train/loss.h"
#include "engine/train/optimizer.h"
#include "engine/train/train_cells.h"
#include "engine_fixture.h"

namespace mf {
namespace {

using nn::Reduction;
using testing::EngineTest;

std::vector<double> values(const Tensor& t) {
  return t.to_doubles();
}

template <typename F>
void expect_error_contains(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

class LossTest : public EngineTest {};

// logits (2, 3) and their log-softmax in double.
const std::vector<float> kLogits = {1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f};
std::vector<double> log_softmax_rows(const std::vector<float>& x, int rows, int cols) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    double m = -1e300, s = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]));
    for (int c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int c = 0; c < cols; ++c) out[r * cols + c] = x[r * cols + c] - m - std::log(s);
  }
  return out;
}

TEST_F(LossTest, SparseSoftmaxCrossEntropyPicksTheLabelsLogProbability) {
  const Tensor logits = Tensor::from_vector(kLogits, {2, 3});
  const Tensor labels = Tensor::from_vector(std::vector<int32_t>{1, 2}, {2});
  const auto lp = log_softmax_rows(kLogits, 2, 3);
  nn::SoftmaxCrossEntropyWithLogits none(true, Reduction::kNone), mean(true, Reduction::kMean);
  const auto per = values(none(logits, labels));
  ASSERT_EQ(per.size(), 2u);
  EXPECT_NEAR(per[0], -lp[1], 1e-6);
  EXPECT_NEAR(per[1], -lp[5], 1e-6);
  EXPECT_NEAR(values(mean(logits, labels))[0], -(lp[1] + lp[5]) / 2, 1e-6);
  // Dense labels: the same as one-hot.
  nn::SoftmaxCrossEntropyWithLogits dense(false, Reduction::kSum);
  const Tensor one_hot = Tensor::from_vector(std::vector<float>{0, 1, 0, 0, 0, 1}, {2, 3});
  EXPECT_NEAR(values(dense(logits, one_hot))[0], -(lp[1] + lp[5]), 1e-6);
}

TEST_F(LossTest, CrossEntropyWeightsIgnoresAndSmoothsAsPyTorch) {
  const Tensor logits = Tensor::from_vector(kLogits, {2, 3});
  const auto lp = log_softmax_rows(kLogits, 2, 3);
  const std::vector<double> w = {0.5, 2.0, 1.5};
  nn::CrossEntropyOptions options;
  options.weight = Tensor::from_vector(std::vector<float>{0.5f, 2.0f, 1.5f}, {3});
  options.label_smoothing = 0.1;
  nn::CrossEntropyLoss loss(options);
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{1, 2}, {2});
  // PyTorch: sum_i w[y_i] ((1-e) nll_i) + e/C sum_i sum_c w_c (-lp_ic), over sum_i w[y_i].
  double nll = 0, smooth = 0;
  const int y[2] = {1, 2};
  for (int i = 0; i < 2; ++i) {
    nll += -w[y[i]] * lp[i * 3 + y[i]];
    for (int c = 0; c < 3; ++c) smooth += -w[c] * lp[i * 3 + c];
  }
  const double expected = ((1 - 0.1) * nll + 0.1 / 3 * smooth) / (w[1] + w[2]);
  EXPECT_NEAR(values(loss(logits, labels))[0], expected, 1e-6);

  nn::CrossEntropyOptions ignoring;
  ignoring.ignore_index = 2;
  const double only_first = -lp[1];
  EXPECT_NEAR(values(nn::CrossEntropyLoss(ignoring)(logits, labels))[0], only_first, 1e-6);
}

TEST_F(LossTest, RegressionLossesAndBceMatchTheirFormulas) {
  const Tensor x = Tensor::from_vector(std::vector<float>{0.5f, -2.0f, 3.0f}, {3});
  const Tensor y = Tensor::from_vector(std::vector<float>{1.0f, 0.0f, 1.0f}, {3});
  EXPECT_NEAR(values(nn::MSELoss()(x, y))[0], (0.25 + 4 + 4) / 3, 1e-6);
  EXPECT_NEAR(values(nn::L1Loss(Reduction::kSum)(x, y))[0], 0.5 + 2 + 2, 1e-6);
  double bce = 0;
  const double xs[3] = {0.5, -2, 3}, ys[3] = {1, 0, 1};
  for (int i = 0; i < 3; ++i) {
    const double s = 1 / (1 + std::exp(-xs[i]));
    bce += -(ys[i] * std::log(s) + (1 - ys[i]) * std::log(1 - s));
  }
  EXPECT_NEAR(values(nn::BCEWithLogitsLoss()(x, y))[0], bce / 3, 1e-6);
  // pos_weight p weighs the positive term: -(p y log s + (1 - y) log(1 - s)).
  const Tensor p = Tensor::from_vector(std::vector<float>{2.0f, 2.0f, 2.0f}, {3});
  double weighted = 0;
  for (int i = 0; i < 3; ++i) {
    const double s = 1 / (1 + std::exp(-xs[i]));
    weighted += -(2 * ys[i] * std::log(s) + (1 - ys[i]) * std::log(1 - s));
  }
  EXPECT_NEAR(values(nn::BCEWithLogitsLoss(Reduction::kSum, {}, p)(x, y))[0], weighted, 1e-5);
}

TEST_F(LossTest, BadLabelsAreClearErrorsNamingTheLoss) {
  const Tensor logits = Tensor::from_vector(kLogits, {2, 3});
  nn::SoftmaxCrossEntropyWithLogits sparse(true, Reduction::kMean);
  expect_error_contains([&] { sparse(logits, Tensor::zeros({2}, DType::kFloat32)); },
                        "SoftmaxCrossEntropyWithLogits: class-index labels must be int32 or int64");
  expect_error_contains([&] { sparse(logits, Tensor::zeros({3}, DType::kInt32)); }, "of shape (2)");
  expect_error_contains(
      [&] {
        nn::MSELoss()(logits, Tensor::zeros({2, 3}, DType::kFloat64));
      },
      "MSELoss: labels");
  expect_error_contains([&] { nn::parse_reduction("avg", "L1Loss"); },
                        "L1Loss: reduction must be 'none', 'mean' or 'sum'");
  nn::CrossEntropyOptions too_smooth;
  too_smooth.label_smoothing = 1.5;
  expect_error_contains([&] { nn::CrossEntropyLoss{too_smooth}; }, "label_smoothing");
}

// ---- Optimizers against their formulas in double

class OptimizerTest : public EngineTest {};

struct Trajectory {
  std::vector<double> param;
  std::vector<std::vector<double>> grads;  // one per step
};

Trajectory trajectory() {
  Trajectory t;
  t.param = {0.5, -1.0, 2.0, 0.25};
  for (int s = 0; s < 5; ++s) {
    std::vector<double> g;
    for (int i = 0; i < 4; ++i) g.push_back(std::sin(1.0 + s * 4 + i) * (i + 1));
    t.grads.push_back(g);
  }
  return t;
}

// Runs `opt` over the trajectory's gradients on a float parameter; returns its final values.
std::vector<double> run_engine(
    const std::function<std::unique_ptr<nn::Optimizer>(std::vector<nn::ParamGroup>)>& make,
    const std::string& name = "w") {
  const Trajectory t = trajectory();
  Tensor p = Tensor::from_vector(std::vector<float>(t.param.begin(), t.param.end()), {4});
  nn::ParamGroup group;
  group.params.emplace_back(name, p);
  auto opt = make({group});
  for (const auto& g : t.grads) {
    opt->step({Tensor::from_vector(std::vector<float>(g.begin(), g.end()), {4})});
  }
  return p.to_doubles();
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol * (1 + std::abs(b[i]))) << i;
}

TEST_F(OptimizerTest, SgdWithMomentumDampeningNesterovAndDecay) {
  const double lr = 0.1, m = 0.9, d = 0.2, wd = 0.01;
  for (bool nesterov : {false, true}) {
    const double damp = nesterov ? 0.0 : d;
    Trajectory t = trajectory();
    std::vector<double> p = t.param, accum(4);
    for (size_t s = 0; s < t.grads.size(); ++s) {
      for (int i = 0; i < 4; ++i) {
        const double g = t.grads[s][i] + wd * p[i];
        accum[i] = s == 0 ? g : m * accum[i] + (1 - damp) * g;
        p[i] -= lr * (nesterov ? g + m * accum[i] : accum[i]);
      }
    }
    expect_close(run_engine([&](auto groups) {
                   return std::make_unique<nn::SGD>(groups, nn::SGDOptions{.learning_rate = lr,
                                                                           .momentum = m,
                                                                           .dampening = damp,
                                                                           .weight_decay = wd,
                                                                           .nesterov = nesterov});
                 }),
                 p, 1e-5);
  }
}

TEST_F(OptimizerTest, MomentumAndLossScale) {
  const double lr = 0.05, m = 0.9, scale = 128;
  Trajectory t = trajectory();
  std::vector<double> p = t.param, accum(4);
  for (const auto& grads : t.grads) {
    for (int i = 0; i < 4; ++i) {
      accum[i] = m * accum[i] + grads[i];
      p[i] -= lr * accum[i];
    }
  }
  // Gradients scaled by loss_scale come back to the same update.
  const auto engine = [&] {
    const Trajectory tr = trajectory();
    Tensor w = Tensor::from_vector(std::vector<float>(tr.param.begin(), tr.param.end()), {4});
    nn::ParamGroup group;
    group.params.emplace_back("w", w);
    nn::Momentum opt({group}, {.learning_rate = lr, .momentum = m, .loss_scale = scale});
    for (const auto& g : tr.grads) {
      std::vector<float> scaled;
      for (double v : g) scaled.push_back(float(v * scale));
      opt.step({Tensor::from_vector(scaled, {4})});
    }
    EXPECT_EQ(opt.global_step(), 5);
    EXPECT_EQ(opt.named_state().front().first, "moments.w");
    return w.to_doubles();
  }();
  expect_close(engine, p, 1e-5);
}

TEST_F(OptimizerTest, AdamPlacesEpsilonAsMindSporeAndAdamWeightDecayDecaysInTheUpdate) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-3;
  Trajectory t = trajectory();
  std::vector<double> p = t.param, m(4), v(4), q = t.param, m2(4), v2(4);
  for (size_t s = 0; s < t.grads.size(); ++s) {
    const double lr_t = lr * std::sqrt(1 - std::pow(b2, s + 1)) / (1 - std::pow(b1, s + 1));
    for (int i = 0; i < 4; ++i) {
      const double g = t.grads[s][i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
      m2[i] = b1 * m2[i] + (1 - b1) * g;
      v2[i] = b2 * v2[i] + (1 - b2) * g * g;
      q[i] -= lr * (m2[i] / (std::sqrt(v2[i]) + eps) + 0.1 * q[i]);
    }
  }
  expect_close(run_engine([&](auto groups) {
                 return std::make_unique<nn::Adam>(
                     groups,
                     nn::AdamOptions{.learning_rate = lr, .beta1 = b1, .beta2 = b2, .eps = eps});
               }),
               p, 1e-5);
  expect_close(
      run_engine([&](auto groups) {
        return std::make_unique<nn::AdamWeightDecay>(
            groups,
            nn::AdamWeightDecayOptions{
                .learning_rate = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = 0.1});
      }),
      q, 1e-5);
}

TEST_F(OptimizerTest, WeightDecaySkipsBetaAndGammaUnlessAGroupSaysSo) {
  auto sgd = [](auto groups) {
    return std::make_unique<nn::SGD>(groups,
                                     nn::SGDOptions{.learning_rate = 0.1, .weight_decay = 0.5});
  };
  const auto plain = run_engine([](auto groups) {
    return std::make_unique<nn::SGD>(groups, nn::SGDOptions{.learning_rate = 0.1});
  });
  EXPECT_EQ(run_engine(sgd, "norm.gamma"), plain);
  EXPECT_EQ(run_engine(sgd, "norm.beta"), plain);
  EXPECT_NE(run_engine(sgd, "fc.weight"), plain);
  // A group's own decay applies to all its parameters.
  const auto grouped = run_engine(
      [](std::vector<nn::ParamGroup> groups) {
        groups[0].weight_decay = 0.5;
        return std::make_unique<nn::SGD>(groups, nn::SGDOptions{.learning_rate = 0.1});
      },
      "norm.gamma");
  EXPECT_NE(grouped, plain);
}

TEST_F(OptimizerTest, PerStepLearningRatesAndBadSettings) {
  // lr 0 for every step leaves the parameter; a list's last value holds after its end.
  const Trajectory t = trajectory();
  const auto frozen = run_engine([](auto groups) {
    return std::make_unique<nn::SGD>(
        groups, nn::SGDOptions{.learning_rate = std::vector<double>{0.0, 0.0}});
  });
  expect_close(frozen, t.param, 0);
  Tensor w = Tensor::zeros({2});
  nn::ParamGroup group;
  group.params.emplace_back("w", w);
  expect_error_contains([&] { nn::SGD({group}, {.loss_scale = 0}); },
                        "loss_scale must be greater than 0");
  expect_error_contains([&] { nn::Momentum({group}, {.weight_decay = -1}); },
                        "weight_decay must be in");
  expect_error_contains([&] { nn::SGD({group}, {.nesterov = true}); },
                        "nesterov needs momentum > 0");
  expect_error_contains([&] { nn::Adam({group}, {.beta1 = 1.0}); }, "beta1 must be in [0, 1)");
  expect_error_contains([&] { nn::SGD({nn::ParamGroup{}}, {}); }, "the parameter list is empty");
  nn::ParamGroup twice = group;
  twice.params.push_back(group.params[0]);
  expect_error_contains([&] { nn::SGD({twice}, {}); }, "is given twice");
  nn::SGD sgd({group}, {});
  expect_error_contains([&] { sgd.step({Tensor::zeros({3})}); }, "the gradient of 'w' is");
  expect_error_contains([&] { sgd.step({}); }, "trains 1 parameters but was given 0");
}

TEST(LearningRateTest, MindSporesDocumentedExamples) {
  const auto expect_list = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  };
  expect_list(nn::exponential_decay_lr(0.1, 0.9, 6, 2, 1), {0.1, 0.1, 0.09, 0.09, 0.081, 0.081});
  expect_list(nn::cosine_decay_lr(0.01, 0.1, 6, 2, 2), {0.1, 0.1, 0.055, 0.055, 0.01, 0.01});
  expect_list(nn::piecewise_constant_lr({2, 5, 10}, {0.1, 0.05, 0.01}),
              {0.1, 0.1, 0.05, 0.05, 0.05, 0.01, 0.01, 0.01, 0.01, 0.01});
  EXPECT_THROW(nn::piecewise_constant_lr({5, 2}, {0.1, 0.2}), Error);
  EXPECT_THROW(nn::cosine_decay_lr(0.1, 0.01, 6, 2, 2), Error);
  EXPECT_THROW(nn::exponential_decay_lr(0.1, 0.9, 0, 2, 1), Error);
  EXPECT_THROW(nn::LearningRate(-1.0), Error);
}

// ---- Training steps

// A learnable problem: the label is the index of the largest of the first 4 inputs.
std::pair<Tensor, Tensor> batch(int64_t n, uint64_t seed) {
  const Tensor x = Tensor::randn({n, 8}, seed);
  const auto v = x.to_vector<float>();
  std::vector<int32_t> labels;
  for (int64_t i = 0; i < n; ++i) {
    labels.push_back(
        int32_t(std::max_element(v.begin() + i * 8, v.begin() + i * 8 + 4) - (v.begin() + i * 8)));
  }
  return {x, Tensor::from_vector(labels, {n})};
}

struct RunResult {
  std::vector<std::vector<double>> weights;
  std::vector<double> losses;
  bool ran_compiled = false;  // the steps ran a compiled graph
};

RunResult train(const context::Json& settings, const std::string& optimizer, int steps,
                int64_t last_batch = 16) {
  context::set(settings);
  auto net = std::make_shared<models::Mlp>(std::vector<int64_t>{8, 16, 4}, 3);
  auto with_loss = std::make_shared<nn::WithLossCell>(
      net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, Reduction::kMean));
  std::shared_ptr<nn::Optimizer> opt;
  if (optimizer == "adam") {
    opt = std::make_shared<nn::Adam>(nn::trainable_group(*net),
                                     nn::AdamOptions{.learning_rate = 0.01});
  } else {
    opt = std::make_shared<nn::Momentum>(
        nn::trainable_group(*net), nn::MomentumOptions{.learning_rate = 0.1, .momentum = 0.9});
  }
  nn::TrainOneStepCell step(with_loss, opt);
  RunResult r;
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch(s + 1 == steps ? last_batch : 16, 100 + uint64_t(s % 8));
    r.losses.push_back(step(x, y).to_doubles()[0]);
  }
  r.ran_compiled = step.graph_report().ran;
  for (const auto& [name, w] : net->named_parameters()) r.weights.push_back(w.to_doubles());
  engine::sync();
  return r;
}

class TrainStepTest : public EngineTest {};

TEST_F(TrainStepTest, WeightsAreTheSameBitsInEveryModeAndLevel) {
  for (const char* optimizer : {"momentum", "adam"}) {
    const RunResult eager =
        train({{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}}, optimizer, 6, 10);
    for (const char* level : {"O0", "O1", "O2"}) {
      context::reset();
      const RunResult graph = train(
          {{"mode", "GRAPH_MODE"}, {"deterministic", "ON"}, {"jit_config", {{"jit_level", level}}}},
          optimizer, 6, 10);
      EXPECT_TRUE(graph.ran_compiled) << level;
      EXPECT_FALSE(eager.ran_compiled);
      ASSERT_EQ(graph.weights.size(), eager.weights.size());
      for (size_t i = 0; i < eager.weights.size(); ++i) {
        EXPECT_EQ(testing::first_byte_difference(graph.weights[i], eager.weights[i]), "")
            << optimizer << " " << level << " parameter " << i;
      }
      EXPECT_EQ(testing::first_byte_difference(graph.losses, eager.losses), "") << level;
    }
    context::reset();
  }
}

TEST_F(TrainStepTest, TheLossFallsOnALearnableProblemInBothModes) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::reset();
    const RunResult r = train({{"mode", mode}}, "momentum", 60);
    double first = 0, last = 0;
    for (int i = 0; i < 8; ++i) first += r.losses[i], last += r.losses[r.losses.size() - 9 + i];
    EXPECT_LT(last, 0.6 * first) << mode;
  }
}

TEST_F(TrainStepTest, OptimizerMustTrainTheNetworksOwnParameters) {
  auto net = std::make_shared<models::Mlp>(std::vector<int64_t>{8, 4}, 3);
  auto other = std::make_shared<models::Mlp>(std::vector<int64_t>{8, 4}, 4);
  auto with_loss = std::make_shared<nn::WithLossCell>(
      net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, Reduction::kMean));
  auto opt = std::make_shared<nn::SGD>(nn::trainable_group(*other), nn::SGDOptions{});
  expect_error_contains([&] { nn::TrainOneStepCell(with_loss, opt); },
                        "is not a parameter of the network");
  // The label is the loss cell's second input, not a parameter.
  EXPECT_EQ(with_loss->named_parameters().size(), with_loss->trainable_params().size());
}

TEST_F(TrainStepTest, ALabelOfAnotherDtypeCompilesAgainInsteadOfMisbinding) {
  context::set({{"mode", "GRAPH_MODE"}});
  auto net = std::make_shared<models::Mlp>(std::vector<int64_t>{8, 4}, 3);
  nn::WithLossCell with_loss(
      net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, Reduction::kNone));
  auto [x, y] = batch(4, 7);
  const auto as_int32 = with_loss(x, y).to_doubles();
  const Tensor y64 = ops::cast(y, DType::kInt64);
  const auto as_int64 = with_loss(x, y64).to_doubles();
  EXPECT_TRUE(with_loss.graph_report().compiled);
  EXPECT_EQ(as_int32, as_int64);
  EXPECT_FALSE(with_loss(x, y).to_doubles().empty());
  EXPECT_FALSE(with_loss.graph_report().compiled);  // the int32 form is still held
}

TEST_F(TrainStepTest, AnEmptyBatchLeavesTheWeightsInBothModes) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::reset();
    context::set({{"mode", mode}});
    auto net = std::make_shared<models::Mlp>(std::vector<int64_t>{8, 4}, 3);
    const auto before = net->named_parameters().front().second.to_doubles();
    auto with_loss = std::make_shared<nn::WithLossCell>(
        net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, Reduction::kSum));
    nn::TrainOneStepCell step(with_loss, std::make_shared<nn::Adam>(nn::trainable_group(*net)));
    const Tensor loss = step(Tensor::zeros({0, 8}), Tensor::zeros({0}, DType::kInt32));
    EXPECT_EQ(loss.to_doubles().at(0), 0.0) << mode;  // a sum over no samples
    EXPECT_EQ(net->named_parameters().front().second.to_doubles(), before) << mode;
  }
}

TEST_F(TrainStepTest, InferBoostSeesWeightsAStepWroteInPlace) {
  context::set({{"mode", "GRAPH_MODE"}, {"jit_config", {{"infer_boost", "on"}}}});
  auto net = std::make_shared<models::Mlp>(std::vector<int64_t>{8, 4}, 3);
  auto [x, y] = batch(4, 7);
  const auto before = (*net)(x).to_doubles();
  auto with_loss = std::make_shared<nn::WithLossCell>(
      net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, Reduction::kMean));
  nn::TrainOneStepCell step(with_loss,
                            std::make_shared<nn::SGD>(nn::trainable_group(*net), nn::SGDOptions{}));
  step(x, y);
  const auto after = (*net)(x).to_doubles();
  context::set({{"mode", "PYNATIVE_MODE"}});
  EXPECT_EQ(testing::first_byte_difference(after, (*net)(x).to_doubles()), "");
  EXPECT_NE(before, after);
}

}  // namespace
}  // namespace mf

namespace mf {
namespace {

class BatchNormTest : public testing::EngineTest {};

// x (N, C, H, W) in double: per channel mean and biased variance.
std::pair<std::vector<double>, std::vector<double>> channel_stats(const std::vector<double>& x,
                                                                  int64_t n, int64_t c,
                                                                  int64_t hw) {
  std::vector<double> mean(static_cast<size_t>(c)), var(static_cast<size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < hw; ++k) s += x[size_t((i * c + ch) * hw + k)];
    }
    mean[size_t(ch)] = s / double(n * hw);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < hw; ++k) {
        const double d = x[size_t((i * c + ch) * hw + k)] - mean[size_t(ch)];
        q += d * d;
      }
    }
    var[size_t(ch)] = q / double(n * hw);
  }
  return {mean, var};
}

TEST_F(BatchNormTest, TrainingUsesBatchStatisticsAndMovesTheAveragesInBothModes) {
  const Tensor x = Tensor::randn({4, 3, 5, 5}, 11, 2.0);
  const auto xs = x.to_doubles();
  const auto [mean, var] = channel_stats(xs, 4, 3, 25);
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::reset();
    context::set({{"mode", mode}});
    nn::BatchNorm2d bn(3);
    bn.set_train(true);
    const auto y = bn(x).to_doubles();
    for (int64_t ch = 0; ch < 3; ++ch) {
      const double expected =
          (xs[size_t(ch * 25 + 7)] - mean[size_t(ch)]) / std::sqrt(var[size_t(ch)] + 1e-5);
      EXPECT_NEAR(y[size_t(ch * 25 + 7)], expected, 1e-4) << mode << " channel " << ch;
    }
    bn(x);  // a second step moves the averages again
    const auto params = bn.named_parameters();
    const auto moving_mean = params[2].second.to_doubles();
    const auto moving_var = params[3].second.to_doubles();
    for (size_t ch = 0; ch < 3; ++ch) {
      // Two steps from (0, 1): m = 0.9 m + 0.1 batch.
      EXPECT_NEAR(moving_mean[ch], (0.1 + 0.09) * mean[ch], 1e-5) << mode;
      const double unbiased = var[ch] * 100.0 / 99.0;
      EXPECT_NEAR(moving_var[ch], 0.81 + (0.1 + 0.09) * unbiased, 1e-4) << mode;
    }
    EXPECT_EQ(bn.trainable_params().size(), 2u);
    // Evaluation: the moving statistics, and (GRAPH) a compile of its own.
    bn.set_train(false);
    const auto eval = bn(x).to_doubles();
    const double expected = (xs[7] - moving_mean[0]) / std::sqrt(moving_var[0] + 1e-5);
    EXPECT_NEAR(eval[7], expected, 1e-4) << mode;
  }
}

class ConvBnNet : public nn::Cell {
 public:
  ConvBnNet() : Cell("ConvBnNet") {
    conv_ = &register_child(
        "conv", std::make_unique<nn::Conv2d>(
                    nn::Conv2dConfig{.in_channels = 1, .out_channels = 4, .padding = 1}, 5));
    bn_ = &register_child("bn", std::make_unique<nn::BatchNorm2d>(4));
    relu_ = &register_child("relu", std::make_unique<nn::ReLU>());
    flatten_ = &register_child("flatten", std::make_unique<nn::Flatten>());
    fc_ = &register_child("fc", std::make_unique<nn::Dense>(4 * 6 * 6, 3, 6));
  }
  Tensor forward(const Tensor& x) override {
    return (*fc_)((*flatten_)((*relu_)((*bn_)((*conv_)(x)))));
  }

 private:
  nn::Cell *conv_, *bn_, *relu_, *flatten_, *fc_;
};

std::vector<std::vector<double>> train_conv_bn(const context::Json& settings) {
  context::set(settings);
  auto net = std::make_shared<ConvBnNet>();
  net->set_train(true);
  auto with_loss = std::make_shared<nn::WithLossCell>(
      net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, Reduction::kMean));
  nn::TrainOneStepCell step(
      with_loss, std::make_shared<nn::Momentum>(nn::trainable_group(*net),
                                                nn::MomentumOptions{.learning_rate = 0.05}));
  for (int s = 0; s < 4; ++s) {
    const Tensor x = Tensor::randn({8, 1, 6, 6}, 40 + uint64_t(s));
    std::vector<int32_t> labels;
    for (int i = 0; i < 8; ++i) labels.push_back((i + s) % 3);
    step(x, Tensor::from_vector(labels, {8}));
  }
  std::vector<std::vector<double>> out;
  for (const auto& [name, w] : net->named_parameters()) out.push_back(w.to_doubles());
  net->set_train(false);
  out.push_back((*net)(Tensor::randn({2, 1, 6, 6}, 99)).to_doubles());
  engine::sync();
  return out;
}

TEST_F(BatchNormTest, AConvBnNetTrainsToTheSameBitsInEveryModeAndLevel) {
  const auto eager = train_conv_bn({{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
  for (const char* level : {"O0", "O1", "O2"}) {
    context::reset();
    const auto graph = train_conv_bn(
        {{"mode", "GRAPH_MODE"}, {"deterministic", "ON"}, {"jit_config", {{"jit_level", level}}}});
    ASSERT_EQ(graph.size(), eager.size());
    for (size_t i = 0; i < eager.size(); ++i) {
      EXPECT_EQ(testing::first_byte_difference(graph[i], eager[i]), "")
          << level << " result " << i << " (parameters incl. moving statistics, then eval output)";
    }
  }
  // The moving statistics moved.
  EXPECT_NE(eager[4], std::vector<double>(4, 0.0));
}

TEST_F(BatchNormTest, BadSettingsAndInputsAreClearErrors) {
  EXPECT_THROW(nn::BatchNorm2d(0), Error);
  EXPECT_THROW(nn::BatchNorm2d(3, {.eps = 0}), Error);
  EXPECT_THROW(nn::BatchNorm2d(3, {.momentum = 1.5}), Error);
  nn::BatchNorm2d bn(3);
  expect_error_contains([&] { bn(Tensor::zeros({2, 4, 3, 3})); }, "BatchNorm2d(3) takes");
  bn.set_train(true);
  expect_error_contains([&] { bn(Tensor::zeros({1, 3, 1, 1})); }, "more than one value");
}

}  // namespace
}  // namespace mf

namespace mf {
namespace {

class DropoutTest : public testing::EngineTest {};

TEST_F(DropoutTest, TrainingDropsAndScalesEvaluationIsTheIdentity) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::reset();
    context::set({{"mode", mode}});
    nn::Dropout dropout(0.25, 7);
    const Tensor x = Tensor::ones({64, 64});
    EXPECT_EQ(dropout(x).to_doubles(), x.to_doubles()) << mode;  // not training: identity
    dropout.set_train(true);
    const auto first = dropout(x).to_doubles();
    const auto second = dropout(x).to_doubles();
    size_t zeros = 0;
    for (double v : first) {
      EXPECT_TRUE(v == 0.0 || std::abs(v - 1.0 / 0.75) < 1e-6) << v;
      zeros += v == 0.0;
    }
    EXPECT_NEAR(double(zeros) / double(first.size()), 0.25, 0.03) << mode;
    EXPECT_NE(first, second) << mode << ": each training call draws a new mask";
  }
  EXPECT_THROW(nn::Dropout(1.0), Error);
}

std::vector<std::vector<double>> train_with_dropout(const context::Json& settings) {
  context::set(settings);
  auto net = std::make_shared<nn::Sequential>();
  net->add(std::make_unique<nn::Dense>(8, 16, 1));
  net->add(std::make_unique<nn::ReLU>());
  net->add(std::make_unique<nn::Dropout>(0.3, 5));
  net->add(std::make_unique<nn::Dense>(16, 4, 2));
  net->set_train(true);
  auto with_loss = std::make_shared<nn::WithLossCell>(
      net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, Reduction::kMean));
  nn::TrainOneStepCell step(
      with_loss,
      std::make_shared<nn::SGD>(nn::trainable_group(*net), nn::SGDOptions{.learning_rate = 0.1}));
  for (int s = 0; s < 5; ++s) {
    auto [x, y] = batch(16, 200 + uint64_t(s));
    step(x, y);
  }
  std::vector<std::vector<double>> out;
  for (const auto& [name, w] : net->named_parameters()) out.push_back(w.to_doubles());
  engine::sync();
  return out;
}

TEST_F(DropoutTest, ANetWithDropoutTrainsToTheSameBitsInEveryModeAndLevel) {
  const auto eager = train_with_dropout({{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
  for (const char* level : {"O0", "O1", "O2"}) {
    context::reset();
    const auto graph = train_with_dropout(
        {{"mode", "GRAPH_MODE"}, {"deterministic", "ON"}, {"jit_config", {{"jit_level", level}}}});
    ASSERT_EQ(graph.size(), eager.size());
    for (size_t i = 0; i < eager.size(); ++i) {
      EXPECT_EQ(testing::first_byte_difference(graph[i], eager[i]), "") << level << " " << i;
    }
  }
  // The counter advanced once per step.
  EXPECT_EQ(eager[2], std::vector<double>{5.0});
}

}  // namespace
}  // namespace mf
