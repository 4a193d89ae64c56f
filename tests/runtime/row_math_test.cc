// Row reductions in an order fixed by the row's length (runtime/kernels/row_math.h), through the
// reduce ops: a row's sum does not depend on where the row lies, a padded tail adds nothing (not
// even the sign of a zero), and every length, with or without whole blocks and tails, sums what a
// sum in double does.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ir/op_def.h"
#include "tests/runtime/ops_test_util.h"

namespace mf::runtime::ops {
namespace {

// reduce `op` over the n floats at `x`, called on that address.
float reduce_at(std::string_view op, const float* x, int64_t n) {
  const ir::OpDef& def = ir::get_op(op);
  ir::Attrs attrs = {{"axes", std::vector<int64_t>{0}}};
  const std::vector<ir::TensorType> in_types = {{ir::DType::kFloat32, {n}}};
  def.infer_types(in_types, attrs);
  float out = 0;
  const ir::TensorView in[] = {{const_cast<float*>(x), in_types[0]}};
  const ir::TensorView outs[] = {{&out, {ir::DType::kFloat32, {}}}};
  def.kernel(ir::KernelContext{in, outs, attrs, def.name, true});
  return out;
}

TEST(RowMath, ASumDependsOnTheValuesAloneAndMatchesDouble) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (int64_t n = 1; n <= 300; ++n) {
    std::vector<float> row(static_cast<size_t>(n));
    for (float& v : row) v = value(rng);
    double exact = 0;
    for (float v : row) exact += v;
    const float here = reduce_at("reduce_sum", row.data(), n);
    EXPECT_NEAR(here, exact, 1e-6 * static_cast<double>(n)) << "n = " << n;
    // The same values at other offsets of a buffer give the same bits.
    for (int64_t offset = 1; offset < 17; offset += 5) {
      std::vector<float> shifted(static_cast<size_t>(n + offset));
      std::copy(row.begin(), row.end(), shifted.begin() + offset);
      const float there = reduce_at("reduce_sum", shifted.data() + offset, n);
      EXPECT_EQ(std::memcmp(&here, &there, sizeof(float)), 0) << "n = " << n << " at " << offset;
    }
  }
}

TEST(RowMath, PaddedLanesAddNothingNotEvenASign) {
  for (int64_t n = 1; n <= 200; ++n) {
    const std::vector<float> zeros(static_cast<size_t>(n), -0.0f);
    const float sum = reduce_at("reduce_sum", zeros.data(), n);
    EXPECT_EQ(sum, 0.0f);
    EXPECT_TRUE(std::signbit(sum)) << "a sum of -0.0 over " << n << " lost its sign";
    // A term applied to padding would count it: a mean of ones is exactly one.
    const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
    EXPECT_EQ(reduce_at("reduce_mean", ones.data(), n), 1.0f) << n;
  }
}

TEST(RowMath, MaximaAndMinimaOfEveryLength) {
  for (int64_t n = 1; n <= 200; ++n) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>((i * 37) % 101) - 50.0f;
    float hi = row[0], lo = row[0];
    for (float v : row) hi = std::max(hi, v), lo = std::min(lo, v);
    EXPECT_EQ(reduce_at("reduce_max", row.data(), n), hi) << n;
    EXPECT_EQ(reduce_at("reduce_min", row.data(), n), lo) << n;
  }
}

}  // namespace
}  // namespace mf::runtime::ops
