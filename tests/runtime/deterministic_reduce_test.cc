// deterministic: ON gives the same bits for 1 and 2 intra-op threads; OFF may split a
// long column reduction by thread count and stays within float tolerance of ON.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ir/op_def.h"
#include "runtime/parallel.h"

namespace mf::runtime {
namespace {

std::vector<float> reduce(const std::vector<float>& x, int64_t rows, int64_t cols, int threads,
                          bool deterministic, std::string_view op = "reduce_sum") {
  const ir::OpDef& def = ir::get_op(op);
  std::vector<float> y(static_cast<size_t>(cols));
  const ir::TensorView in[] = {{const_cast<float*>(x.data()), {ir::DType::kFloat32, {rows, cols}}}};
  const ir::TensorView out[] = {{y.data(), {ir::DType::kFloat32, {cols}}}};
  const ir::Attrs attrs = {{"axes", std::vector<int64_t>{0}}, {"keep_dims", false}};
  ScopedIntraOpThreads scoped(threads);
  def.kernel(ir::KernelContext{in, out, attrs, def.name, deterministic});
  return y;
}

std::vector<float> random_values(size_t n) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(DeterministicReduceTest, OnGivesTheSameBitsForOneAndTwoThreads) {
  for (const auto [rows, cols] :
       {std::pair<int64_t, int64_t>{1 << 16, 8}, {100003, 3}, {4096, 64}}) {
    SCOPED_TRACE(rows);
    const std::vector<float> x = random_values(static_cast<size_t>(rows * cols));
    for (std::string_view op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
      const auto one = reduce(x, rows, cols, 1, true, op);
      const auto two = reduce(x, rows, cols, 2, true, op);
      EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0) << op;
    }
  }
}

TEST(DeterministicReduceTest, OffStaysWithinToleranceOfOn) {
  const int64_t rows = 1 << 16, cols = 8;
  const std::vector<float> x = random_values(static_cast<size_t>(rows * cols));
  const auto on = reduce(x, rows, cols, 2, true);
  const auto off = reduce(x, rows, cols, 2, false);
  std::vector<double> exact(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) exact[c] += x[r * cols + c];
  }
  for (int64_t c = 0; c < cols; ++c) {
    // Sums of 65536 values in [-1, 1]: float rounding of either order stays far below 1e-2.
    EXPECT_NEAR(off[c], exact[c], 1e-2) << c;
    EXPECT_NEAR(on[c], exact[c], 1e-2) << c;
  }
  // Max is exact in any order, so OFF agrees with ON bit for bit there.
  const auto on_max = reduce(x, rows, cols, 2, true, "reduce_max");
  const auto off_max = reduce(x, rows, cols, 2, false, "reduce_max");
  EXPECT_EQ(std::memcmp(on_max.data(), off_max.data(), cols * sizeof(float)), 0);
  // One thread never splits: OFF is the fixed order then.
  const auto on_one = reduce(x, rows, cols, 1, true);
  const auto off_one = reduce(x, rows, cols, 1, false);
  EXPECT_EQ(std::memcmp(on_one.data(), off_one.data(), cols * sizeof(float)), 0);
}

}  // namespace
}  // namespace mf::runtime
