#pragma once
// Learning rates as MindSpore gives them to an optimizer: one number, or one per step (the list's
// last value holds once the steps pass its end), and MindSpore's functions that make such lists.

#include <cstdint>
#include <vector>

namespace mf::nn {

class LearningRate {
 public:
  // InvalidArgument for a negative or non-finite value, or an empty list.
  LearningRate(double value);  // NOLINT(google-explicit-constructor): a number is a rate
  LearningRate(std::vector<double> per_step);  // NOLINT(google-explicit-constructor)
  double at(int64_t step) const;
  bool dynamic() const { return values_.size() > 1; }
  const std::vector<double>& values() const { return values_; }

 private:
  std::vector<double> values_;
};

// MindSpore's nn.exponential_decay_lr: step i of total_step has learning_rate *
// decay_rate^(epoch / decay_epoch), epoch = i / step_per_epoch (floored when is_stair).
std::vector<double> exponential_decay_lr(double learning_rate, double decay_rate,
                                         int64_t total_step, int64_t step_per_epoch,
                                         int64_t decay_epoch, bool is_stair = false);
// nn.cosine_decay_lr: min_lr + (max_lr - min_lr)/2 * (1 + cos(pi * min(epoch, decay_epoch) /
// decay_epoch)).
std::vector<double> cosine_decay_lr(double min_lr, double max_lr, int64_t total_step,
                                    int64_t step_per_epoch, int64_t decay_epoch);
// nn.piecewise_constant_lr: learning_rates[i] for the steps before milestone[i] (increasing).
std::vector<double> piecewise_constant_lr(const std::vector<int64_t>& milestone,
                                          const std::vector<double>& learning_rates);

}  // namespace mf::nn
