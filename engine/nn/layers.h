#pragma once
// The standard layers. Weights are drawn from a seed, so a network built twice with the same seed
// is the same network in every mode and on every machine.

#include <cstdint>
#include <memory>
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

struct Conv2dConfig {
  int64_t in_channels = 1, out_channels = 1, kernel_size = 3;
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
  bool has_bias = true;
};
class Conv2d : public Cell {
 public:
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

class MaxPool2d : public Cell {
 public:
  MaxPool2d(int64_t kernel_size, int64_t stride)
      : Cell("MaxPool2d"), kernel_(kernel_size), stride_(stride) {}
  Tensor forward(const Tensor& x) override;

 private:
  int64_t kernel_, stride_;
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
