#pragma once
// The losses of a training script, with MindSpore's names, arguments and conventions. Each is
// written in registry ops, so it runs op by op in PYNATIVE mode, is traced into the compiled graph
// in GRAPH mode, and has the gradients of the ops it is made of. A label of the wrong dtype or
// shape is an InvalidArgument naming the loss, the label's type and the type it needs.

#include <memory>
#include <string>
#include <string_view>

#include "engine/tensor.h"

namespace mf::nn {

// How a loss turns per-sample losses into its result (MindSpore's reduction argument).
enum class Reduction { kNone, kMean, kSum };
// "none", "mean", "sum"; InvalidArgument naming the loss for anything else.
Reduction parse_reduction(std::string_view text, std::string_view loss);

// MindSpore's LossBase: a callable of (logits, labels).
class Loss {
 public:
  virtual ~Loss() = default;
  virtual Tensor operator()(const Tensor& logits, const Tensor& labels) = 0;
  virtual std::string name() const = 0;
};

// -sum(labels * log_softmax(logits)) over the last axis. sparse: labels are class indices (an
// integer tensor of logits' shape without its last axis) instead of a distribution. MindSpore's
// default reduction here is kNone.
class SoftmaxCrossEntropyWithLogits : public Loss {
 public:
  explicit SoftmaxCrossEntropyWithLogits(bool sparse = false,
                                         Reduction reduction = Reduction::kNone)
      : sparse_(sparse), reduction_(reduction) {}
  Tensor operator()(const Tensor& logits, const Tensor& labels) override;
  std::string name() const override { return "SoftmaxCrossEntropyWithLogits"; }

 private:
  bool sparse_;
  Reduction reduction_;
};

// Logits (N, C) or (N, C, d...); labels class indices (N) / (N, d...) or probabilities of the
// logits' shape. weight: one per class (undefined: all 1). Class-index labels equal to
// ignore_index add nothing, and kMean divides by the summed weights of the labels that count
// (PyTorch's and MindSpore's convention). label_smoothing mixes the target with the uniform
// distribution.
struct CrossEntropyOptions {
  Tensor weight = Tensor();
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::kMean;
  double label_smoothing = 0.0;
};
class CrossEntropyLoss : public Loss {
 public:
  // InvalidArgument for label_smoothing outside [0, 1] or a weight that is not a float vector.
  explicit CrossEntropyLoss(CrossEntropyOptions options = {});
  Tensor operator()(const Tensor& logits, const Tensor& labels) override;
  std::string name() const override { return "CrossEntropyLoss"; }

 private:
  CrossEntropyOptions options_;
};

// (logits - labels)^2, labels of the logits' shape (or broadcast to it).
class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::kMean) : reduction_(reduction) {}
  Tensor operator()(const Tensor& logits, const Tensor& labels) override;
  std::string name() const override { return "MSELoss"; }

 private:
  Reduction reduction_;
};

// |logits - labels|.
class L1Loss : public Loss {
 public:
  explicit L1Loss(Reduction reduction = Reduction::kMean) : reduction_(reduction) {}
  Tensor operator()(const Tensor& logits, const Tensor& labels) override;
  std::string name() const override { return "L1Loss"; }

 private:
  Reduction reduction_;
};

// Binary cross entropy on logits, computed stably: max(x, 0) - x*y + log(1 + exp(-|x|)), with
// pos_weight p: (1 - y) x + (1 + (p - 1) y) (log(1 + exp(-|x|)) + max(-x, 0)). weight and
// pos_weight (undefined: none) broadcast against the logits.
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(Reduction reduction = Reduction::kMean, Tensor weight = {},
                             Tensor pos_weight = {})
      : reduction_(reduction), weight_(std::move(weight)), pos_weight_(std::move(pos_weight)) {}
  Tensor operator()(const Tensor& logits, const Tensor& labels) override;
  std::string name() const override { return "BCEWithLogitsLoss"; }

 private:
  Reduction reduction_;
  Tensor weight_, pos_weight_;
};

}  // namespace mf::nn
