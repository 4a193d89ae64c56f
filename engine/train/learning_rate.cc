#include "engine/train/learning_rate.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/error.h"

namespace mf::nn {
namespace {

// A list longer than this is a mistake (a step count from a typo), not a schedule.
constexpr int64_t kMaxSteps = int64_t{1} << 28;

void check_steps(int64_t total_step, int64_t step_per_epoch, int64_t decay_epoch, const char* fn) {
  MF_CHECK(total_step > 0 && total_step <= kMaxSteps, InvalidArgument, fn,
           ": total_step must be in [1, ", kMaxSteps, "], got ", total_step);
  MF_CHECK(step_per_epoch > 0, InvalidArgument, fn, ": step_per_epoch must be positive, got ",
           step_per_epoch);
  MF_CHECK(decay_epoch > 0, InvalidArgument, fn, ": decay_epoch must be positive, got ",
           decay_epoch);
}

void check_rate(double value, const char* what) {
  MF_CHECK(std::isfinite(value) && value >= 0, InvalidArgument, what,
           " must be a finite number >= 0, got ", value);
}

}  // namespace

LearningRate::LearningRate(double value) : values_{value} {
  check_rate(value, "learning_rate");
}

LearningRate::LearningRate(std::vector<double> per_step) : values_(std::move(per_step)) {
  MF_CHECK(!values_.empty(), InvalidArgument, "learning_rate: the list of per-step rates is empty");
  for (double v : values_) check_rate(v, "every per-step learning_rate");
}

double LearningRate::at(int64_t step) const {
  const size_t i = std::min<size_t>(size_t(std::max<int64_t>(step, 0)), values_.size() - 1);
  return values_[i];
}

std::vector<double> exponential_decay_lr(double learning_rate, double decay_rate,
                                         int64_t total_step, int64_t step_per_epoch,
                                         int64_t decay_epoch, bool is_stair) {
  check_steps(total_step, step_per_epoch, decay_epoch, "exponential_decay_lr");
  check_rate(learning_rate, "exponential_decay_lr: learning_rate");
  MF_CHECK(std::isfinite(decay_rate) && decay_rate > 0, InvalidArgument,
           "exponential_decay_lr: decay_rate must be positive, got ", decay_rate);
  std::vector<double> out(static_cast<size_t>(total_step));
  for (int64_t i = 0; i < total_step; ++i) {
    const double epoch = double(i / step_per_epoch);
    const double exponent =
        is_stair ? std::floor(epoch / double(decay_epoch)) : epoch / double(decay_epoch);
    out[size_t(i)] = learning_rate * std::pow(decay_rate, exponent);
  }
  return out;
}

std::vector<double> cosine_decay_lr(double min_lr, double max_lr, int64_t total_step,
                                    int64_t step_per_epoch, int64_t decay_epoch) {
  check_steps(total_step, step_per_epoch, decay_epoch, "cosine_decay_lr");
  check_rate(min_lr, "cosine_decay_lr: min_lr");
  check_rate(max_lr, "cosine_decay_lr: max_lr");
  MF_CHECK(max_lr > min_lr, InvalidArgument, "cosine_decay_lr: max_lr (", max_lr,
           ") must be greater than min_lr (", min_lr, ")");
  const double delta = 0.5 * (max_lr - min_lr);
  std::vector<double> out(static_cast<size_t>(total_step));
  for (int64_t i = 0; i < total_step; ++i) {
    const double epoch = double(std::min(i / step_per_epoch, decay_epoch));
    out[size_t(i)] =
        min_lr + delta * (1 + std::cos(std::numbers::pi * epoch / double(decay_epoch)));
  }
  return out;
}

std::vector<double> piecewise_constant_lr(const std::vector<int64_t>& milestone,
                                          const std::vector<double>& learning_rates) {
  MF_CHECK(!milestone.empty() && milestone.size() == learning_rates.size(), InvalidArgument,
           "piecewise_constant_lr: milestone and learning_rates must be non-empty and of one "
           "length, got ",
           milestone.size(), " and ", learning_rates.size());
  std::vector<double> out;
  int64_t last = 0;
  for (size_t i = 0; i < milestone.size(); ++i) {
    MF_CHECK(milestone[i] > last && milestone[i] <= kMaxSteps, InvalidArgument,
             "piecewise_constant_lr: milestone must increase strictly from above 0 (at most ",
             kMaxSteps, "), got ", milestone[i], " at position ", i);
    check_rate(learning_rates[i], "piecewise_constant_lr: every learning rate");
    out.insert(out.end(), size_t(milestone[i] - last), learning_rates[i]);
    last = milestone[i];
  }
  return out;
}

}  // namespace mf::nn
