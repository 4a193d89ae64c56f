// Each nn layer against a naive double-precision reference computed from the layer's own
// parameters.

#include "engine/nn/layers.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine_fixture.h"

namespace mf {
namespace {

using testing::EngineTest;
using LayersTest = EngineTest;

std::vector<double> params(const nn::Cell& cell, const std::string& name) {
  for (const auto& [n, t] : cell.named_parameters()) {
    if (n == name) return t.to_doubles();
  }
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
  }
}

TEST_F(LayersTest, DenseIsXTimesWeightTransposedPlusBias) {
  nn::Dense dense(5, 3, 11);
  Tensor x = Tensor::randn({4, 5}, 1);
  const auto w = params(dense, "weight"), b = params(dense, "bias"), xs = x.to_doubles();
  std::vector<double> want(12);
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 3; ++o) {
      double acc = b[o];
      for (int k = 0; k < 5; ++k) acc += xs[i * 5 + k] * w[o * 5 + k];
      want[i * 3 + o] = acc;
    }
  expect_close(dense(x).to_doubles(), want, 1e-5);
  // Rank 3 inputs apply over the last axis.
  Tensor x3 = ops::reshape(x, {2, 2, 5});
  Tensor y3 = dense(x3);
  EXPECT_EQ(y3.shape(), (Shape{2, 2, 3}));
  expect_close(y3.to_doubles(), want, 1e-5);
}

TEST_F(LayersTest, DenseRejectsAWrongInputWidth) {
  nn::Dense dense(5, 3, 11);
  try {
    dense(Tensor::zeros({2, 4}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Dense(5 -> 3) expects input (..., 5), got (2, 4)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(LayersTest, Conv2dWithPaddingAndBiasMatchesNaiveConvolution) {
  nn::Conv2d conv({.in_channels = 2, .out_channels = 3, .kernel_size = 3, .padding = 1}, 5);
  Tensor x = Tensor::randn({1, 2, 4, 4}, 2);
  const auto w = params(conv, "weight"), b = params(conv, "bias"), xs = x.to_doubles();
  std::vector<double> want(3 * 4 * 4);
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        double acc = b[o];
        for (int c = 0; c < 2; ++c)
          for (int ki = 0; ki < 3; ++ki)
            for (int kj = 0; kj < 3; ++kj) {
              const int y = i + ki - 1, z = j + kj - 1;
              if (y < 0 || y >= 4 || z < 0 || z >= 4) continue;
              acc += xs[(c * 4 + y) * 4 + z] * w[((o * 2 + c) * 3 + ki) * 3 + kj];
            }
        want[(o * 4 + i) * 4 + j] = acc;
      }
  expect_close(conv(x).to_doubles(), want, 1e-5);
}

// Padding from the input's size: 'same' makes the output ceil(in / stride) with the odd cell at
// the bottom/right (7x8, kernel 3, stride 2: rows 1 + 1, columns 0 + 1), 'valid' pads nothing.
TEST_F(LayersTest, Conv2dAndMaxPoolPadModes) {
  const Tensor x = Tensor::randn({1, 2, 7, 8}, 3);
  nn::Conv2dConfig config{.in_channels = 2, .out_channels = 3, .kernel_size = 3, .stride = 2};
  config.pad_mode = nn::PadMode::kSame;
  nn::Conv2d same(config, 1);
  const Tensor weight = same.named_parameters().at(0).second;
  ops::Conv2dOptions explicit_padding;
  explicit_padding.stride = {2, 2};
  explicit_padding.padding = {1, 1, 0, 1};
  const Tensor y = same(x);
  EXPECT_EQ(y.shape(), (Shape{1, 3, 4, 4}));
  const Tensor bias = same.named_parameters().at(1).second;
  EXPECT_EQ(y.to_vector<float>(),
            ops::bias_add(ops::conv2d(x, weight, explicit_padding), bias, 1).to_vector<float>());
  config.pad_mode = nn::PadMode::kValid;
  EXPECT_EQ(nn::Conv2d(config, 1)(x).shape(), (Shape{1, 3, 3, 3}));
  config.padding = 1;
  try {
    nn::Conv2d bad(config, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "Conv2d: padding must be 0 when pad_mode is not 'pad', got padding 1 with "
                  "pad_mode 'valid'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(nn::parse_pad_mode("SAME", "Conv2d"), nn::PadMode::kSame);
  try {
    nn::parse_pad_mode("full", "Conv2d");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "Conv2d: pad_mode must be one of 'same', 'valid', 'pad', got 'full'"),
              std::string::npos)
        << e.what();
  }
  // A window span past int64 under 'same' is refused before any padding is computed from it.
  nn::Conv2dConfig huge{.in_channels = 1, .out_channels = 1, .kernel_size = 3};
  huge.dilation = int64_t{1} << 62;
  huge.pad_mode = nn::PadMode::kSame;
  try {
    nn::Conv2d(huge, 1)(Tensor::randn({1, 1, 5, 5}, 1));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("Conv2d: kernel_size 3 with dilation 4611686018427387904 "
                                         "spans more elements than a tensor can hold"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(nn::MaxPool2d(2, 2, nn::PadMode::kSame)(Tensor::randn({1, 1, 5, 5}, 1)).shape(),
            (Shape{1, 1, 3, 3}));
  EXPECT_EQ(nn::MaxPool2d(2, 2)(Tensor::randn({1, 1, 5, 5}, 1)).shape(), (Shape{1, 1, 2, 2}));
  EXPECT_THROW(nn::MaxPool2d(2, 2, nn::PadMode::kSame, 1), Error);
}

TEST_F(LayersTest, LayerNormNormalizesEachRow) {
  nn::LayerNorm norm(8);
  Tensor x = Tensor::randn({3, 8}, 4);
  const auto xs = x.to_doubles();
  const auto ys = norm(x).to_doubles();
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int k = 0; k < 8; ++k) mean += xs[r * 8 + k] / 8;
    for (int k = 0; k < 8; ++k) var += (xs[r * 8 + k] - mean) * (xs[r * 8 + k] - mean) / 8;
    for (int k = 0; k < 8; ++k) {
      EXPECT_NEAR(ys[r * 8 + k], (xs[r * 8 + k] - mean) / std::sqrt(var + 1e-5), 1e-4);
    }
  }
}

TEST_F(LayersTest, MaxPoolFlattenSoftmaxReluAndGelu) {
  Tensor x =
      Tensor::from_vector<float>({1, 5, 2, 0, -1, 3, 4, 2, 0, 0, 7, 1, 6, 2, 8, 9}, {1, 1, 4, 4});
  nn::MaxPool2d pool(2, 2);
  EXPECT_EQ(pool(x).to_vector<float>(), (std::vector<float>{5, 4, 6, 9}));
  nn::Flatten flatten;
  EXPECT_EQ(flatten(x).shape(), (Shape{1, 16}));
  nn::Softmax softmax;
  const auto s =
      softmax(Tensor::from_vector<float>({0, std::log(3.0f)}, {1, 2})).to_vector<float>();
  EXPECT_NEAR(s[0], 0.25, 1e-6);
  EXPECT_NEAR(s[1], 0.75, 1e-6);
  nn::ReLU relu;
  EXPECT_EQ(relu(Tensor::from_vector<float>({-1, 2}, {2})).to_vector<float>(),
            (std::vector<float>{0, 2}));
  nn::GELU gelu_erf(false);
  EXPECT_NEAR(gelu_erf(Tensor::from_vector<float>({1}, {1})).to_vector<float>()[0], 0.841344746,
              1e-6);
}

// Attention by hand: softmax(q k^T / sqrt(d)) v per head, from the layer's own projections.
TEST_F(LayersTest, MultiHeadAttentionMatchesAPerHeadReference) {
  const int64_t batch = 1, seq = 3, d = 4, heads = 2, hd = 2;
  nn::MultiHeadAttention attention(d, heads, 9);
  Tensor x = Tensor::randn({batch, seq, d}, 3);
  auto project = [&](const std::string& name) {
    const auto w = params(attention, name + ".weight"), b = params(attention, name + ".bias"),
               xs = x.to_doubles();
    std::vector<double> out(seq * d);
    for (int s = 0; s < seq; ++s)
      for (int o = 0; o < d; ++o) {
        double acc = b[o];
        for (int k = 0; k < d; ++k) acc += xs[s * d + k] * w[o * d + k];
        out[s * d + o] = acc;
      }
    return out;
  };
  const auto q = project("query"), k = project("key"), v = project("value");
  std::vector<double> merged(seq * d);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < seq; ++i) {
      std::vector<double> scores(seq);
      double top = -1e300, total = 0;
      for (int j = 0; j < seq; ++j) {
        double dot = 0;
        for (int c = 0; c < hd; ++c) dot += q[i * d + h * hd + c] * k[j * d + h * hd + c];
        scores[j] = dot / std::sqrt(double(hd));
        top = std::max(top, scores[j]);
      }
      for (double& s : scores) total += (s = std::exp(s - top));
      for (int c = 0; c < hd; ++c) {
        double acc = 0;
        for (int j = 0; j < seq; ++j) acc += scores[j] / total * v[j * d + h * hd + c];
        merged[i * d + h * hd + c] = acc;
      }
    }
  const auto wo = params(attention, "output.weight"), bo = params(attention, "output.bias");
  std::vector<double> want(seq * d);
  for (int s = 0; s < seq; ++s)
    for (int o = 0; o < d; ++o) {
      double acc = bo[o];
      for (int c = 0; c < d; ++c) acc += merged[s * d + c] * wo[o * d + c];
      want[s * d + o] = acc;
    }
  expect_close(attention(x).to_doubles(), want, 1e-5);
}

TEST_F(LayersTest, ParametersAreNamedByPathAndReplaceable) {
  nn::TransformerEncoderLayer block(8, 2, 16, 1);
  std::vector<std::string> names;
  for (const auto& [name, t] : block.named_parameters()) names.push_back(name);
  EXPECT_EQ(names.front(), "norm1.gamma");
  EXPECT_NE(std::find(names.begin(), names.end(), "attention.query.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "dense2.bias"), names.end());
  block.set_parameter("dense2.bias", Tensor::ones({8}));
  EXPECT_EQ(params(block, "dense2.bias"), std::vector<double>(8, 1.0));
  EXPECT_THROW(block.set_parameter("dense2.bias", Tensor::ones({9})), Error);
  EXPECT_THROW(block.set_parameter("nope.bias", Tensor::ones({8})), Error);
}

}  // namespace
}  // namespace mf
