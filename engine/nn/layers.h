#pragma once
// The standard layers. Weights are drawn from a seed, so a network built twice with the same seed
// is the same network in every mode and on every machine.

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/nn/cell.h"
#include "engine/ops.h"

namespace mf::nn {

// y = x W^T + b over the last axis; x of rank 2 or more.
class Dense : public Cell {
 public:
  Dense(int64_t in_features, int64_t out_features, uint64_t seed, bool has_bias = true);
  Tensor forward(const Tensor& x) override;

 private:
  int64_t in_, out_;
  Tensor& weight_;  // (out, in), as MindSpore stores it
  Tensor* bias_ = nullptr;
};

// How Conv2d and MaxPool2d pad their input (MindSpore's pad_mode). kPad: `padding` on every side.
// kValid: none. kSame: the output is ceil(input / stride) in each spatial dimension; the total
// padding is split top = total / 2, bottom = the rest (left and right alike), computed from the
// input's size at each call.
enum class PadMode { kPad, kValid, kSame };

// "pad", "valid", "same" (MindSpore's spellings, case-insensitive); throws InvalidArgument naming
// the three for anything else.
PadMode parse_pad_mode(std::string_view text, std::string_view layer);
std::string_view pad_mode_name(PadMode mode);

struct Conv2dConfig {
  int64_t in_channels = 1, out_channels = 1, kernel_size = 3;
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool has_bias = true;
  PadMode pad_mode = PadMode::kPad;  // kValid and kSame need padding 0
};
class Conv2d : public Cell {
 public:
  // Throws InvalidArgument for groups that do not divide the channels, or a padding other than 0
  // with a pad_mode other than kPad (as MindSpore).
  Conv2d(const Conv2dConfig& config, uint64_t seed);
  Tensor forward(const Tensor& x) override;

 private:
  Conv2dConfig config_;
  Tensor& weight_;  // (out, in/groups, k, k)
  Tensor* bias_ = nullptr;
};

class ReLU : public Cell {
 public:
  ReLU() : Cell("ReLU") {}
  Tensor forward(const Tensor& x) override { return ops::relu(x); }
};

class GELU : public Cell {
 public:
  explicit GELU(bool tanh_approximation = true) : Cell("GELU"), tanh_(tanh_approximation) {}
  Tensor forward(const Tensor& x) override { return ops::gelu(x, tanh_); }

 private:
  bool tanh_;
};

// MindSpore's default pad_mode here is kValid; kPad with a padding smaller than the kernel (padded
// cells never win). Throws InvalidArgument for a padding other than 0 with kValid or kSame.
class MaxPool2d : public Cell {
 public:
  MaxPool2d(int64_t kernel_size, int64_t stride, PadMode pad_mode = PadMode::kValid,
            int64_t padding = 0);
  Tensor forward(const Tensor& x) override;

 private:
  int64_t kernel_, stride_;
  PadMode pad_mode_;
  int64_t padding_;
};

class Flatten : public Cell {
 public:
  Flatten() : Cell("Flatten") {}
  Tensor forward(const Tensor& x) override { return ops::flatten(x); }
};

// Normalizes over the last axis of size `features`.
class LayerNorm : public Cell {
 public:
  explicit LayerNorm(int64_t features, double epsilon = 1e-5);
  Tensor forward(const Tensor& x) override;

 private:
  double epsilon_;
  Tensor& gamma_;
  Tensor& beta_;
};

// MindSpore's BatchNorm2d over (N, C, H, W). Training (set_train): normalizes with the batch's
// mean and biased variance and updates the moving statistics, moving = momentum * moving +
// (1 - momentum) * batch (MindSpore's convention: momentum weighs the old value; the variance is
// the unbiased one), in place through the assign op in both modes. Otherwise: the moving
// statistics. gamma and beta train; moving_mean and moving_variance do not (requires_grad false).
struct BatchNormConfig {
  double eps = 1e-5;
  double momentum = 0.9;  // in [0, 1]
  bool affine = true;     // false: gamma and beta stay 1 and 0 and do not train
  // Whether to normalize with batch statistics: empty follows training(), as MindSpore's None.
  std::optional<bool> use_batch_statistics = std::nullopt;
};
class BatchNorm2d : public Cell {
 public:
  // InvalidArgument for num_features < 1, eps <= 0 or momentum outside [0, 1].
  explicit BatchNorm2d(int64_t num_features, BatchNormConfig config = {});
  Tensor forward(const Tensor& x) override;

 private:
  int64_t features_;
  BatchNormConfig config_;
  Tensor &gamma_, &beta_, &moving_mean_, &moving_variance_;
};

// MindSpore's Dropout(p): while training, each element is zeroed with probability p and the rest
// scaled by 1 / (1 - p); otherwise the identity. The draws hash (seed, step, element), so a run
// repeats exactly in either mode; the step is the layer's int64 "counter" (no gradient), advanced
// in place at every training call. Without a seed, layers take 0, 1, 2, ... in creation order.
class Dropout : public Cell {
 public:
  // InvalidArgument for p outside [0, 1).
  explicit Dropout(double p = 0.5, std::optional<uint64_t> seed = std::nullopt);
  Tensor forward(const Tensor& x) override;

 private:
  double p_;
  uint64_t seed_;
  Tensor& counter_;
};

class Softmax : public Cell {
 public:
  explicit Softmax(int64_t axis = -1) : Cell("Softmax"), axis_(axis) {}
  Tensor forward(const Tensor& x) override { return ops::softmax(x, axis_); }

 private:
  int64_t axis_;
};

// Self-attention over x of shape (batch, seq, d_model) with `heads` heads.
class MultiHeadAttention : public Cell {
 public:
  MultiHeadAttention(int64_t d_model, int64_t heads, uint64_t seed);
  Tensor forward(const Tensor& x) override;

 private:
  int64_t d_model_, heads_;
  Dense &query_, &key_, &value_, &output_;
  Softmax& softmax_;
};

// A pre-LayerNorm encoder block: x + attention(norm1(x)), then y + ffn(norm2(y)), ffn =
// dense2(gelu(dense1)).
class TransformerEncoderLayer : public Cell {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t heads, int64_t ffn_hidden, uint64_t seed);
  Tensor forward(const Tensor& x) override;

 private:
  LayerNorm &norm1_, &norm2_;
  MultiHeadAttention& attention_;
  Dense& dense1_;
  GELU& gelu_;
  Dense& dense2_;
};

// Runs its children in order; they are named "0", "1", ... as in MindSpore's SequentialCell.
class Sequential : public Cell {
 public:
  Sequential() : Cell("SequentialCell") {}
  template <typename C>
  Sequential& add(std::unique_ptr<C> cell) {
    layers_.push_back(&register_child(std::to_string(layers_.size()), std::move(cell)));
    return *this;
  }
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<Cell*> layers_;
};

}  // namespace mf::nn
