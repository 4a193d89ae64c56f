#include "engine/nn/layers.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "ir/shape.h"

namespace mf::nn {
namespace {

// Kaiming-uniform-like scale: keeps activations of deep sample networks in a sane range.
Tensor init_weight(const Shape& shape, int64_t fan_in, uint64_t seed) {
  const double bound = 1.0 / std::sqrt(double(fan_in));
  return Tensor::uniform(shape, -bound, bound, seed);
}

// One spatial dimension under PadMode::kSame: the padding (before, after) that makes the output
// ceil(in / stride), the odd cell after, as MindSpore splits it.
// Kernel, stride and dilation come from the user: the window's span is checked before it is used,
// and nothing else can overflow ((out - 1) * stride < in).
std::pair<int64_t, int64_t> same_padding(std::string_view layer, int64_t in, int64_t kernel,
                                         int64_t stride, int64_t dilation) {
  const int64_t out = in / stride + (in % stride != 0 ? 1 : 0);
  const std::optional<int64_t> dilated = ir::checked_mul(kernel - 1, dilation);
  MF_CHECK(dilated && *dilated < std::numeric_limits<int64_t>::max(), InvalidArgument, layer,
           ": kernel_size ", kernel, " with dilation ", dilation,
           " spans more elements than a tensor can hold; use smaller values");
  const int64_t span = *dilated + 1;
  const int64_t total = std::max<int64_t>(span - (in - (out - 1) * stride), 0);
  return {total / 2, total - total / 2};
}

// The conv/pool op's padding attribute for a call on x: [h, w] when both sides of each dimension
// are equal (the attribute an explicit padding gives, so kernels and dumps do not tell them
// apart), else [top, bottom, left, right].
std::vector<int64_t> op_padding(std::string_view layer, PadMode mode, int64_t padding,
                                const Tensor& x, int64_t kernel, int64_t stride, int64_t dilation) {
  switch (mode) {
    case PadMode::kPad:
      return {padding, padding};
    case PadMode::kValid:
      return {0, 0};
    case PadMode::kSame:
      break;
  }
  MF_CHECK(x.shape().size() == 4, InvalidArgument, layer,
           " with pad_mode 'same' expects an NCHW input (rank 4), got ",
           ir::shape_to_string(x.shape()));
  const auto [top, bottom] = same_padding(layer, x.shape()[2], kernel, stride, dilation);
  const auto [left, right] = same_padding(layer, x.shape()[3], kernel, stride, dilation);
  if (top == bottom && left == right) return {top, left};
  return {top, bottom, left, right};
}

void check_padding(std::string_view layer, PadMode mode, int64_t padding) {
  MF_CHECK(padding >= 0, InvalidArgument, layer, ": padding must be >= 0, got ", padding);
  MF_CHECK(mode == PadMode::kPad || padding == 0, InvalidArgument, layer,
           ": padding must be 0 when pad_mode is not 'pad', got padding ", padding,
           " with pad_mode '", pad_mode_name(mode), "'");
}

}  // namespace

PadMode parse_pad_mode(std::string_view text, std::string_view layer) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "pad") return PadMode::kPad;
  if (lower == "valid") return PadMode::kValid;
  if (lower == "same") return PadMode::kSame;
  MF_FAIL(InvalidArgument, layer, ": pad_mode must be one of 'same', 'valid', 'pad', got '", text,
          "'");
}

std::string_view pad_mode_name(PadMode mode) {
  switch (mode) {
    case PadMode::kPad:
      return "pad";
    case PadMode::kValid:
      return "valid";
    case PadMode::kSame:
      return "same";
  }
  return "unknown";
}

Dense::Dense(int64_t in_features, int64_t out_features, uint64_t seed, bool has_bias)
    : Cell("Dense"),
      in_(in_features),
      out_(out_features),
      weight_(register_parameter("weight",
                                 init_weight({out_features, in_features}, in_features, seed))) {
  if (has_bias)
    bias_ = &register_parameter("bias", init_weight({out_features}, in_features, seed ^ 0xB1A5));
}

Tensor Dense::forward(const Tensor& x) {
  MF_CHECK(x.shape().size() >= 2 && x.shape().back() == in_, InvalidArgument, "Dense(", in_, " -> ",
           out_, ") expects input (..., ", in_, "), got ", ir::shape_to_string(x.shape()));
  Tensor flat = x.shape().size() == 2 ? x : ops::reshape(x, {-1, in_});
  Tensor y = ops::matmul(flat, weight_, false, true);
  if (bias_ != nullptr) y = ops::bias_add(y, *bias_);
  if (x.shape().size() == 2) return y;
  Shape out_shape = x.shape();
  out_shape.back() = out_;
  return ops::reshape(y, out_shape);
}

Conv2d::Conv2d(const Conv2dConfig& config, uint64_t seed)
    : Cell("Conv2d"),
      config_(config),
      weight_(register_parameter(
          "weight",
          init_weight({config.out_channels, config.in_channels / config.groups, config.kernel_size,
                       config.kernel_size},
                      config.in_channels / config.groups * config.kernel_size * config.kernel_size,
                      seed))) {
  MF_CHECK(config.groups > 0 && config.in_channels % config.groups == 0 &&
               config.out_channels % config.groups == 0,
           InvalidArgument, "Conv2d: in_channels ", config.in_channels, " and out_channels ",
           config.out_channels, " must both divide by groups ", config.groups);
  MF_CHECK(config.kernel_size >= 1 && config.stride >= 1 && config.dilation >= 1, InvalidArgument,
           "Conv2d: kernel_size ", config.kernel_size, ", stride ", config.stride, " and dilation ",
           config.dilation, " must be >= 1");
  check_padding("Conv2d", config.pad_mode, config.padding);
  if (config.has_bias) {
    bias_ = &register_parameter(
        "bias", init_weight({config.out_channels}, config.in_channels, seed ^ 0xB1A5));
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  ops::Conv2dOptions options;
  options.stride = {config_.stride, config_.stride};
  options.padding = op_padding("Conv2d", config_.pad_mode, config_.padding, x, config_.kernel_size,
                               config_.stride, config_.dilation);
  options.dilation = {config_.dilation, config_.dilation};
  options.groups = config_.groups;
  Tensor y = ops::conv2d(x, weight_, options);
  if (bias_ != nullptr) y = ops::bias_add(y, *bias_, /*axis=*/1);
  return y;
}

MaxPool2d::MaxPool2d(int64_t kernel_size, int64_t stride, PadMode pad_mode, int64_t padding)
    : Cell("MaxPool2d"),
      kernel_(kernel_size),
      stride_(stride),
      pad_mode_(pad_mode),
      padding_(padding) {
  MF_CHECK(kernel_size >= 1 && stride >= 1, InvalidArgument, "MaxPool2d: kernel_size ", kernel_size,
           " and stride ", stride, " must be >= 1");
  check_padding("MaxPool2d", pad_mode, padding);
}

Tensor MaxPool2d::forward(const Tensor& x) {
  ops::Pool2dOptions options;
  options.kernel_size = {kernel_, kernel_};
  options.stride = {stride_, stride_};
  options.padding = op_padding("MaxPool2d", pad_mode_, padding_, x, kernel_, stride_, 1);
  return ops::max_pool2d(x, options);
}

LayerNorm::LayerNorm(int64_t features, double epsilon)
    : Cell("LayerNorm"),
      epsilon_(epsilon),
      gamma_(register_parameter("gamma", Tensor::ones({features}))),
      beta_(register_parameter("beta", Tensor::zeros({features}))) {}

Tensor LayerNorm::forward(const Tensor& x) {
  return ops::layer_norm(x, gamma_, beta_, -1, epsilon_);
}

BatchNorm2d::BatchNorm2d(int64_t num_features, BatchNormConfig config)
    : Cell("BatchNorm2d"),
      features_(num_features),
      config_(config),
      gamma_(register_parameter("gamma", Tensor::ones({std::max<int64_t>(num_features, 0)}),
                                config.affine)),
      beta_(register_parameter("beta", Tensor::zeros({std::max<int64_t>(num_features, 0)}),
                               config.affine)),
      moving_mean_(register_parameter("moving_mean",
                                      Tensor::zeros({std::max<int64_t>(num_features, 0)}), false)),
      moving_variance_(register_parameter(
          "moving_variance", Tensor::ones({std::max<int64_t>(num_features, 0)}), false)) {
  MF_CHECK(num_features >= 1, InvalidArgument, "BatchNorm2d: num_features must be at least 1, got ",
           num_features);
  MF_CHECK(config.eps > 0 && std::isfinite(config.eps), InvalidArgument,
           "BatchNorm2d: eps must be a positive number, got ", config.eps);
  MF_CHECK(config.momentum >= 0 && config.momentum <= 1, InvalidArgument,
           "BatchNorm2d: momentum must be in [0, 1], got ", config.momentum);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  MF_CHECK(x.shape().size() == 4 && x.shape()[1] == features_ && ir::is_floating(x.dtype()),
           InvalidArgument, "BatchNorm2d(", features_, ") takes a float (N, ", features_,
           ", H, W) input, got ", ir::type_to_string(x.type()));
  if (!config_.use_batch_statistics.value_or(training())) {
    return ops::batch_norm(x, gamma_, beta_, moving_mean_, moving_variance_, config_.eps);
  }
  const Shape& s = x.shape();
  const int64_t count = s[0] * s[2] * s[3];
  MF_CHECK(count > 1, InvalidArgument,
           "BatchNorm2d in training needs more than one value per "
           "channel to compute a variance, got input ",
           ir::type_to_string(x.type()));
  const DType t = x.dtype();
  auto per_channel = [&](const Tensor& v) { return ops::reshape(v, {1, features_, 1, 1}); };
  const Tensor mean = ops::reduce_mean(x, {0, 2, 3}, true);
  const Tensor centered = ops::sub(x, mean);
  const Tensor variance = ops::reduce_mean(ops::square(centered), {0, 2, 3}, true);
  const Tensor inv_std = ops::rsqrt(ops::add(variance, ops::scalar(config_.eps, t)));
  const Tensor y =
      ops::add(ops::mul(ops::mul(centered, inv_std), per_channel(gamma_)), per_channel(beta_));
  if (training()) {
    const double m = config_.momentum;
    const Tensor batch_mean = ops::reshape(mean, {features_});
    const Tensor unbiased = ops::mul(ops::reshape(variance, {features_}),
                                     ops::scalar(double(count) / double(count - 1), t));
    const Tensor keep = ops::scalar(m, t), take = ops::scalar(1 - m, t);
    ops::call("assign",
              {moving_mean_, ops::add(ops::mul(moving_mean_, keep), ops::mul(batch_mean, take))});
    ops::call("assign", {moving_variance_,
                         ops::add(ops::mul(moving_variance_, keep), ops::mul(unbiased, take))});
  }
  return y;
}

namespace {
uint64_t next_dropout_seed() {
  static std::atomic<uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

Dropout::Dropout(double p, std::optional<uint64_t> seed)
    : Cell("Dropout"),
      p_(p),
      seed_(seed ? *seed : next_dropout_seed()),
      counter_(register_parameter("counter", Tensor::zeros({}, DType::kInt64), false)) {
  MF_CHECK(p >= 0 && p < 1, InvalidArgument, "Dropout: p must be in [0, 1), got ", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!training() || p_ == 0) return x;
  const std::vector<Tensor> out =
      ops::call("dropout", {x, counter_}, {{"keep_prob", 1.0 - p_}, {"seed", int64_t(seed_)}});
  ops::call("assign", {counter_, ops::add(counter_, ops::scalar(1, DType::kInt64))});
  return out[0];
}

MultiHeadAttention::MultiHeadAttention(int64_t d_model, int64_t heads, uint64_t seed)
    : Cell("MultiHeadAttention"),
      d_model_(d_model),
      heads_(heads),
      query_(register_child("query", std::make_unique<Dense>(d_model, d_model, seed + 1))),
      key_(register_child("key", std::make_unique<Dense>(d_model, d_model, seed + 2))),
      value_(register_child("value", std::make_unique<Dense>(d_model, d_model, seed + 3))),
      output_(register_child("output", std::make_unique<Dense>(d_model, d_model, seed + 4))),
      softmax_(register_child("softmax", std::make_unique<Softmax>(-1))) {
  MF_CHECK(heads > 0 && d_model % heads == 0, InvalidArgument, "MultiHeadAttention: d_model ",
           d_model, " must divide by heads ", heads);
}

Tensor MultiHeadAttention::forward(const Tensor& x) {
  MF_CHECK(x.shape().size() == 3 && x.shape()[2] == d_model_, InvalidArgument,
           "MultiHeadAttention expects (batch, seq, ", d_model_, "), got ",
           ir::shape_to_string(x.shape()));
  const int64_t batch = x.shape()[0], seq = x.shape()[1], head_dim = d_model_ / heads_;
  // (batch, seq, d) -> (batch, heads, seq, head_dim)
  auto split_heads = [&](const Tensor& t) {
    return ops::transpose(ops::reshape(t, {batch, seq, heads_, head_dim}), {0, 2, 1, 3});
  };
  Tensor q = split_heads(query_(x));
  Tensor k = split_heads(key_(x));
  Tensor v = split_heads(value_(x));
  Tensor scores = ops::mul(ops::batch_matmul(q, k, false, true),
                           ops::scalar(1.0 / std::sqrt(double(head_dim))));
  Tensor context = ops::batch_matmul(softmax_(scores), v);
  Tensor merged = ops::reshape(ops::transpose(context, {0, 2, 1, 3}), {batch, seq, d_model_});
  return output_(merged);
}

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d_model, int64_t heads, int64_t ffn_hidden,
                                                 uint64_t seed)
    : Cell("TransformerEncoderLayer"),
      norm1_(register_child("norm1", std::make_unique<LayerNorm>(d_model))),
      norm2_(register_child("norm2", std::make_unique<LayerNorm>(d_model))),
      attention_(register_child(
          "attention", std::make_unique<MultiHeadAttention>(d_model, heads, seed * 16 + 1))),
      dense1_(
          register_child("dense1", std::make_unique<Dense>(d_model, ffn_hidden, seed * 16 + 8))),
      gelu_(register_child("gelu", std::make_unique<GELU>(true))),
      dense2_(
          register_child("dense2", std::make_unique<Dense>(ffn_hidden, d_model, seed * 16 + 9))) {}

Tensor TransformerEncoderLayer::forward(const Tensor& x) {
  Tensor y = ops::add(x, attention_(norm1_(x)));
  return ops::add(y, dense2_(gelu_(dense1_(norm2_(y)))));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (Cell* layer : layers_) y = (*layer)(y);
  return y;
}

}  // namespace mf::nn
