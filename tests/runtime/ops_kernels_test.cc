// Focused tests for the kernels most likely to hide an indexing bug, with hand-worked values or a
// naive loop written here (independent of the op files' own references).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "base/error.h"
#include "ir/op_def.h"
#include "runtime/parallel.h"
#include "tests/runtime/ops_test_util.h"

namespace mf::runtime::ops {
namespace {

using ir::DType;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::f32;
using ::testing::HasSubstr;
using testing::HostTensor;
using testing::run_op;

std::vector<double> iota(int64_t n, double start = 0.0) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

std::vector<double> random_vector(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

// Runs `fn` expecting an mf::Error of `kind`; returns its message.
template <typename Fn>
std::string error_of(Fn&& fn, ErrorKind kind = ErrorKind::kInvalidArgument) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an mf::Error";
  return {};
}

// ---- clip ----

// clip gives the bytes of maximum then minimum, whatever the values (NaN, signed zeros, infinities
// in x and in the bounds), the bounds' shapes (scalars: its single-pass float32 path; tensors) and
// the length (tails of every size below a vector).
TEST(OpClip, GivesTheBytesOfMaximumThenMinimum) {
  const double nan = std::nan(""), inf = INFINITY;
  const std::vector<double> specials = {nan, -0.0, 0.0, inf, -inf, 1.5, -2.5, 6.0, 7.0, -1e-40};
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (int64_t n : {1, 7, 16, 17, 40, 100}) {
      std::vector<double> x = random_vector(n, uint64_t(n));
      for (int64_t i = 0; i < n; ++i) {
        if (i % 3 == 0) x[size_t(i)] = specials[size_t(i) % specials.size()];
      }
      const HostTensor xt = HostTensor::from_doubles({dtype, {n}}, x);
      for (double lo : {0.0, -0.0, nan, -1.0}) {
        for (double hi : {6.0, 0.5, nan, -inf}) {
          for (bool full_bounds : {false, true}) {
            const ir::Shape bound_shape = full_bounds ? ir::Shape{n} : ir::Shape{};
            const int64_t count = full_bounds ? n : 1;
            const HostTensor l = HostTensor::from_doubles({dtype, bound_shape},
                                                          std::vector<double>(size_t(count), lo));
            const HostTensor h = HostTensor::from_doubles({dtype, bound_shape},
                                                          std::vector<double>(size_t(count), hi));
            const HostTensor two = run_op("minimum", {run_op("maximum", {xt, l})[0], h})[0];
            const HostTensor one = run_op("clip", {xt, l, h})[0];
            EXPECT_TRUE(one.same_bytes(two)) << ir::dtype_name(dtype) << " n=" << n << " lo=" << lo
                                             << " hi=" << hi << " full=" << full_bounds;
          }
        }
      }
    }
  }
}

// Bad operands of clip are refused with what was wrong and what to do.
TEST(OpClip, MixedDtypesAndShapesThatDoNotBroadcastAreExplained) {
  const HostTensor x = HostTensor::from_doubles({DType::kFloat32, {3, 4}}, random_vector(12, 1));
  const HostTensor lo64 = HostTensor::from_doubles({DType::kFloat64, {}}, {0.0});
  const HostTensor hi = HostTensor::from_doubles({DType::kFloat32, {}}, {6.0});
  const std::string dtypes = error_of([&] { run_op("clip", {x, lo64, hi}); });
  EXPECT_THAT(dtypes, HasSubstr("clip: input dtypes disagree"));
  EXPECT_THAT(dtypes, HasSubstr("insert a cast"));
  const HostTensor lo5 = HostTensor::from_doubles({DType::kFloat32, {5}}, random_vector(5, 2));
  const std::string shapes = error_of([&] { run_op("clip", {x, lo5, hi}); });
  EXPECT_THAT(shapes, HasSubstr("clip"));
  EXPECT_THAT(shapes, HasSubstr("(3, 4)"));
  EXPECT_THAT(shapes, HasSubstr("(5)"));
}

// ---- matmul ----

TEST(OpMatmul, AllTransposeCombinationsAgree) {
  const HostTensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const HostTensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  const HostTensor b = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  const HostTensor bt = f32({2, 3}, {1, 0, 1, 0, 1, 1});
  const std::vector<double> expected = {4, 5, 10, 11};
  auto run = [](HostTensor x, HostTensor y, bool ta, bool tb) {
    return run_op("matmul", {x, y}, {{"transpose_a", ta}, {"transpose_b", tb}})[0];
  };
  EXPECT_THAT(run(a, b, false, false).to_doubles(), ElementsAreArray(expected));
  EXPECT_THAT(run(at, b, true, false).to_doubles(), ElementsAreArray(expected));
  EXPECT_THAT(run(a, bt, false, true).to_doubles(), ElementsAreArray(expected));
  EXPECT_THAT(run(at, bt, true, true).to_doubles(), ElementsAreArray(expected));
}

TEST(OpMatmul, InnerDimensionErrorNamesShapesAndRule) {
  const std::string message = error_of([] {
    run_op("matmul",
           {HostTensor({DType::kFloat32, {64, 784}}), HostTensor({DType::kFloat32, {512, 10}})});
  });
  EXPECT_THAT(message, HasSubstr("matmul: inner dimensions disagree: (64, 784) x (512, 10) with "
                                 "transpose_a=false, transpose_b=false; a's dim 1 (784) must "
                                 "equal b's dim 0 (512)"));
}

TEST(OpMatmul, BatchDimsBroadcast) {
  // a: (2, 1, 2, 2) identity and 2*identity; b: (3, 2, 2) three different matrices.
  const HostTensor a = f32({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  const HostTensor b = f32({3, 2, 2}, iota(12));
  const HostTensor c = run_op("batch_matmul", {a, b})[0];
  ASSERT_EQ(c.type.shape, (ir::Shape{2, 3, 2, 2}));
  const std::vector<double> got = c.to_doubles();
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(got[i], i);
    EXPECT_EQ(got[12 + i], 2 * i);
  }
}

// ---- conv2d ----

TEST(OpConv2d, HandWorkedExample) {
  const HostTensor x = f32({1, 1, 3, 3}, iota(9, 1));
  const HostTensor w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  EXPECT_THAT(run_op("conv2d", {x, w})[0].to_doubles(), ElementsAre(12, 16, 24, 28));
}

TEST(OpConv2d, GroupsDilationStrideAndPaddingMatchNaiveLoop) {
  const int64_t n = 2, c = 6, h = 11, wd = 9, o = 4, groups = 2, kh = 3, kw = 2;
  const int64_t sh = 2, sw = 1, dh = 2, dw = 3, top = 1, bottom = 2, left = 2, right = 0;
  const HostTensor x = f32({n, c, h, wd}, random_vector(n * c * h * wd, 1));
  const HostTensor w = f32({o, c / groups, kh, kw}, random_vector(o * (c / groups) * kh * kw, 2));
  const HostTensor bias = f32({o}, random_vector(o, 3));
  const HostTensor y = run_op("conv2d", {x, w, bias},
                              {{"stride", std::vector<int64_t>{sh, sw}},
                               {"padding", std::vector<int64_t>{top, bottom, left, right}},
                               {"dilation", std::vector<int64_t>{dh, dw}},
                               {"groups", groups}})[0];
  const int64_t oh = (h + top + bottom - dh * (kh - 1) - 1) / sh + 1;
  const int64_t ow = (wd + left + right - dw * (kw - 1) - 1) / sw + 1;
  ASSERT_EQ(y.type.shape, (ir::Shape{n, o, oh, ow}));
  const int64_t cg = c / groups, og = o / groups;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double sum = bias.get(oc);
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                const int64_t yy = i * sh + p * dh - top, xx = j * sw + q * dw - left;
                if (yy < 0 || yy >= h || xx < 0 || xx >= wd) continue;
                const int64_t channel = (oc / og) * cg + ic;
                sum += x.get(((b * c + channel) * h + yy) * wd + xx) *
                       w.get(((oc * cg + ic) * kh + p) * kw + q);
              }
          ASSERT_NEAR(y.get(((b * o + oc) * oh + i) * ow + j), sum, 1e-5)
              << "at " << b << "," << oc << "," << i << "," << j;
        }
}

TEST(OpConv2d, ChannelMismatchIsExplained) {
  const std::string message = error_of([] {
    run_op("conv2d", {HostTensor({DType::kFloat32, {1, 3, 8, 8}}),
                      HostTensor({DType::kFloat32, {4, 2, 3, 3}})});
  });
  EXPECT_THAT(message, HasSubstr("expects 2 channels per group"));
}

TEST(OpPool, AvgExcludesPaddingByDefault) {
  const HostTensor x = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  const ir::Attrs attrs = {{"kernel", std::vector<int64_t>{3, 3}},
                           {"stride", std::vector<int64_t>{1, 1}},
                           {"padding", std::vector<int64_t>{1, 1}}};
  EXPECT_THAT(run_op("avg_pool2d", {x}, attrs)[0].to_doubles(), ElementsAre(1, 1, 1, 1));
  ir::Attrs include = attrs;
  include["count_include_pad"] = true;
  const std::vector<double> got = run_op("avg_pool2d", {x}, include)[0].to_doubles();
  for (double v : got) EXPECT_NEAR(v, 4.0 / 9.0, 1e-6);
  EXPECT_THAT(run_op("max_pool2d", {f32({1, 1, 2, 2}, {-4, -3, -2, -1})}, attrs)[0].to_doubles(),
              ElementsAre(-1, -1, -1, -1));
}

// 2x2 windows of stride 2 over a 3 x 5 plane (the last row and column in no window): each
// window's dy goes to its first largest cell; NaN and -inf never win; a window of neither goes to
// its first cell; the cells no window reads get 0.
TEST(OpPool, MaxPoolGradGivesEachWindowsDyToItsFirstLargestCell) {
  const double nan = std::nan(""), inf = INFINITY;
  // Windows: {1, 3 | 3, 2}: the first 3 (cell 1); {nan, -1 | -2, -1}: the first -1 (cell 1).
  const HostTensor x = f32({1, 1, 3, 5}, {1, 3, nan, -1, -inf,  //
                                          3, 2, -2, -1, -inf,   //
                                          9, 9, 9, 9, 9});
  const HostTensor dy = f32({1, 1, 1, 2}, {10, 20});
  const ir::Attrs attrs = {{"kernel", std::vector<int64_t>{2, 2}},
                           {"stride", std::vector<int64_t>{2, 2}}};
  EXPECT_THAT(run_op("max_pool2d_grad", {x, dy}, attrs)[0].to_doubles(),
              ElementsAre(0, 10, 0, 20, 0,  //
                          0, 0, 0, 0, 0,    //
                          0, 0, 0, 0, 0));
  // {-inf, nan | -inf, nan}: no winner, cell 0; {5, 5 | 5, 5}: cell 0; {0, 1 | 2, 1}: cell 2.
  const HostTensor x3 = f32({1, 1, 2, 6}, {-inf, nan, 5, 5, 0, 1,  //
                                           -inf, nan, 5, 5, 2, 1});
  EXPECT_THAT(run_op("max_pool2d_grad", {x3, f32({1, 1, 1, 3}, {7, 8, 9})}, attrs)[0].to_doubles(),
              ElementsAre(7, 0, 8, 0, 0, 0,  //
                          0, 0, 0, 0, 9, 0));
}

// The same rule over rows of 19 windows (vector paths and their tails), each window drawn from
// values with ties, NaN and infinities, against a naive loop.
TEST(OpPool, MaxPoolGradOfSpecialValuesMatchesANaiveLoop) {
  const double nan = std::nan(""), inf = INFINITY;
  const std::vector<double> values = {nan, -inf, inf, 1.0, 1.0, -0.0, 0.0, -2.0};
  std::mt19937_64 rng(7);
  const int64_t h = 4, w = 39, oh = 2, ow = 19;
  std::vector<double> x(size_t(h * w)), dy(size_t(oh * ow));
  for (double& v : x) v = values[rng() % values.size()];
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = double(i + 1);
  std::vector<double> want(x.size(), 0.0);
  for (int64_t oy = 0; oy < oh; ++oy) {
    for (int64_t ox = 0; ox < ow; ++ox) {
      int64_t best = -1;
      for (int64_t i = 0; i < 2; ++i) {
        for (int64_t j = 0; j < 2; ++j) {
          const int64_t at = (2 * oy + i) * w + 2 * ox + j;
          const double current = best < 0 ? -inf : x[size_t(best)];
          if (x[size_t(at)] > current) best = at;
        }
      }
      want[size_t(best >= 0 ? best : 2 * oy * w + 2 * ox)] = dy[size_t(oy * ow + ox)];
    }
  }
  const ir::Attrs attrs = {{"kernel", std::vector<int64_t>{2, 2}},
                           {"stride", std::vector<int64_t>{2, 2}}};
  const std::vector<double> got =
      run_op("max_pool2d_grad", {f32({1, 1, h, w}, x), f32({1, 1, oh, ow}, dy)}, attrs)[0]
          .to_doubles();
  EXPECT_THAT(got, ElementsAreArray(want));
}

// ---- broadcasting and dtype errors ----

TEST(OpBroadcast, IncompatibleShapesNameOpShapesAndAxis) {
  const std::string message = error_of([] {
    run_op("add", {HostTensor({DType::kFloat32, {3, 5}}), HostTensor({DType::kFloat32, {4}})});
  });
  EXPECT_THAT(message, HasSubstr("add"));
  EXPECT_THAT(message, HasSubstr("(3, 5)"));
  EXPECT_THAT(message, HasSubstr("(4)"));
  EXPECT_THAT(message, HasSubstr("axis 1"));
}

TEST(OpBroadcast, ThreeWayBroadcastValues) {
  // (4,1,3) + (2,3): out[i,j,k] = a[i,0,k] + b[j,k].
  const HostTensor a = f32({4, 1, 3}, iota(12));
  const HostTensor b = f32({2, 3}, {100, 200, 300, 400, 500, 600});
  const HostTensor c = run_op("add", {a, b})[0];
  ASSERT_EQ(c.type.shape, (ir::Shape{4, 2, 3}));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(c.get((i * 2 + j) * 3 + k), i * 3 + k + 100 * (j * 3 + k + 1));
}

TEST(OpDtype, UnsupportedDtypeListsTheSupportedOnes) {
  EXPECT_THAT(error_of([] {
                run_op("relu", {HostTensor({DType::kBool, {3}})});
              }),
              HasSubstr("relu does not support Bool; supported: Float32, Float64"));
  EXPECT_THAT(
      error_of([] {
        run_op("add", {HostTensor({DType::kFloat32, {3}}), HostTensor({DType::kInt32, {3}})});
      }),
      HasSubstr("input dtypes disagree"));
  EXPECT_THAT(error_of([] {
                run_op("select",
                       {HostTensor({DType::kFloat32, {3}}), HostTensor({DType::kFloat32, {3}}),
                        HostTensor({DType::kFloat32, {3}})});
              }),
              HasSubstr("select: the condition (input 0) must be Bool"));
}

TEST(OpDtype, IntegerArithmeticIsExact) {
  HostTensor a = HostTensor::from_doubles({DType::kInt64, {3}}, {1'000'000'000'000, -7, 5});
  HostTensor b = HostTensor::from_doubles({DType::kInt64, {}}, {3});
  EXPECT_THAT(run_op("mul", {a, b})[0].to_doubles(), ElementsAre(3'000'000'000'000, -21, 15));
  EXPECT_THAT(run_op("less", {a, b})[0].to_doubles(), ElementsAre(0, 1, 0));
}

// ---- reductions ----

TEST(OpReduce, KeepDimsAndNegativeAxes) {
  const HostTensor x = f32({2, 3, 4}, iota(24));
  const HostTensor rows =
      run_op("reduce_sum", {x}, {{"axes", std::vector<int64_t>{-1}}, {"keep_dims", true}})[0];
  EXPECT_EQ(rows.type.shape, (ir::Shape{2, 3, 1}));
  EXPECT_THAT(rows.to_doubles(), ElementsAre(6, 22, 38, 54, 70, 86));
  const HostTensor outer = run_op("reduce_max", {x}, {{"axes", std::vector<int64_t>{0, -1}}})[0];
  EXPECT_EQ(outer.type.shape, (ir::Shape{3}));
  EXPECT_THAT(outer.to_doubles(), ElementsAre(15, 19, 23));
  const HostTensor all = run_op("reduce_mean", {x}, {{"keep_dims", true}})[0];
  EXPECT_EQ(all.type.shape, (ir::Shape{1, 1, 1}));
  EXPECT_THAT(all.to_doubles(), ElementsAre(11.5));
  EXPECT_THAT(run_op("reduce_min", {x}, {{"axes", std::vector<int64_t>{1}}})[0].to_doubles(),
              ElementsAre(0, 1, 2, 3, 12, 13, 14, 15));
}

TEST(OpReduce, BadAxesAreRejected) {
  const HostTensor x({DType::kFloat32, {2, 3, 4}});
  EXPECT_THAT(error_of([&] {
                run_op("reduce_sum", {x}, {{"axes", std::vector<int64_t>{1, -2}}});
              }),
              HasSubstr("appears twice"));
  EXPECT_THAT(error_of([&] {
                run_op("reduce_sum", {x}, {{"axes", std::vector<int64_t>{3}}});
              }),
              HasSubstr("out of range"));
}

TEST(OpReduce, LongSumIsTheSameOnAnyThreadCount) {
  const HostTensor x = f32({1 << 20}, random_vector(1 << 20, 9));
  const HostTensor many = run_op("reduce_sum", {x})[0];
  ScopedIntraOpThreads one(1);
  EXPECT_TRUE(run_op("reduce_sum", {x})[0].same_bytes(many));
}

// ---- normalization ----

TEST(OpSoftmax, StableForLargeInputsAndRowsSumToOne) {
  EXPECT_THAT(run_op("softmax", {f32({2}, {1000, 1000})})[0].to_doubles(), ElementsAre(0.5, 0.5));
  const HostTensor y =
      run_op("softmax", {f32({3, 4, 5}, random_vector(60, 4))}, {{"axis", int64_t{1}}})[0];
  for (int a = 0; a < 3; ++a)
    for (int c = 0; c < 5; ++c) {
      double sum = 0;
      for (int b = 0; b < 4; ++b) sum += y.get((a * 4 + b) * 5 + c);
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
}

// ---- shape ops ----

TEST(OpSplit, SectionsWithInferredPart) {
  const HostTensor x = f32({2, 7}, iota(14));
  const std::vector<HostTensor> parts =
      run_op("split", {x}, {{"axis", int64_t{-1}}, {"sections", std::vector<int64_t>{2, -1, 1}}});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].type.shape, (ir::Shape{2, 2}));
  EXPECT_EQ(parts[1].type.shape, (ir::Shape{2, 4}));
  EXPECT_EQ(parts[2].type.shape, (ir::Shape{2, 1}));
  EXPECT_THAT(parts[0].to_doubles(), ElementsAre(0, 1, 7, 8));
  EXPECT_THAT(parts[1].to_doubles(), ElementsAre(2, 3, 4, 5, 9, 10, 11, 12));
  EXPECT_THAT(parts[2].to_doubles(), ElementsAre(6, 13));
  EXPECT_THAT(error_of([&] {
                run_op("split", {x}, {{"axis", int64_t{1}}, {"num", int64_t{2}}});
              }),
              HasSubstr("cannot be split into 2 equal parts"));
  EXPECT_THAT(error_of([&] { run_op("split", {x}); }), HasSubstr("exactly one of 'sections'"));
}

TEST(OpReshape, InferredDimensionAndErrors) {
  const HostTensor x = f32({2, 3}, iota(6));
  EXPECT_EQ(run_op("reshape", {x}, {{"shape", std::vector<int64_t>{-1, 2}}})[0].type.shape,
            (ir::Shape{3, 2}));
  EXPECT_THAT(error_of([&] {
                run_op("reshape", {x}, {{"shape", std::vector<int64_t>{4, -1}}});
              }),
              HasSubstr("cannot reshape (2, 3) (6 elements) to [4, -1]: 6 is not divisible by the "
                        "product 4 of the known dimensions"));
  EXPECT_THAT(error_of([&] {
                run_op("reshape", {x}, {{"shape", std::vector<int64_t>{-1, -1}}});
              }),
              HasSubstr("more than one -1"));
  EXPECT_THAT(error_of([&] {
                run_op("reshape", {x}, {{"shape", std::vector<int64_t>{4, 2}}});
              }),
              HasSubstr("the element count must not change"));
  EXPECT_THAT(error_of([&] { run_op("reshape", {x}); }), HasSubstr("requires attribute 'shape'"));
}

TEST(OpShape, TransposeSliceConcatValues) {
  const HostTensor x = f32({2, 3}, iota(6));
  EXPECT_THAT(run_op("transpose", {x})[0].to_doubles(), ElementsAre(0, 3, 1, 4, 2, 5));
  EXPECT_THAT(
      run_op("slice", {x},
             {{"begin", std::vector<int64_t>{0, -2}}, {"end", std::vector<int64_t>{2, 100}}})[0]
          .to_doubles(),
      ElementsAre(1, 2, 4, 5));
  EXPECT_THAT(run_op("concat", {x, f32({2, 1}, {9, 9})}, {{"axis", int64_t{1}}})[0].to_doubles(),
              ElementsAre(0, 1, 2, 9, 3, 4, 5, 9));
  EXPECT_THAT(error_of([&] {
                run_op("concat", {x, f32({3, 3}, iota(9))}, {{"axis", int64_t{1}}});
              }),
              HasSubstr("all dims except the concat axis 1 must agree"));
  EXPECT_THAT(error_of([&] {
                run_op("squeeze", {x}, {{"axes", std::vector<int64_t>{0}}});
              }),
              HasSubstr("only size-1 axes can be removed"));
}

}  // namespace
}  // namespace mf::runtime::ops
