// The library activations inside a float32 convolution (conv-epilogue-fusion with
// deterministic=OFF: silu, sigmoid, hardswish, hardsigmoid) run as oneDNN's eltwise post-ops, in
// oneDNN's math. The bound they keep, against the double reference of the convolution and its
// activation, next to the separate ops' own error on the same data:
//   |fused - reference| <= kLibraryEpilogueBound * (1 + |reference|)
// and never more than 4x the separate ops' largest error plus 1e-6 (oneDNN's math is no rougher
// than ours). Convolution outputs reach +-8, the range where the activations bend. Measured on an
// AVX2 machine: fused / separate 6.7e-7 / 6.7e-7 (silu), 2.1e-7 / 1.9e-7 (sigmoid), 8.8e-7 /
// 8.2e-7 (hardswish), 2.9e-7 / 2.8e-7 (hardsigmoid).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "ir/op_def.h"
#include "tests/runtime/ops_test_util.h"

namespace mf::runtime::ops {
namespace {

using testing::HostTensor;
using testing::run;

constexpr ir::DType f = ir::DType::kFloat32;
constexpr double kLibraryEpilogueBound = 2e-6;

std::vector<double> spread(int64_t n, double low, double high, uint32_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  uint32_t state = seed;
  for (double& x : v) {
    state = state * 1664525u + 1013904223u;
    x = low + (high - low) * static_cast<double>(state >> 8) / static_cast<double>(1u << 24);
  }
  return v;
}

// The largest |got - want| / (1 + |want|).
double error(const HostTensor& got, const std::vector<double>& want) {
  double worst = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got.get(i) - want[i]) / (1 + std::abs(want[i])));
  }
  return worst;
}

// y as the separate ops compute it: the convolution, then the activation's ops.
HostTensor separate_ops(std::vector<HostTensor>& in, const ir::Attrs& bare,
                        const std::string& activation) {
  std::vector<HostTensor> y = {run("conv2d", in, bare, 1, false)};
  const HostTensor sixth = HostTensor::from_doubles({f, {}}, {1.0 / 6.0});
  const HostTensor half = HostTensor::from_doubles({f, {}}, {0.5});
  const HostTensor zero = HostTensor::from_doubles({f, {}}, {0.0});
  const HostTensor one = HostTensor::from_doubles({f, {}}, {1.0});
  auto binary = [](const char* op, HostTensor a, HostTensor b) {
    std::vector<HostTensor> operands = {std::move(a), std::move(b)};
    return run(op, operands, {}, 1, false);
  };
  if (activation == "sigmoid" || activation == "silu") {
    HostTensor s = run("sigmoid", y, {}, 1, false);
    return activation == "sigmoid" ? s : binary("mul", y[0], s);
  }
  HostTensor h = binary(
      "minimum", binary("maximum", binary("add", binary("mul", y[0], sixth), half), zero), one);
  return activation == "hardsigmoid" ? h : binary("mul", y[0], h);
}

TEST(ConvLibraryEpilogue, OneDnnMathStaysWithinTheStatedBound) {
  // Channels-last (the blocked path with the post-op), a 3x3 over 16 channels with bias.
  const ir::TensorType x{f, {1, 11, 13, 16}}, w{f, {24, 16, 3, 3}}, b{f, {24}};
  std::vector<HostTensor> in = {HostTensor::from_doubles(x, spread(11 * 13 * 16, -1, 1, 1)),
                                HostTensor::from_doubles(w, spread(24 * 16 * 9, -0.25, 0.25, 2)),
                                HostTensor::from_doubles(b, spread(24, -2, 2, 3))};
  std::vector<ir::RefTensor> ref_in;
  for (const HostTensor& t : in) ref_in.push_back({t.type.shape, t.to_doubles()});
  ir::Attrs bare = testing::conv({1, 1}, {1, 1}, 1);
  bare["data_format"] = std::string("NHWC");
  const ir::OpDef& op = ir::get_op("conv2d");
  ir::Attrs filled = bare;
  const std::vector<ir::TensorType> types = {x, w, b};
  op.infer_types(types, filled);
  for (const std::string activation : {"silu", "sigmoid", "hardswish", "hardsigmoid"}) {
    SCOPED_TRACE(activation);
    ir::Attrs attrs = filled;
    attrs["activation"] = activation;
    const std::vector<double> want = op.reference(ref_in, attrs)[0].values;
    double largest = 0;
    for (double v : op.reference(ref_in, filled)[0].values)
      largest = std::max(largest, std::abs(v));
    ASSERT_GT(largest, 4.0) << "the outputs must reach where the activation bends";
    const double fused = error(run("conv2d", in, attrs, 1, false), want);
    const double own = error(separate_ops(in, filled, activation), want);
    EXPECT_LE(fused, kLibraryEpilogueBound);
    EXPECT_LE(fused, 4 * own + 1e-6);
  }
}

}  // namespace
}  // namespace mf::runtime::ops
