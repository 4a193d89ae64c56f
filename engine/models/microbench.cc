// The single-purpose networks that benchmarks sweep: a long elementwise chain over 8M floats
// (transcendental: bound by its math), a chain of eight one-instruction ops over 8M floats (bound
// by memory once fused), layernorm and softmax over (4096, 1024) rows (as the composite op, and
// written op by op), and 1,000 dependent adds on 16 floats (per-op overhead).
#include "engine/models/registry.h"
#include "engine/nn/layers.h"

namespace mf::models {
namespace {

// y = gelu_tanh(x*1.5+0.5) * sigmoid(x) + tanh(x) - 0.25*x
class Elementwise : public nn::Cell {
 public:
  Elementwise() : Cell("Elementwise") {}
  Tensor forward(const Tensor& x) override {
    Tensor a = ops::gelu(ops::add(ops::mul(x, ops::scalar(1.5)), ops::scalar(0.5)), true);
    Tensor b = ops::mul(a, ops::sigmoid(x));
    return ops::sub(ops::add(b, ops::tanh(x)), ops::mul(ops::scalar(0.25), x));
  }
};

// y = min(relu(x*1.5+0.5), 6) - 0.25*x + |x|: eight ops of one instruction each.
class ClampChain : public nn::Cell {
 public:
  ClampChain() : Cell("ClampChain") {}
  Tensor forward(const Tensor& x) override {
    Tensor y = ops::add(ops::mul(x, ops::scalar(1.5)), ops::scalar(0.5));
    y = ops::minimum(ops::relu(y), ops::scalar(6.0));
    return ops::add(ops::sub(y, ops::mul(ops::scalar(0.25), x)), ops::abs(x));
  }
};

class RowLayerNorm : public nn::Cell {
 public:
  RowLayerNorm()
      : Cell("LayerNormNet"),
        norm_(register_child("norm", std::make_unique<nn::LayerNorm>(1024))) {}
  Tensor forward(const Tensor& x) override { return norm_(x); }

 private:
  nn::LayerNorm& norm_;
};

class RowSoftmax : public nn::Cell {
 public:
  RowSoftmax()
      : Cell("SoftmaxNet"),
        softmax_(register_child("softmax", std::make_unique<nn::Softmax>(-1))) {}
  Tensor forward(const Tensor& x) override { return softmax_(x); }

 private:
  nn::Softmax& softmax_;
};

// softmax written op by op, as hand-written code and ONNX exports before opset 13 give it:
// exp(x - max) / sum. Unfused, five passes over memory; stitched (opt_level 3), one.
class OpByOpSoftmax : public nn::Cell {
 public:
  OpByOpSoftmax() : Cell("SoftmaxOpsNet") {}
  Tensor forward(const Tensor& x) override {
    const Tensor e = ops::exp(ops::sub(x, ops::reduce_max(x, {-1}, true)));
    return ops::div(e, ops::reduce_sum(e, {-1}, true));
  }
};

// layer_norm written op by op, as ONNX exports before opset 17 give it: (x - mean) /
// sqrt(var + eps) * gamma + beta, with its own weights.
class OpByOpLayerNorm : public nn::Cell {
 public:
  explicit OpByOpLayerNorm(uint64_t seed)
      : Cell("LayerNormOpsNet"),
        gamma_(register_parameter("gamma", Tensor::randn({1024}, seed, 0.1))),
        beta_(register_parameter("beta", Tensor::randn({1024}, seed + 1, 0.1))) {}
  Tensor forward(const Tensor& x) override {
    const Tensor centred = ops::sub(x, ops::reduce_mean(x, {-1}, true));
    const Tensor var = ops::reduce_mean(ops::mul(centred, centred), {-1}, true);
    const Tensor rstd = ops::div(ops::scalar(1.0), ops::sqrt(ops::add(var, ops::scalar(1e-5))));
    return ops::add(ops::mul(ops::mul(centred, rstd), gamma_), beta_);
  }

 private:
  Tensor& gamma_;
  Tensor& beta_;
};

class Chain : public nn::Cell {
 public:
  explicit Chain(uint64_t seed)
      : Cell("Chain"), step_(register_parameter("step", Tensor::randn({16}, seed, 1e-3))) {}
  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (int i = 0; i < 1000; ++i) y = ops::add(y, step_);
    return y;
  }

 private:
  Tensor& step_;
};

}  // namespace

NetSpec elementwise_spec() {
  return {"elementwise", "8,388,608 floats: gelu_tanh(x*1.5+0.5)*sigmoid(x) + tanh(x) - 0.25*x",
          [](uint64_t) { return std::make_unique<Elementwise>(); },
          [](uint64_t seed) { return Tensor::randn({8388608}, seed + 1000); }};
}

NetSpec clamp_chain_spec() {
  return {"clamp_chain", "8,388,608 floats: min(relu(x*1.5+0.5), 6) - 0.25*x + |x|",
          [](uint64_t) { return std::make_unique<ClampChain>(); },
          [](uint64_t seed) { return Tensor::randn({8388608}, seed + 1000); }};
}

NetSpec layernorm_spec() {
  return {"layernorm", "layer_norm over the last axis of (4096, 1024)",
          [](uint64_t) { return std::make_unique<RowLayerNorm>(); },
          [](uint64_t seed) {
            return Tensor::randn({4096, 1024}, seed + 1000);
          }};
}

NetSpec softmax_spec() {
  return {"softmax", "softmax over the last axis of (4096, 1024)",
          [](uint64_t) { return std::make_unique<RowSoftmax>(); },
          [](uint64_t seed) {
            return Tensor::randn({4096, 1024}, seed + 1000);
          }};
}

NetSpec softmax_ops_spec() {
  return {"softmax_ops",
          "softmax written op by op: exp(x - max) / sum over the last axis of (4096, 1024)",
          [](uint64_t) { return std::make_unique<OpByOpSoftmax>(); },
          [](uint64_t seed) {
            return Tensor::randn({4096, 1024}, seed + 1000);
          }};
}

NetSpec layernorm_ops_spec() {
  return {
      "layernorm_ops",
      "layer_norm written op by op: (x - mean) / sqrt(var + eps) * gamma + beta over (4096, 1024)",
      [](uint64_t seed) { return std::make_unique<OpByOpLayerNorm>(seed); },
      [](uint64_t seed) {
        return Tensor::randn({4096, 1024}, seed + 1000);
      }};
}

NetSpec chain_spec() {
  return {"chain", "1,000 dependent adds on 16 floats (per-op overhead)",
          [](uint64_t seed) { return std::make_unique<Chain>(seed); },
          [](uint64_t seed) { return Tensor::randn({16}, seed + 1000); }};
}

}  // namespace mf::models
