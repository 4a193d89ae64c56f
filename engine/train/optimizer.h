#pragma once
// MindSpore's optimizers, with its update formulas and defaults. An optimizer holds the parameters
// it trains (the cell's own tensors, shared) and its state (moments: tensors of the parameters'
// shapes, named as MindSpore names them, so checkpoints carry them), and step() updates both in
// place: no copy of a weight is made per step, and a compiled graph that binds the weights sees
// the new values on its next run.
//
// Before the rule, each gradient g of parameter p becomes g / loss_scale + weight_decay * p (the
// decay only for parameters it applies to: by default those whose names contain neither "beta"
// nor "gamma"; a group's own weight_decay applies to every parameter of the group). The update
// loop is elementwise and runs in a fixed order, so a step is deterministic.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/nn/cell.h"
#include "engine/tensor.h"
#include "engine/train/learning_rate.h"

namespace mf::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Parameters that share settings (MindSpore's group_params dicts); unset fields take the
// optimizer's.
struct ParamGroup {
  NamedTensors params;
  std::optional<LearningRate> learning_rate;
  std::optional<double> weight_decay;
};

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One gradient per parameter, in parameters() order, of the parameter's type. Waits for queued
  // work first (nothing still reads the old values). InvalidArgument for a count or type mismatch.
  void step(const std::vector<Tensor>& gradients);

  const std::vector<Tensor>& parameters() const { return params_; }
  const std::vector<std::string>& parameter_names() const { return names_; }
  // The state to checkpoint: moments ("moments.fc1.weight"), the step counter ("global_step"),
  // and the optimizer's own scalars ("beta1_power"), as MindSpore names them.
  NamedTensors named_state() const;
  int64_t global_step() const { return step_; }
  // The learning rate the next step of group `group` uses.
  double current_learning_rate(size_t group = 0) const;
  const std::string& name() const { return name_; }

 protected:
  struct Slot {
    size_t group = 0;
    bool decay = false;
    std::vector<Tensor> state;  // the rule's per-parameter state, in add_state order
  };
  // InvalidArgument for an empty list, a parameter given twice, a non-float parameter, negative
  // weight decay or loss_scale <= 0.
  Optimizer(std::string name, std::vector<ParamGroup> groups, LearningRate learning_rate,
            double weight_decay, double loss_scale);
  // Gives every parameter a zero-filled state tensor named prefix + "." + parameter name.
  void add_state(const std::string& prefix);
  // Adds an optimizer-wide scalar to named_state (kept by the subclass, updated in place).
  void add_scalar_state(std::string name, Tensor value);
  // The rule for one float32 parameter; `step` is 0 on the first call. `weight_decay` is the
  // parameter's decay when the rule applies it itself (decay_in_update), else 0.
  virtual void update(Slot& slot, float* param, const float* grad, int64_t n, double lr,
                      double weight_decay, int64_t step) = 0;
  // True for a rule that applies weight decay in its update (AdamWeightDecay) instead of to the
  // gradient.
  bool decay_in_update_ = false;
  // Called once per step after every parameter's update (scalar state such as beta powers).
  virtual void after_step() {}

 private:
  std::string name_;
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<Slot> slots_;
  std::vector<LearningRate> group_rates_;
  std::vector<double> group_decay_;
  std::vector<std::string> state_prefixes_;
  NamedTensors scalar_state_;
  double loss_scale_;
  int64_t step_ = 0;
  Tensor global_step_;  // int32 scalar, as MindSpore keeps it
};

// The trainable parameters of a cell (requires_grad), as one group.
std::vector<ParamGroup> trainable_group(const Cell& cell);

// MindSpore's nn.SGD: with momentum m and dampening d, accum = g on the first step, then
// accum = m*accum + (1 - d)*g; p -= lr * (nesterov ? g + m*accum : accum). Without momentum
// p -= lr*g. nesterov needs momentum > 0 and dampening 0.
struct SGDOptions {
  LearningRate learning_rate = 0.1;
  double momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  double loss_scale = 1.0;
};
class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});

 private:
  void update(Slot& slot, float* param, const float* grad, int64_t n, double lr,
              double weight_decay, int64_t step) override;
  SGDOptions options_;
};

// nn.Momentum: accum = momentum*accum + g; p -= lr * (use_nesterov ? g + momentum*accum : accum).
struct MomentumOptions {
  LearningRate learning_rate = 0.1;
  double momentum = 0.9, weight_decay = 0.0, loss_scale = 1.0;
  bool use_nesterov = false;
};
class Momentum : public Optimizer {
 public:
  Momentum(std::vector<ParamGroup> groups, MomentumOptions options);

 private:
  void update(Slot& slot, float* param, const float* grad, int64_t n, double lr,
              double weight_decay, int64_t step) override;
  MomentumOptions options_;
};

// nn.Adam: m += (g - m)(1 - beta1), v += (g^2 - v)(1 - beta2), lr_t = lr sqrt(1 - beta2^t) /
// (1 - beta1^t), p -= lr_t m / (sqrt(v) + eps). MindSpore adds eps to sqrt(v), not to the
// bias-corrected sqrt(v / (1 - beta2^t)) as PyTorch does: the two agree when eps is 0.
struct AdamOptions {
  LearningRate learning_rate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0, loss_scale = 1.0;
  bool use_nesterov = false;
};
class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});

 private:
  void update(Slot& slot, float* param, const float* grad, int64_t n, double lr,
              double weight_decay, int64_t step) override;
  void after_step() override;
  AdamOptions options_;
  Tensor beta1_power_, beta2_power_;
};

// nn.AdamWeightDecay: the moments as Adam's, no bias correction, and the decay in the update:
// p -= lr (m / (sqrt(v) + eps) + weight_decay p). Its gradient carries no decay term.
struct AdamWeightDecayOptions {
  LearningRate learning_rate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-6, weight_decay = 0.0;
};
class AdamWeightDecay : public Optimizer {
 public:
  AdamWeightDecay(std::vector<ParamGroup> groups, AdamWeightDecayOptions options = {});

 private:
  void update(Slot& slot, float* param, const float* grad, int64_t n, double lr,
              double weight_decay, int64_t step) override;
  AdamWeightDecayOptions options_;
};

}  // namespace mf::nn
