// The layout transposes' tiled copy (runtime/kernels/transpose_tiles.cc, reached through
// strided_copy): every element lands where the index arithmetic says, for every dtype size, whole
// and partial 16 x 16 tiles, stacks of matrices, narrow matrices, and any thread count.

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "tests/runtime/ops_test_util.h"

namespace mf::runtime::ops {
namespace {

using testing::HostTensor;

// x's elements in the order transpose(x, perm) holds them, by index arithmetic alone.
std::vector<double> expected_transpose(const HostTensor& x, const std::vector<int64_t>& perm) {
  const ir::Shape& in = x.type.shape;
  const std::vector<int64_t> in_strides = ir::contiguous_strides(in);
  ir::Shape out(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) out[d] = in[perm[d]];
  std::vector<double> values;
  std::vector<int64_t> coord(out.size(), 0);
  for (int64_t i = 0; i < ir::num_elements(out); ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < out.size(); ++d) offset += coord[d] * in_strides[perm[d]];
    values.push_back(x.get(offset));
    for (int d = static_cast<int>(out.size()) - 1; d >= 0 && ++coord[d] == out[d]; --d) {
      coord[d] = 0;
    }
  }
  return values;
}

HostTensor counting(ir::DType dtype, ir::Shape shape) {
  HostTensor x({dtype, std::move(shape)});
  // Distinct values wherever the dtype can hold them (bool alternates).
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, dtype == ir::DType::kBool ? i % 3 == 0 : i);
  return x;
}

struct Case {
  ir::Shape shape;
  std::vector<int64_t> perm;
};

const Case kCases[] = {
    {{1, 3, 224, 224}, {0, 2, 3, 1}},  // an RGB input going channels-last: 3 columns
    {{1, 7, 7, 1280}, {0, 3, 1, 2}},   // back to NCHW: 49 columns, the last tile one wide
    {{2, 5, 9, 33}, {0, 2, 3, 1}},     // every tile partial in both directions, two matrices
    {{32, 64, 16, 16}, {0, 2, 3, 1}},  // 32 matrices of whole tiles
    {{17, 40}, {1, 0}},                // rank 2
    {{3, 17, 4, 19}, {0, 3, 2, 1}},    // outer axes that are not leading: a stack read out of order
    {{6, 16}, {1, 0}},                 // fewer rows than a strip
    {{300, 7}, {1, 0}},                // narrow: 7 columns
    {{2, 4, 100}, {0, 2, 1}},          // 4 columns
};

class TransposeTiles : public ::testing::TestWithParam<ir::DType> {};

TEST_P(TransposeTiles, EveryElementLandsWhereTheIndexArithmeticSays) {
  for (const Case& c : kCases) {
    const HostTensor x = counting(GetParam(), c.shape);
    const std::vector<double> want = expected_transpose(x, c.perm);
    for (int threads : {1, 2}) {
      std::vector<HostTensor> in{x};
      const HostTensor y =
          testing::run("transpose", in, {{"perm", c.perm}}, threads, /*deterministic=*/false);
      EXPECT_EQ(y.to_doubles(), want)
          << ir::shape_to_string(c.shape) << " at " << threads << " thread(s)";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryElementSize, TransposeTiles,
                         ::testing::Values(ir::DType::kFloat32, ir::DType::kInt32,
                                           ir::DType::kFloat64, ir::DType::kInt64,
                                           ir::DType::kBool),
                         [](const auto& info) { return std::string(ir::dtype_name(info.param)); });

// NaN payloads and signed zeros are bits, not values: the 4-byte path moves them untouched.
TEST(TransposeTilesBits, FloatBitPatternsPassUnchanged) {
  HostTensor x({ir::DType::kFloat32, {1, 20, 18, 3}});
  uint32_t* bits = static_cast<uint32_t*>(x.data());
  for (int64_t i = 0; i < x.size(); ++i) bits[i] = 0x7fc00001u + static_cast<uint32_t>(i * 7919);
  bits[5] = 0x80000000u;  // -0.0
  std::vector<HostTensor> in{x};
  const HostTensor y =
      testing::run("transpose", in, {{"perm", std::vector<int64_t>{0, 3, 1, 2}}}, 1, false);
  const uint32_t* out = static_cast<const uint32_t*>(y.data());
  // y[0, c, h, w] = x[0, h, w, c]
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t hw = 0; hw < 20 * 18; ++hw) {
      ASSERT_EQ(out[c * 360 + hw], bits[hw * 3 + c]) << "c " << c << " hw " << hw;
    }
  }
}

}  // namespace
}  // namespace mf::runtime::ops
