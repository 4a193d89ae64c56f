#include "engine/train/optimizer.h"

#include <cmath>
#include <set>

#include "engine/ops.h"

namespace mf::nn {
namespace {

bool decays_by_default(const std::string& name) {
  return name.find("beta") == std::string::npos && name.find("gamma") == std::string::npos;
}

void check_range(double value, double low, double high, const char* what, const std::string& opt,
                 bool low_open = false, bool high_open = false) {
  const bool above = low_open ? value > low : value >= low;
  const bool below = high_open ? value < high : value <= high;
  MF_CHECK(std::isfinite(value) && above && below, InvalidArgument, opt, ": ", what, " must be in ",
           low_open ? "(" : "[", low, ", ", high, high_open ? ")" : "]", ", got ", value);
}

Tensor float_scalar(double value) {
  return Tensor::full({}, value, DType::kFloat32);
}

}  // namespace

Optimizer::~Optimizer() = default;

Optimizer::Optimizer(std::string name, std::vector<ParamGroup> groups, LearningRate learning_rate,
                     double weight_decay, double loss_scale)
    : name_(std::move(name)), loss_scale_(loss_scale) {
  MF_CHECK(std::isfinite(loss_scale) && loss_scale > 0, InvalidArgument, name_,
           ": loss_scale must be greater than 0, got ", loss_scale);
  check_range(weight_decay, 0, 1e30, "weight_decay", name_);
  const bool grouped = groups.size() > 1 ||
                       (groups.size() == 1 && (groups[0].learning_rate || groups[0].weight_decay));
  std::set<const TensorImpl*> seen;
  for (size_t g = 0; g < groups.size(); ++g) {
    ParamGroup& group = groups[g];
    group_rates_.push_back(group.learning_rate.value_or(learning_rate));
    const double decay = group.weight_decay.value_or(weight_decay);
    check_range(decay, 0, 1e30, "a group's weight_decay", name_);
    group_decay_.push_back(decay);
    for (auto& [pname, tensor] : group.params) {
      MF_CHECK(tensor.defined(), InvalidArgument, name_, ": parameter '", echo(pname),
               "' is undefined");
      MF_CHECK(tensor.dtype() == DType::kFloat32, InvalidArgument, name_, ": parameter '",
               echo(pname), "' is ", ir::type_to_string(tensor.type()),
               "; optimizers train float32 parameters");
      MF_CHECK(seen.insert(tensor.impl().get()).second, InvalidArgument, name_, ": parameter '",
               echo(pname), "' is given twice (a parameter belongs to one group)");
      Slot slot;
      slot.group = g;
      // In groups MindSpore decays what the group's decay says; alone, the name filter applies.
      slot.decay = decay > 0 && (grouped ? true : decays_by_default(pname));
      slots_.push_back(std::move(slot));
      params_.push_back(tensor);
      names_.push_back(pname);
    }
  }
  MF_CHECK(!params_.empty(), InvalidArgument, name_,
           ": the parameter list is empty; pass the network's trainable_params()");
  global_step_ = Tensor::zeros({}, DType::kInt32);
}

void Optimizer::add_state(const std::string& prefix) {
  state_prefixes_.push_back(prefix);
  for (size_t i = 0; i < params_.size(); ++i) {
    slots_[i].state.push_back(Tensor::zeros(params_[i].shape(), params_[i].dtype()));
  }
}

void Optimizer::add_scalar_state(std::string name, Tensor value) {
  scalar_state_.emplace_back(std::move(name), std::move(value));
}

NamedTensors Optimizer::named_state() const {
  NamedTensors out;
  for (size_t k = 0; k < state_prefixes_.size(); ++k) {
    for (size_t i = 0; i < params_.size(); ++i) {
      out.emplace_back(state_prefixes_[k] + "." + names_[i], slots_[i].state[k]);
    }
  }
  for (const auto& entry : scalar_state_) out.push_back(entry);
  out.emplace_back("global_step", global_step_);
  return out;
}

double Optimizer::current_learning_rate(size_t group) const {
  MF_CHECK(group < group_rates_.size(), InvalidArgument, name_, " has ", group_rates_.size(),
           " parameter groups; there is no group ", group);
  return group_rates_[group].at(step_);
}

void Optimizer::step(const std::vector<Tensor>& gradients) {
  MF_CHECK(gradients.size() == params_.size(), InvalidArgument, name_, " trains ", params_.size(),
           " parameters but was given ", gradients.size(), " gradients");
  for (size_t i = 0; i < params_.size(); ++i) {
    MF_CHECK(gradients[i].defined() && gradients[i].type() == params_[i].type(), InvalidArgument,
             name_, ": the gradient of '", echo(names_[i]), "' is ",
             gradients[i].defined() ? ir::type_to_string(gradients[i].type()) : "undefined",
             "; the parameter is ", ir::type_to_string(params_[i].type()));
  }
  // Queued ops may still read the parameters: they run first.
  ops::sync();
  std::vector<float> scaled;
  for (size_t i = 0; i < params_.size(); ++i) {
    Slot& slot = slots_[i];
    const int64_t n = params_[i].numel();
    float* p = static_cast<float*>(params_[i].mutable_raw_data());
    const float* g = gradients[i].data<float>();
    const double decay = slot.decay ? group_decay_[slot.group] : 0.0;
    if (loss_scale_ != 1.0 || (decay > 0 && !decay_in_update_)) {
      const float inv_scale = float(1.0 / loss_scale_);
      const float wd = decay_in_update_ ? 0.0f : float(decay);
      scaled.resize(size_t(n));
      for (int64_t e = 0; e < n; ++e) scaled[size_t(e)] = g[e] * inv_scale + wd * p[e];
      g = scaled.data();
    }
    update(slot, p, g, n, group_rates_[slot.group].at(step_), decay_in_update_ ? decay : 0.0,
           step_);
  }
  after_step();
  ++step_;
  *static_cast<int32_t*>(global_step_.mutable_raw_data()) =
      int32_t(std::min<int64_t>(step_, INT32_MAX));
}

std::vector<ParamGroup> trainable_group(const Cell& cell) {
  ParamGroup group;
  for (auto& [name, tensor] : cell.trainable_params()) group.params.emplace_back(name, tensor);
  return {std::move(group)};
}

// ---- SGD

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer("SGD", std::move(groups), options.learning_rate, options.weight_decay,
                options.loss_scale),
      options_(std::move(options)) {
  check_range(options_.momentum, 0, 1e30, "momentum", name());
  check_range(options_.dampening, 0, 1e30, "dampening", name());
  MF_CHECK(!options_.nesterov || (options_.momentum > 0 && options_.dampening == 0),
           InvalidArgument, "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ",
           options_.momentum, " and dampening ", options_.dampening);
  if (options_.momentum > 0) add_state("accum");
}

void SGD::update(Slot& slot, float* p, const float* g, int64_t n, double lr, double, int64_t step) {
  const float rate = float(lr);
  if (options_.momentum <= 0) {
    for (int64_t i = 0; i < n; ++i) p[i] -= rate * g[i];
    return;
  }
  const float m = float(options_.momentum);
  const float keep = float(1.0 - options_.dampening);
  float* accum = static_cast<float*>(slot.state[0].mutable_raw_data());
  for (int64_t i = 0; i < n; ++i) {
    accum[i] = step == 0 ? g[i] : accum[i] * m + keep * g[i];
    p[i] -= rate * (options_.nesterov ? g[i] + m * accum[i] : accum[i]);
  }
}

// ---- Momentum

Momentum::Momentum(std::vector<ParamGroup> groups, MomentumOptions options)
    : Optimizer("Momentum", std::move(groups), options.learning_rate, options.weight_decay,
                options.loss_scale),
      options_(std::move(options)) {
  check_range(options_.momentum, 0, 1e30, "momentum", name());
  add_state("moments");
}

void Momentum::update(Slot& slot, float* p, const float* g, int64_t n, double lr, double, int64_t) {
  const float rate = float(lr), m = float(options_.momentum);
  float* accum = static_cast<float*>(slot.state[0].mutable_raw_data());
  if (options_.use_nesterov) {
    for (int64_t i = 0; i < n; ++i) {
      accum[i] = accum[i] * m + g[i];
      p[i] -= g[i] * rate + accum[i] * m * rate;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      accum[i] = accum[i] * m + g[i];
      p[i] -= accum[i] * rate;
    }
  }
}

// ---- Adam

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options)
    : Optimizer("Adam", std::move(groups), options.learning_rate, options.weight_decay,
                options.loss_scale),
      options_(std::move(options)) {
  check_range(options_.beta1, 0, 1, "beta1", name(), false, true);
  check_range(options_.beta2, 0, 1, "beta2", name(), false, true);
  check_range(options_.eps, 0, 1e30, "eps", name());
  add_state("moment1");
  add_state("moment2");
  beta1_power_ = float_scalar(options_.beta1);
  beta2_power_ = float_scalar(options_.beta2);
  add_scalar_state("beta1_power", beta1_power_);
  add_scalar_state("beta2_power", beta2_power_);
}

void Adam::update(Slot& slot, float* p, const float* g, int64_t n, double lr, double, int64_t) {
  const float b1 = float(options_.beta1), b2 = float(options_.beta2), eps = float(options_.eps);
  const float b1_power = *beta1_power_.data<float>(), b2_power = *beta2_power_.data<float>();
  const float rate = float(lr) * std::sqrt(1.0f - b2_power) / (1.0f - b1_power);
  float* m = static_cast<float*>(slot.state[0].mutable_raw_data());
  float* v = static_cast<float*>(slot.state[1].mutable_raw_data());
  for (int64_t i = 0; i < n; ++i) {
    m[i] += (g[i] - m[i]) * (1.0f - b1);
    v[i] += (g[i] * g[i] - v[i]) * (1.0f - b2);
    const float direction = options_.use_nesterov ? m[i] * b1 + (1.0f - b1) * g[i] : m[i];
    p[i] -= rate * direction / (std::sqrt(v[i]) + eps);
  }
}

void Adam::after_step() {
  float* b1 = static_cast<float*>(beta1_power_.mutable_raw_data());
  float* b2 = static_cast<float*>(beta2_power_.mutable_raw_data());
  *b1 *= float(options_.beta1);
  *b2 *= float(options_.beta2);
}

// ---- AdamWeightDecay

AdamWeightDecay::AdamWeightDecay(std::vector<ParamGroup> groups, AdamWeightDecayOptions options)
    : Optimizer("AdamWeightDecay", std::move(groups), options.learning_rate, options.weight_decay,
                1.0),
      options_(std::move(options)) {
  check_range(options_.beta1, 0, 1, "beta1", name(), false, true);
  check_range(options_.beta2, 0, 1, "beta2", name(), false, true);
  check_range(options_.eps, 0, 1e30, "eps", name(), true);
  decay_in_update_ = true;
  add_state("adam_m");
  add_state("adam_v");
}

void AdamWeightDecay::update(Slot& slot, float* p, const float* g, int64_t n, double lr,
                             double weight_decay, int64_t) {
  const float b1 = float(options_.beta1), b2 = float(options_.beta2), eps = float(options_.eps);
  const float rate = float(lr), wd = float(weight_decay);
  float* m = static_cast<float*>(slot.state[0].mutable_raw_data());
  float* v = static_cast<float*>(slot.state[1].mutable_raw_data());
  for (int64_t i = 0; i < n; ++i) {
    m[i] += (g[i] - m[i]) * (1.0f - b1);
    v[i] += (g[i] * g[i] - v[i]) * (1.0f - b2);
    p[i] -= rate * (m[i] / (std::sqrt(v[i]) + eps) + wd * p[i]);
  }
}

}  // namespace mf::nn
