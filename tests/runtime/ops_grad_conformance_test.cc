// One test walks the op registry's backward rules: for every op with a rule and every sample, the
// rule runs on a GradBuilder whose emitted ops are their double-precision references, and each
// input's gradient must match central finite differences of sum(dout * op(inputs)), element by
// element. The builder enforces the rule's contract: reading a forward value its GradNeeds does not
// declare, giving a gradient not of exactly its input's type, or giving one to an input that did
// not ask for it, is an error.
//
// Negative controls prove the harness can fail: a real rule scaled by 2, a rule that reads an input
// it did not declare, and a rule that skips the sum back over broadcast axes must each be caught.
//
// Nothing here names an op, except to copy a real one for a negative control.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <string>

#include "base/error.h"
#include "ir/grad_builder.h"
#include "ir/op_def.h"

namespace mf::runtime::ops {
namespace {

using ir::DType;
using ir::GradValue;
using ir::OpDef;
using ir::RefTensor;
using ir::TensorType;

// A value of the reference builder: its static type and its values in double.
struct Tensor {
  TensorType type;
  RefTensor value;
};

bool declared(uint32_t mask, size_t position) {
  return position < 32 ? ((mask >> position) & 1u) != 0 : mask == ir::kAllPositions;
}

// A GradBuilder that runs every emitted op at once on its double reference (types from the op's
// own inference), and checks the rule's contract as it goes.
class ReferenceGradBuilder final : public ir::GradBuilder {
 public:
  ReferenceGradBuilder(const OpDef& op, ir::Attrs attrs, const std::vector<Tensor>& inputs,
                       const std::vector<Tensor>& outputs, const std::vector<Tensor>& douts,
                       std::vector<bool> wants)
      : op_(op), attrs_(std::move(attrs)), wants_(std::move(wants)), grads_(inputs.size()) {
    for (const Tensor& t : inputs) inputs_.push_back(add(t));
    for (const Tensor& t : outputs) outputs_.push_back(add(t));
    for (const Tensor& t : douts) douts_.push_back(add(t));
  }

  size_t num_inputs() const override { return inputs_.size(); }
  size_t num_outputs() const override { return outputs_.size(); }
  const ir::Attrs& attrs() const override { return attrs_; }
  const TensorType& input_type(size_t i) const override { return type(inputs_.at(i)); }
  const TensorType& output_type(size_t k) const override { return type(outputs_.at(k)); }

  GradValue input(size_t i) override {
    MF_CHECK(declared(op_.grad_needs.inputs, i), Internal, "the backward rule of ", op_.name,
             " reads input ", i, ", which its GradNeeds does not declare");
    if (i < 32) read_.inputs |= 1u << i;
    return inputs_.at(i);
  }
  GradValue output(size_t k) override {
    MF_CHECK(declared(op_.grad_needs.outputs, k), Internal, "the backward rule of ", op_.name,
             " reads output ", k, ", which its GradNeeds does not declare");
    if (k < 32) read_.outputs |= 1u << k;
    return outputs_.at(k);
  }
  GradValue dout(size_t k) override { return douts_.at(k); }
  bool wants_grad(size_t i) const override { return wants_.at(i); }

  void set_grad(size_t i, GradValue grad) override {
    MF_CHECK(i < grads_.size(), Internal, "the backward rule of ", op_.name,
             " sets a gradient for input ", i, " of ", grads_.size());
    MF_CHECK(!grads_[i], Internal, "the backward rule of ", op_.name,
             " sets the gradient of input ", i, " twice");
    MF_CHECK(wants_[i], Internal, "the backward rule of ", op_.name, " sets a gradient for input ",
             i, ", which does not want one");
    MF_CHECK(type(grad) == input_type(i), Internal, "the backward rule of ", op_.name,
             " gives input ", i, " a gradient of type ", ir::type_to_string(type(grad)),
             "; the input is ", ir::type_to_string(input_type(i)));
    grads_[i] = grad;
  }

  const TensorType& type(GradValue value) const override { return at(value).type; }

  std::vector<GradValue> emit(std::string_view name, std::vector<GradValue> inputs,
                              ir::Attrs attrs) override {
    const OpDef& def = ir::get_op(name);
    std::vector<TensorType> types;
    std::vector<RefTensor> values;
    for (GradValue v : inputs) {
      types.push_back(at(v).type);
      values.push_back(at(v).value);
    }
    const std::vector<TensorType> out_types = def.infer_types(types, attrs);
    std::vector<RefTensor> out = def.reference(values, attrs);
    MF_CHECK(out.size() == out_types.size(), Internal, name, ": the reference gives ", out.size(),
             " outputs, inference ", out_types.size());
    std::vector<GradValue> ids;
    for (size_t k = 0; k < out.size(); ++k) {
      MF_CHECK(out[k].shape == out_types[k].shape, Internal, name, ": the reference computes ",
               ir::shape_to_string(out[k].shape), ", inference says ",
               ir::type_to_string(out_types[k]));
      ids.push_back(add({out_types[k], std::move(out[k])}));
    }
    return ids;
  }

  GradValue scalar(double value, DType dtype) override { return add({{dtype, {}}, {{}, {value}}}); }

  // The forward values the rule read.
  ir::GradNeeds read() const { return read_; }
  // The gradient the rule gave input i; zeros when it gave none.
  std::vector<double> grad(size_t i) const {
    if (!grads_.at(i)) return std::vector<double>(ir::num_elements(input_type(i).shape), 0.0);
    return at(*grads_[i]).value.values;
  }

 private:
  GradValue add(Tensor t) {
    values_.push_back(std::move(t));
    return GradValue{static_cast<int32_t>(values_.size() - 1)};
  }
  const Tensor& at(GradValue v) const {
    MF_CHECK(v.id >= 0 && size_t(v.id) < values_.size(), Internal, "the backward rule of ",
             op_.name, " uses a value (", v.id, ") this builder never made");
    return values_[v.id];
  }

  const OpDef& op_;
  ir::Attrs attrs_;
  std::vector<bool> wants_;
  std::deque<Tensor> values_;  // a deque: types handed out by reference stay put
  std::vector<GradValue> inputs_, outputs_, douts_;
  std::vector<std::optional<GradValue>> grads_;
  ir::GradNeeds read_;
};

// Inputs drawn as the kernel conformance test draws them: floats uniform in the sample's range,
// integers 5 times it rounded, Bools fair.
std::vector<double> random_values(const TensorType& type, const ir::OpSample& s,
                                  std::mt19937_64& rng) {
  std::vector<double> values(ir::num_elements(type.shape));
  std::uniform_real_distribution<double> real(s.input_low, s.input_high);
  for (double& v : values) {
    if (ir::is_floating(type.dtype)) {
      v = real(rng);
    } else if (type.dtype == DType::kBool) {
      v = (rng() & 1) ? 1.0 : 0.0;
    } else {
      v = std::round(5.0 * real(rng));
    }
  }
  return values;
}

// The central difference step for a value: relative above 1, so the perturbation is never lost
// in its rounding, and small enough that the curvature of the samples' functions (log and rsqrt
// near 0.1, tan near 1.2) contributes below 1e-9. An op whose Float32 output comes from a Float64
// input (a narrowing cast) rounds in its reference: there the step is far above the output's
// resolution (2^-24), and the four-point stencil keeps the truncation error as small.
double step_for(double x, bool narrowing) {
  return (narrowing ? 1e-2 : 1e-6) * std::max(1.0, std::abs(x));
}

bool narrows(const std::vector<TensorType>& inputs, const std::vector<TensorType>& outputs) {
  bool wide_in = false, narrow_out = false;
  for (const TensorType& t : inputs) wide_in = wide_in || t.dtype == DType::kFloat64;
  for (const TensorType& t : outputs) narrow_out = narrow_out || t.dtype == DType::kFloat32;
  return wide_in && narrow_out;
}

// |analytic - numeric| <= kTolerance (1 + |numeric|).
constexpr double kTolerance = 1e-5;
// At a kink (relu at 0, floor at an integer, a max where two inputs tie) the derivative does not
// exist: the one-sided differences part by O(1), where smooth functions part by step * f'' (below
// 1e-3 for the samples). Such points are skipped, and a case may skip at most a tenth of its
// points: a rule is not excused wholesale.
constexpr double kKink = 1e-3;
// At most this many elements per input are checked (every element of smaller inputs), fewer when
// the op's tensors are large, so that the two reference runs per element stay cheap.
constexpr int64_t kMaxPoints = 32;
constexpr int64_t kMinPoints = 4;
constexpr int64_t kElementBudget = int64_t{1} << 21;

struct Outcome {
  int checked = 0;
  int skipped = 0;
};

std::vector<int64_t> points_to_check(int64_t size, int64_t limit, std::mt19937_64& rng) {
  std::vector<int64_t> points;
  if (size <= limit) {
    for (int64_t p = 0; p < size; ++p) points.push_back(p);
    return points;
  }
  points = {0, size - 1};
  std::uniform_int_distribution<int64_t> pick(1, size - 2);
  while (int64_t(points.size()) < limit) points.push_back(pick(rng));
  return points;
}

// One sample's forward on its reference: random inputs in the sample's range, the outputs, and a
// random dout per float output (zeros for the others). Every float input wants a gradient.
struct Forward {
  ir::Attrs attrs;  // the sample's, defaults filled
  std::vector<Tensor> inputs, outputs, douts;
  std::vector<RefTensor> values, y;
  std::vector<bool> wants;
  int64_t elements = 0;  // in inputs and outputs
};

Forward run_forward(const OpDef& op, const ir::OpSample& s, std::mt19937_64& rng) {
  Forward f;
  f.attrs = s.attrs;
  const std::vector<TensorType> out_types = op.infer_types(s.inputs, f.attrs);
  for (const TensorType& t : s.inputs) {
    f.inputs.push_back({t, {t.shape, random_values(t, s, rng)}});
    f.values.push_back(f.inputs.back().value);
    f.wants.push_back(ir::is_floating(t.dtype));
    f.elements += ir::num_elements(t.shape);
  }
  f.y = op.reference(f.values, f.attrs);
  MF_CHECK(f.y.size() == out_types.size(), Internal, op.name, ": the reference gives ", f.y.size(),
           " outputs, inference ", out_types.size());
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (size_t k = 0; k < f.y.size(); ++k) {
    f.outputs.push_back({out_types[k], f.y[k]});
    RefTensor d = f.y[k];
    for (double& v : d.values) v = ir::is_floating(out_types[k].dtype) ? unit(rng) : 0.0;
    f.douts.push_back({out_types[k], d});
    f.elements += ir::num_elements(f.y[k].shape);
  }
  return f;
}

std::mt19937_64 rng_for(const OpDef& op, size_t sample) {
  std::seed_seq seed(op.name.begin(), op.name.end());
  std::mt19937_64 rng(seed);
  rng.discard(sample * 7919);
  return rng;
}

// Every check of one op sample, reported as gtest failures (so a negative control can expect
// them). `op` may be a test-only copy of a registered op.
Outcome check_gradients(const OpDef& op, const ir::OpSample& s, size_t sample) {
  Outcome outcome;
  std::mt19937_64 rng = rng_for(op, sample);
  Forward f;
  try {
    f = run_forward(op, s, rng);
  } catch (const Error& e) {
    ADD_FAILURE() << "the forward fails: " << e.what();
    return outcome;
  }
  const std::vector<RefTensor>& values = f.values;
  const std::vector<RefTensor>& y = f.y;
  const std::vector<bool>& wants = f.wants;

  ReferenceGradBuilder builder(op, f.attrs, f.inputs, f.outputs, f.douts, wants);
  try {
    op.backward(builder);
  } catch (const Error& e) {
    ADD_FAILURE() << "the backward rule fails: " << e.what();
    return outcome;
  }

  // sum(dout * (a - b)) over the float outputs: only elements that moved contribute, so the sum
  // loses nothing to the unchanged rest of a large output.
  auto weighted_change = [&](const std::vector<RefTensor>& a, const std::vector<RefTensor>& b) {
    double sum = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      for (size_t j = 0; j < a[k].values.size(); ++j) {
        const double change = a[k].values[j] - b[k].values[j];
        if (change != 0) sum += f.douts[k].value.values[j] * change;
      }
    }
    return sum;
  };

  const int64_t limit =
      std::clamp(kElementBudget / std::max<int64_t>(1, f.elements), kMinPoints, kMaxPoints);
  std::vector<TensorType> out_types;
  for (const Tensor& t : f.outputs) out_types.push_back(t.type);
  const bool narrowing = narrows(s.inputs, out_types);
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    if (!wants[i]) continue;
    SCOPED_TRACE("input " + std::to_string(i));
    const std::vector<double> analytic = builder.grad(i);
    int reported = 0;
    for (int64_t p : points_to_check(int64_t(analytic.size()), limit, rng)) {
      const double x = values[i].values[p], h = step_for(x, narrowing);
      std::vector<RefTensor> moved = values;
      auto at = [&](double v) {
        moved[i].values[p] = v;
        return op.reference(moved, f.attrs);
      };
      const std::vector<RefTensor> up = at(x + h), down = at(x - h);
      const double forward = weighted_change(up, y) / h;
      const double backward = weighted_change(y, down) / h;
      double central = weighted_change(up, down) / (2 * h);
      if (narrowing) {
        central = (8 * weighted_change(up, down) - weighted_change(at(x + 2 * h), at(x - 2 * h))) /
                  (12 * h);
      }
      if (!std::isfinite(central) ||
          std::abs(forward - backward) > kKink * (1 + std::abs(central))) {
        ++outcome.skipped;
        continue;
      }
      ++outcome.checked;
      if (!(std::abs(analytic[p] - central) <= kTolerance * (1 + std::abs(central))) &&
          reported++ < 5) {
        ADD_FAILURE() << "element " << p << ": rule " << analytic[p] << ", finite difference "
                      << central;
      }
    }
  }
  EXPECT_LE(outcome.skipped * 10, outcome.checked + outcome.skipped)
      << outcome.skipped << " points sit at kinks; too many to call it chance";

  // Asked for one input at a time, the rule gives that input the same gradient and no other.
  size_t wanted = std::count(wants.begin(), wants.end(), true);
  for (size_t i = 0; wanted > 1 && i < f.inputs.size(); ++i) {
    if (!wants[i]) continue;
    std::vector<bool> only(f.inputs.size(), false);
    only[i] = true;
    ReferenceGradBuilder alone(op, f.attrs, f.inputs, f.outputs, f.douts, only);
    try {
      op.backward(alone);
    } catch (const Error& e) {
      ADD_FAILURE() << "asked for input " << i << " alone, the backward rule fails: " << e.what();
      continue;
    }
    const std::vector<double> all = builder.grad(i), one = alone.grad(i);
    for (size_t p = 0; p < all.size(); ++p) {
      if (!(std::abs(all[p] - one[p]) <= 1e-12 * (1 + std::abs(all[p])))) {
        ADD_FAILURE() << "input " << i << " element " << p << ": " << one[p] << " asked alone, "
                      << all[p] << " with the others";
        break;
      }
    }
  }
  return outcome;
}

struct Case {
  const OpDef* op;
  size_t sample;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const OpDef* op : ir::all_ops()) {
    if (!op->backward) continue;
    for (size_t i = 0; i < op->samples.size(); ++i) cases.push_back({op, i});
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.op->name + "_" + std::to_string(info.param.sample);
}

bool has_float_input(const ir::OpSample& s) {
  for (const TensorType& t : s.inputs) {
    if (ir::is_floating(t.dtype) && ir::num_elements(t.shape) > 0) return true;
  }
  return false;
}

class OpGradConformance : public ::testing::TestWithParam<Case> {};

TEST_P(OpGradConformance, RuleMatchesFiniteDifferences) {
  const OpDef& op = *GetParam().op;
  const ir::OpSample& s = op.samples[GetParam().sample];
  const Outcome outcome = check_gradients(op, s, GetParam().sample);
  // A sample with a float element to differentiate must check some of them.
  if (has_float_input(s)) {
    EXPECT_GE(outcome.checked, 1);
  }
  RecordProperty("points_checked", outcome.checked);
  RecordProperty("points_skipped_at_kinks", outcome.skipped);
}

INSTANTIATE_TEST_SUITE_P(Registry, OpGradConformance, ::testing::ValuesIn(all_cases()), case_name);

// Ops whose gradient is needed but missing: a float output depending on a float input, no rule,
// not declared kNoGradient. (An op with no float input, as zeros or range, has nothing to
// differentiate.) Control flow (call, cond, while) is differentiated through its subgraphs, not by
// a rule. The floor is the number left when the rules were written: losing a rule fails here.
constexpr size_t kMissingRulesFloor = 3;
// Ops with a rule, likewise: a rule lost (or an op newly declared kNoGradient) fails here.
constexpr int kRulesFloor = 84;

bool maps_floats_to_floats(const OpDef& op) {
  for (const ir::OpSample& s : op.samples) {
    if (!has_float_input(s)) continue;
    ir::Attrs attrs = s.attrs;
    try {
      for (const TensorType& t : op.infer_types(s.inputs, attrs)) {
        if (ir::is_floating(t.dtype)) return true;
      }
    } catch (const Error&) {
    }
  }
  return false;
}

TEST(OpGradRegistry, FloatOpsWithoutARule) {
  std::vector<std::string> missing;
  int with_rule = 0;
  for (const OpDef* op : ir::all_ops()) {
    SCOPED_TRACE(op->name);
    EXPECT_FALSE(op->backward && op->has(ir::Trait::kNoGradient))
        << "a rule on an op declared not differentiable";
    if (op->backward) ++with_rule;
    if (op->backward || op->has(ir::Trait::kNoGradient) || op->has(ir::Trait::kControlFlow)) {
      continue;
    }
    if (maps_floats_to_floats(*op)) missing.push_back(op->name);
  }
  std::string list;
  for (const std::string& name : missing) list += " " + name;
  std::cout << with_rule << " ops have a backward rule; " << missing.size()
            << " float ops have none:" << list << "\n";
  EXPECT_LE(missing.size(), kMissingRulesFloor) << "float ops without a backward rule:" << list;
  EXPECT_GE(with_rule, kRulesFloor);
}

// A rule declares what it reads and no more: every forward value its GradNeeds names is read by
// the rule on some sample (else the memory plan keeps a value alive for nothing).
TEST(OpGradRegistry, RulesReadWhatTheyDeclare) {
  int rules = 0;
  for (const OpDef* op : ir::all_ops()) {
    if (!op->backward) continue;
    SCOPED_TRACE(op->name);
    ir::GradNeeds read;
    size_t inputs = 0, outputs = 0;
    for (size_t i = 0; i < op->samples.size(); ++i) {
      std::mt19937_64 rng = rng_for(*op, i);
      const Forward f = run_forward(*op, op->samples[i], rng);
      ReferenceGradBuilder builder(*op, f.attrs, f.inputs, f.outputs, f.douts, f.wants);
      try {
        op->backward(builder);
      } catch (const Error&) {
        continue;  // reported by RuleMatchesFiniteDifferences
      }
      read.inputs |= builder.read().inputs;
      read.outputs |= builder.read().outputs;
      inputs = std::max(inputs, f.inputs.size());
      outputs = std::max(outputs, f.outputs.size());
    }
    const auto within = [](uint32_t mask, size_t n) {
      return n >= 32 ? mask : mask & ((1u << n) - 1);
    };
    EXPECT_EQ(within(op->grad_needs.inputs, inputs), read.inputs) << "inputs declared vs read";
    EXPECT_EQ(within(op->grad_needs.outputs, outputs), read.outputs) << "outputs declared vs read";
    ++rules;
  }
  EXPECT_GE(rules, kRulesFloor);
}

// ---- negative controls ----

// The failure messages `check` reports, intercepted (they do not fail this test).
std::vector<std::string> failures_of(const std::function<void()>& check) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    check();
  }
  std::vector<std::string> messages;
  for (int i = 0; i < results.size(); ++i) {
    messages.push_back(results.GetTestPartResult(i).message());
  }
  return messages;
}

// Whether the harness, over the first samples of `op`, reported a failure containing `needle`.
::testing::AssertionResult harness_reports(const OpDef& op, const std::string& needle) {
  const std::vector<std::string> messages = failures_of([&] {
    for (size_t i = 0; i < std::min<size_t>(op.samples.size(), 4); ++i) {
      check_gradients(op, op.samples[i], i);
    }
  });
  for (const std::string& m : messages) {
    if (m.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  }
  auto result = ::testing::AssertionFailure()
                << "the broken rule passed the harness: no failure mentions '" << needle << "' ("
                << messages.size() << " failures)";
  for (const std::string& m : messages) result << "\n  " << m;
  return result;
}

// Forwards everything to another builder but doubles every gradient it is given.
class DoublingBuilder final : public ir::GradBuilder {
 public:
  explicit DoublingBuilder(ir::GradBuilder& inner) : inner_(inner) {}
  size_t num_inputs() const override { return inner_.num_inputs(); }
  size_t num_outputs() const override { return inner_.num_outputs(); }
  const ir::Attrs& attrs() const override { return inner_.attrs(); }
  const TensorType& input_type(size_t i) const override { return inner_.input_type(i); }
  const TensorType& output_type(size_t k) const override { return inner_.output_type(k); }
  GradValue input(size_t i) override { return inner_.input(i); }
  GradValue output(size_t k) override { return inner_.output(k); }
  GradValue dout(size_t k) override { return inner_.dout(k); }
  bool wants_grad(size_t i) const override { return inner_.wants_grad(i); }
  void set_grad(size_t i, GradValue g) override {
    inner_.set_grad(i, inner_.op("mul", {g, inner_.scalar(2, inner_.type(g).dtype)}));
  }
  const TensorType& type(GradValue v) const override { return inner_.type(v); }
  std::vector<GradValue> emit(std::string_view op, std::vector<GradValue> inputs,
                              ir::Attrs attrs) override {
    return inner_.emit(op, std::move(inputs), std::move(attrs));
  }
  GradValue scalar(double v, DType dtype) override { return inner_.scalar(v, dtype); }

 private:
  ir::GradBuilder& inner_;
};

TEST(OpGradNegativeControl, ARuleScaledByTwoIsCaught) {
  for (const char* name : {"mul", "softmax", "layer_norm", "matmul"}) {
    SCOPED_TRACE(name);
    OpDef op = ir::get_op(name);
    op.backward = [rule = op.backward](ir::GradBuilder& b) {
      DoublingBuilder doubled(b);
      rule(doubled);
    };
    EXPECT_TRUE(harness_reports(op, "finite difference"));
  }
}

TEST(OpGradNegativeControl, ReadingAnUndeclaredInputIsCaught) {
  OpDef op = ir::get_op("mul");
  op.grad_needs.inputs = 0b01;  // the rule reads both
  EXPECT_TRUE(harness_reports(op, "which its GradNeeds does not declare"));
}

TEST(OpGradNegativeControl, AGradientOfTheWrongShapeIsCaught) {
  OpDef op = ir::get_op("add");
  op.backward = [](ir::GradBuilder& b) {
    for (size_t i = 0; i < 2; ++i) {
      if (b.wants_grad(i)) b.set_grad(i, b.dout(0));  // no sum back over broadcast axes
    }
  };
  EXPECT_TRUE(harness_reports(op, "a gradient of type"));
}

TEST(OpGradNegativeControl, AGradientForAnInputThatDidNotAskIsCaught) {
  OpDef op = ir::get_op("mul");
  op.backward = [](ir::GradBuilder& b) {
    for (size_t i = 0; i < 2; ++i) {
      b.set_grad(i, b.reduce_to(b.op("mul", {b.dout(0), b.input(1 - i)}), b.input_type(i).shape));
    }
  };
  EXPECT_TRUE(harness_reports(op, "which does not want one"));
}

}  // namespace
}  // namespace mf::runtime::ops
