// The oneDNN layer under the float32 conv2d, pool and matmul kernels: the primitive cache is
// bounded and creates a primitive once per shape; with `deterministic`, conv2d and the products
// give the same bytes at 1 and 2 intra-op threads and from run to run.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "base/error.h"
#include "ir/op_def.h"
#include "runtime/dnnl/prepare.h"
#include "runtime/dnnl/primitive_cache.h"
#include "runtime/kernels/conv_layout.h"
#include "runtime/kernels/depthwise_conv.h"
#include "runtime/parallel.h"
#include "tests/runtime/ops_test_util.h"

namespace mf::runtime::dnnl_rt {
namespace {

using ops::testing::conv;
using ops::testing::HostTensor;
using ops::testing::random_inputs;
using ops::testing::run;

TEST(PrimitiveCache, IsBoundedAndEvictsTheLeastRecentlyUsed) {
  PrimitiveCache cache(2);
  int made = 0;
  auto make = [&] { return std::make_shared<const int>(++made); };
  const PrimitiveKey k1 = PrimitiveKey("a").add({1, 2});
  const PrimitiveKey k2 = PrimitiveKey("a").add({1}).add({2});  // lists differ from k1's
  const PrimitiveKey k3 = PrimitiveKey("b").add({1, 2});
  EXPECT_EQ(*cache.get<int>(k1, make), 1);
  EXPECT_EQ(*cache.get<int>(k2, make), 2);
  EXPECT_EQ(*cache.get<int>(k1, make), 1);  // a hit, and k1 is now the most recent
  EXPECT_EQ(*cache.get<int>(k3, make), 3);  // evicts k2
  PrimitiveCacheStats s = cache.stats();
  EXPECT_EQ(s.size, 2u);
  EXPECT_EQ(s.capacity, 2u);
  EXPECT_EQ(s.creations, 3);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.evictions, 1);
  EXPECT_EQ(*cache.get<int>(k1, make), 1);
  EXPECT_EQ(*cache.get<int>(k2, make), 4);  // created again
  s = cache.stats();
  EXPECT_EQ(s.size, 2u);
  EXPECT_EQ(s.evictions, 2);
  // Many distinct keys never grow it past its capacity.
  for (int64_t i = 0; i < 100; ++i) cache.get<int>(PrimitiveKey("c").add(i), make);
  EXPECT_EQ(cache.stats().size, 2u);
  cache.set_capacity(1);
  EXPECT_EQ(cache.stats().size, 1u);
}

// With costs, the capacity counts their sum (bytes, for the reordered weights): the least recent
// go until the rest fit, and an entry costlier than the whole capacity is still kept alone.
TEST(PrimitiveCache, CostsCountAgainstTheCapacity) {
  PrimitiveCache cache(100);
  auto make = [] { return std::make_shared<const int>(0); };
  cache.get<int>(PrimitiveKey("w").add(1), make, 40);
  cache.get<int>(PrimitiveKey("w").add(2), make, 40);
  EXPECT_EQ(cache.stats().used, 80u);
  cache.get<int>(PrimitiveKey("w").add(3), make, 40);  // 120 > 100: the first goes
  EXPECT_EQ(cache.stats().size, 2u);
  EXPECT_EQ(cache.stats().used, 80u);
  cache.get<int>(PrimitiveKey("w").add(4), make, 500);  // alone over the capacity: kept alone
  EXPECT_EQ(cache.stats().size, 1u);
  EXPECT_EQ(cache.stats().used, 500u);
}

// `op` over `in` at one thread, non-deterministic, with input 1 carrying the content identity
// (id, version) and the parameter mark.
HostTensor run_with_identity(const std::string& op_name, std::vector<HostTensor>& in,
                             const ir::Attrs& attrs, uint64_t id, uint64_t version,
                             bool parameter = false) {
  const ir::OpDef& op = ir::get_op(op_name);
  ir::Attrs filled = attrs;
  std::vector<ir::TensorType> types;
  for (const HostTensor& t : in) types.push_back(t.type);
  HostTensor out(op.infer_types(types, filled)[0]);
  std::vector<ir::TensorView> views;
  for (HostTensor& t : in) views.push_back(t.view());
  views[1].content_id = id;
  views[1].content_version = version;
  views[1].parameter = parameter;
  std::vector<ir::TensorView> outs = {out.view()};
  ScopedIntraOpThreads scope(1);
  op.kernel(ir::KernelContext{views, outs, filled, op.name, false});
  return out;
}

// An entry made from bytes rewritten in place is replaced by its next version, never kept beside
// it: a weight updated at every step holds one entry.
TEST(PrimitiveCache, ANewVersionReplacesTheOldEntry) {
  PrimitiveCache cache(1000);
  int made = 0;
  auto make = [&] { return std::make_shared<const int>(++made); };
  const PrimitiveKey w = PrimitiveKey("w").add(1);
  EXPECT_EQ(*cache.get_version<int>(w, 0, make, 10), 1);
  EXPECT_EQ(*cache.get_version<int>(w, 0, make, 10), 1);  // a hit
  for (uint64_t version = 1; version <= 50; ++version) {
    EXPECT_EQ(*cache.get_version<int>(w, version, make, 10), static_cast<int>(version) + 1);
  }
  EXPECT_EQ(cache.stats().size, 1u);
  EXPECT_EQ(cache.stats().used, 10u);
  EXPECT_EQ(cache.stats().hits, 1);
  EXPECT_EQ(*cache.get_version<int>(PrimitiveKey("w").add(2), 50, make, 10), 52);  // other bytes
  EXPECT_EQ(cache.stats().size, 2u);
}

// A product's one-matrix b with a content identity, met again unchanged, runs in the primitive's
// own layout for it, reordered once and kept until its bytes change, with the bits of the plain
// path (matmul and matmul_bias, b stored as is and transposed, a batched a). Bytes met once (an
// activation op by op) are never reordered; a parameter is, at its first use, but a new version
// of it (a training step's update) only when met again.
TEST(DnnlKernels, AProductsWeightsAreReorderedOnceUnderTheirContentIdentity) {
  const ir::DType f = ir::DType::kFloat32;
  struct Case {
    std::string op;
    std::vector<ir::TensorType> types;
    ir::Attrs attrs;
  };
  const std::vector<Case> cases = {
      {"matmul", {{f, {50, 96}}, {f, {96, 200}}}, {}},
      {"batch_matmul", {{f, {2, 7, 96}}, {f, {200, 96}}}, {{"transpose_b", true}}},
      {"matmul_bias", {{f, {33, 64}}, {f, {64, 48}}, {f, {48}}}, {}},
  };
  auto& cache = reordered_weights_cache();
  uint64_t id = (uint64_t(1) << 61) + 3;  // far from any real buffer's
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<HostTensor> in = random_inputs(c.types, 5);
    const HostTensor plain = run(c.op, in, c.attrs, 1, false);
    auto run_with = [&](uint64_t version, bool parameter = false) {
      return run_with_identity(c.op, in, c.attrs, id, version, parameter);
    };
    const int64_t made = cache.stats().creations;
    EXPECT_TRUE(run_with(0).same_bytes(plain));
    EXPECT_EQ(cache.stats().creations, made) << "bytes met once were reordered";
    EXPECT_TRUE(run_with(0).same_bytes(plain));
    EXPECT_EQ(cache.stats().creations, made + 1) << "bytes met again were not reordered";
    const int64_t hits = cache.stats().hits;
    EXPECT_TRUE(run_with(0).same_bytes(plain));
    EXPECT_EQ(cache.stats().creations, made + 1) << "reordered again";
    EXPECT_EQ(cache.stats().hits, hits + 1);
    // The caller wrote b: the kept reorder is not used, and is replaced at the next reuse.
    static_cast<float*>(in[1].data())[0] += 1.0f;
    const HostTensor changed = run(c.op, in, c.attrs, 1, false);
    EXPECT_FALSE(changed.same_bytes(plain));
    const size_t entries = cache.stats().size;
    EXPECT_TRUE(run_with(1).same_bytes(changed));
    EXPECT_TRUE(run_with(1).same_bytes(changed));
    EXPECT_EQ(cache.stats().creations, made + 2);
    EXPECT_EQ(cache.stats().size, entries);
    // A parameter: reordered at its first use; its next version is met once, plain, then kept.
    ++id;
    EXPECT_TRUE(run_with(0, true).same_bytes(changed));
    EXPECT_EQ(cache.stats().creations, made + 3) << "a parameter's first use was not reordered";
    static_cast<float*>(in[1].data())[0] += 1.0f;
    const HostTensor updated = run(c.op, in, c.attrs, 1, false);
    EXPECT_TRUE(run_with(1, true).same_bytes(updated));
    EXPECT_EQ(cache.stats().creations, made + 3) << "an updated parameter was reordered at once";
    EXPECT_TRUE(run_with(1, true).same_bytes(updated));
    EXPECT_EQ(cache.stats().creations, made + 4);
    ++id;
  }
}

// Weights whose bytes are known unchanged (TensorView::content_id) are reordered into the
// primitive's layout once and kept: a second call with the same identity reorders nothing and
// gives the same bits; a new version (the caller wrote the weights) or another buffer reorders
// again; weights without an identity are never kept.
TEST(DnnlKernels, ReorderedWeightsAreKeptUnderTheirContentIdentity) {
  const ir::DType f = ir::DType::kFloat32;
  // A shape whose kernel wants blocked weights (a plane of 28x28 from 64 channels).
  std::vector<ir::TensorType> types = {{f, {1, 64, 28, 28}}, {f, {64, 64, 3, 3}}};
  std::vector<HostTensor> in = random_inputs(types, 21);
  const ir::Attrs attrs = conv({1, 1}, {1, 1}, 1);
  auto& cache = reordered_weights_cache();
  const HostTensor plain = run("conv2d", in, attrs, 1, false);  // no identity: nothing kept
  const int64_t made_before = cache.stats().creations;
  auto run_with = [&](uint64_t id, uint64_t version) {
    return run_with_identity("conv2d", in, attrs, id, version);
  };
  EXPECT_EQ(cache.stats().creations, made_before) << "weights without an identity were kept";
  const uint64_t id = (uint64_t(1) << 60) + 7;  // far from any real buffer's
  EXPECT_TRUE(run_with(id, 0).same_bytes(plain));
  EXPECT_EQ(cache.stats().creations, made_before + 1);
  const int64_t hits = cache.stats().hits;
  EXPECT_TRUE(run_with(id, 0).same_bytes(plain));
  EXPECT_EQ(cache.stats().creations, made_before + 1) << "reordered again";
  EXPECT_EQ(cache.stats().hits, hits + 1);
  // The caller wrote the weights: the old reorder is not used.
  static_cast<float*>(in[1].data())[0] += 1.0f;
  const HostTensor changed = run("conv2d", in, attrs, 1, false);
  EXPECT_TRUE(run_with(id, 1).same_bytes(changed));
  EXPECT_FALSE(changed.same_bytes(plain));
  EXPECT_EQ(cache.stats().creations, made_before + 2);
  EXPECT_TRUE(run_with(id + 1, 0).same_bytes(changed));  // another buffer
  EXPECT_EQ(cache.stats().creations, made_before + 3);
}

TEST(DnnlKernels, ASecondRunOfTheSameShapeCreatesNothing) {
  struct Case {
    std::string op;
    std::vector<ir::TensorType> inputs;
    ir::Attrs attrs;
  };
  const std::vector<Case> cases = {
      {"conv2d",
       {{ir::DType::kFloat32, {1, 8, 13, 11}}, {ir::DType::kFloat32, {16, 8, 3, 3}}},
       conv({2, 1}, {1, 1}, 1)},
      {"max_pool2d",
       {{ir::DType::kFloat32, {1, 4, 9, 9}}},
       {{"kernel", std::vector<int64_t>{3, 3}}}},
      {"matmul", {{ir::DType::kFloat32, {17, 33}}, {ir::DType::kFloat32, {33, 9}}}, {}},
      {"batch_matmul",
       {{ir::DType::kFloat32, {2, 1, 5, 7}}, {ir::DType::kFloat32, {3, 9, 7}}},
       {{"transpose_b", true}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    for (bool deterministic : {false, true}) {
      std::vector<HostTensor> in = random_inputs(c.inputs, 1);
      run(c.op, in, c.attrs, 2, deterministic);
      const int64_t before = primitive_cache().stats().creations;
      const HostTensor first = run(c.op, in, c.attrs, 2, deterministic);
      const HostTensor second = run(c.op, in, c.attrs, 2, deterministic);
      EXPECT_EQ(primitive_cache().stats().creations, before) << "deterministic " << deterministic;
      EXPECT_TRUE(first.same_bytes(second));
    }
    // prepare() creates what the kernel will use: after it, the first run creates nothing.
    ir::Attrs attrs = c.attrs;
    ir::get_op(c.op).infer_types(c.inputs, attrs);
    ASSERT_TRUE(prepare(c.op, {c.inputs, {}, attrs, 1, false}).created);
    const int64_t before = primitive_cache().stats().creations;
    std::vector<HostTensor> in = random_inputs(c.inputs, 2);
    run(c.op, in, c.attrs, 1, false);
    EXPECT_EQ(primitive_cache().stats().creations, before);
  }
  // float64 has no oneDNN path: prepare says so.
  const std::vector<ir::TensorType> f64 = {{ir::DType::kFloat64, {2, 3}},
                                           {ir::DType::kFloat64, {3, 4}}};
  const ir::Attrs matmul_attrs = {{"transpose_a", false}, {"transpose_b", false}};
  EXPECT_FALSE(prepare("matmul", {f64, {}, matmul_attrs, 1, false}).created);
}

// Constant weights are reordered once when the kernel is prepared; a run handed that state gives
// the bits of a run that reorders them itself, in NCHW and NHWC, for the threads it was prepared
// for and (falling back to the cache's primitive) for others.
TEST(DnnlKernels, PreparedConstantWeightsGiveTheSameBits) {
  struct Case {
    std::vector<ir::TensorType> inputs;
    ir::Attrs attrs;
  };
  ir::Attrs nhwc = conv({1, 1}, {1, 1}, 1);
  nhwc["data_format"] = std::string("NHWC");
  ir::Attrs nhwc_dw = conv({2, 2}, {1, 1}, 32);
  nhwc_dw["data_format"] = std::string("NHWC");
  const std::vector<Case> cases = {
      {{{ir::DType::kFloat32, {1, 16, 20, 20}}, {ir::DType::kFloat32, {32, 16, 3, 3}}},
       conv({1, 1}, {1, 1}, 1)},
      {{{ir::DType::kFloat32, {1, 20, 20, 16}}, {ir::DType::kFloat32, {32, 16, 3, 3}}}, nhwc},
      {{{ir::DType::kFloat32, {1, 16, 16, 32}}, {ir::DType::kFloat32, {32, 1, 3, 3}}}, nhwc_dw},
  };
  for (const Case& c : cases) {
    ir::Attrs attrs = c.attrs;
    ir::get_op("conv2d").infer_types(c.inputs, attrs);
    std::vector<HostTensor> in = random_inputs(c.inputs, 3);
    const void* constants[] = {nullptr, in[1].view().data};
    for (int threads : {1, 2}) {
      const Prepared prepared = prepare("conv2d", {c.inputs, constants, attrs, threads, false});
      ASSERT_TRUE(prepared.created);
      ASSERT_NE(prepared.state, nullptr) << "blocked weights are prepared once";
      for (int run_threads : {1, 2}) {
        const HostTensor plain = run("conv2d", in, attrs, run_threads, false);
        const HostTensor with_state =
            run("conv2d", in, attrs, run_threads, false, prepared.state.get());
        EXPECT_TRUE(plain.same_bytes(with_state))
            << "prepared for " << threads << " threads, run with " << run_threads;
      }
    }
    // Weights bound at run time (no constant): nothing to keep.
    EXPECT_EQ(prepare("conv2d", {c.inputs, {}, attrs, 1, false}).state, nullptr);
  }
}

struct DeterminismCase {
  std::string op;
  std::vector<ir::TensorType> inputs;
  ir::Attrs attrs;
};

void expect_same_bits_at_1_and_2_threads(const DeterminismCase& c) {
  std::vector<HostTensor> in = random_inputs(c.inputs, 7);
  const HostTensor one = run(c.op, in, c.attrs, 1, true);
  const HostTensor two = run(c.op, in, c.attrs, 2, true);
  const HostTensor again = run(c.op, in, c.attrs, 2, true);
  ASSERT_EQ(one.type, two.type);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0)
      << "1 and 2 threads differ";
  EXPECT_EQ(std::memcmp(two.data(), again.data(), two.size() * sizeof(float)), 0)
      << "two runs differ";
}

// conv-epilogue-fusion's promise at the kernel: conv2d with activation "relu" or "clip" gives the
// bytes of conv2d, then relu (or maximum, then minimum) as kernels of their own. Covered: the
// plain-layout path (1x1, small planes: the activation a pass after the primitive), the blocked
// path whose output is reordered back to NCHW, channels-last, depthwise and grouped, with and
// without bias, deterministic or not, 1 and 2 threads.
TEST(DnnlKernels, FusedActivationGivesTheBytesOfTheSeparateOps) {
  const ir::DType f = ir::DType::kFloat32;
  ir::Attrs nhwc = conv({1, 1}, {1, 1}, 1);
  nhwc["data_format"] = std::string("NHWC");
  ir::Attrs nhwc_dw = conv({1, 1}, {1, 1}, 16);
  nhwc_dw["data_format"] = std::string("NHWC");
  const std::vector<DeterminismCase> cases = {
      {"conv2d", {{f, {1, 16, 20, 20}}, {f, {16, 16, 3, 3}}, {f, {16}}}, conv({1, 1}, {1, 1}, 1)},
      {"conv2d", {{f, {2, 16, 9, 9}}, {f, {32, 16, 1, 1}}}, conv({1, 1}, {0, 0}, 1)},
      {"conv2d", {{f, {1, 8, 7, 7}}, {f, {8, 8, 3, 3}}}, conv({1, 1}, {1, 1}, 1)},
      {"conv2d", {{f, {1, 20, 20, 16}}, {f, {16, 16, 3, 3}}}, nhwc},
      {"conv2d", {{f, {1, 15, 15, 16}}, {f, {16, 1, 3, 3}}, {f, {16}}}, nhwc_dw},
      {"conv2d", {{f, {1, 16, 20, 20}}, {f, {16, 1, 3, 3}}, {f, {16}}}, conv({1, 1}, {1, 1}, 16)},
      {"conv2d", {{f, {1, 16, 20, 20}}, {f, {32, 4, 3, 3}}, {f, {32}}}, conv({1, 1}, {1, 1}, 4)},
  };
  const ir::TensorType scalar{f, {}};
  HostTensor lo = HostTensor::from_doubles(scalar, {-0.25});
  HostTensor hi = HostTensor::from_doubles(scalar, {0.5});
  for (const DeterminismCase& c : cases) {
    SCOPED_TRACE(ir::shape_to_string(c.inputs[0].shape) + " * " +
                 ir::shape_to_string(c.inputs[1].shape));
    std::vector<HostTensor> in = random_inputs(c.inputs, 11);
    ir::Attrs relu = c.attrs;
    relu["activation"] = std::string("relu");
    ir::Attrs clip = c.attrs;
    clip["activation"] = std::string("clip");
    clip["clip_min"] = -0.25;
    clip["clip_max"] = 0.5;
    for (bool deterministic : {false, true}) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE("deterministic " + std::to_string(deterministic) + ", threads " +
                     std::to_string(threads));
        HostTensor conv_out = run("conv2d", in, c.attrs, threads, deterministic);
        std::vector<HostTensor> relu_in = {conv_out};
        EXPECT_TRUE(run("relu", relu_in, {}, threads, deterministic)
                        .same_bytes(run("conv2d", in, relu, threads, deterministic)))
            << "relu";
        std::vector<HostTensor> max_in = {conv_out, lo};
        std::vector<HostTensor> min_in = {run("maximum", max_in, {}, threads, deterministic), hi};
        EXPECT_TRUE(run("minimum", min_in, {}, threads, deterministic)
                        .same_bytes(run("conv2d", in, clip, threads, deterministic)))
            << "clip";
      }
    }
  }
}

// An NCHW depthwise convolution runs its own kernel (runtime/kernels/depthwise_conv.cc),
// channels-last ones oneDNN's: the layout pass moves a convolution between the two, so they must
// agree bit for bit. Shapes cover the kernel's vector paths (stride 1 and 2, 16 outputs at a time)
// and their tails, padding on every side, a 5x5 window, dilation, bias and both activations.
// Nothing is prepared for the NCHW form: there is no oneDNN primitive behind it.
// conv2d over NCHW `in` with `attrs` at `threads`, checked to give the bytes of the same
// convolution over x transposed to channels-last (data_format NHWC), its y transposed back.
HostTensor expect_nchw_gives_the_bits_of_channels_last(std::vector<HostTensor>& in,
                                                       const ir::Attrs& attrs, int threads,
                                                       bool deterministic) {
  ir::Attrs nhwc = attrs;
  nhwc["data_format"] = std::string("NHWC");
  const ir::Attrs to_nhwc = {{"perm", std::vector<int64_t>{0, 2, 3, 1}}};
  const ir::Attrs to_nchw = {{"perm", std::vector<int64_t>{0, 3, 1, 2}}};
  const HostTensor nchw_out = run("conv2d", in, attrs, threads, deterministic);
  std::vector<HostTensor> x = {in[0]};
  std::vector<HostTensor> last_in = in;
  last_in[0] = run("transpose", x, to_nhwc, threads, deterministic);
  std::vector<HostTensor> y = {run("conv2d", last_in, nhwc, threads, deterministic)};
  EXPECT_TRUE(nchw_out.same_bytes(run("transpose", y, to_nchw, threads, deterministic)));
  return nchw_out;
}

TEST(DnnlKernels, DepthwiseNchwGivesTheBitsOfChannelsLast) {
  const ir::DType f = ir::DType::kFloat32;
  struct Case {
    ir::Shape x;  // NCHW
    int64_t k, stride, pad, dilation;
    bool bias;
    std::string activation;
  };
  const std::vector<Case> cases = {
      {{1, 32, 112, 112}, 3, 1, 1, 1, true, "clip"},  // mobilenet_v2's first
      {{1, 96, 112, 112}, 3, 2, 1, 1, true, "clip"}, {{2, 5, 9, 37}, 3, 1, 1, 1, false, "none"},
      {{1, 3, 11, 70}, 3, 2, 1, 1, true, "relu"},    {{1, 4, 13, 41}, 5, 2, 2, 1, true, "none"},
      {{1, 6, 20, 45}, 3, 1, 2, 2, false, "relu"},   {{1, 8, 7, 7}, 3, 1, 1, 1, true, "clip"},
  };
  for (const Case& c : cases) {
    const int64_t channels = c.x[1];
    SCOPED_TRACE(ir::shape_to_string(c.x) + " k" + std::to_string(c.k) + " s" +
                 std::to_string(c.stride) + " " + c.activation);
    std::vector<ir::TensorType> types = {{f, c.x}, {f, {channels, 1, c.k, c.k}}};
    if (c.bias) types.push_back({f, {channels}});
    std::vector<HostTensor> in = random_inputs(types, 5);
    ir::Attrs attrs =
        conv({c.stride, c.stride}, {c.pad, c.pad}, channels, {c.dilation, c.dilation});
    attrs["activation"] = c.activation;
    if (c.activation == "clip") attrs["clip_min"] = -0.25, attrs["clip_max"] = 0.5;
    ir::get_op("conv2d").infer_types(types, attrs);  // fills in the defaults
    const void* constants[] = {nullptr, in[1].view().data};
    // The direct kernel runs (nothing prepared) where it gives oneDNN's bits; elsewhere NCHW runs
    // oneDNN's channels-last kernel, whose primitive is prepared.
    EXPECT_EQ(prepare("conv2d", {types, constants, attrs, 1, false}).created,
              !ops::depthwise_nchw_matches_onednn());
    for (int threads : {1, 2}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      expect_nchw_gives_the_bits_of_channels_last(in, attrs, threads, false);
    }
  }
}

// Convolutions with many FLOPs per activation byte run in oneDNN's blocked layout on CPUs whose
// channels-last kernel is not brgconv (conv.cc, blocked_activations_pay), with reorders around
// the primitive: an NCHW and an NHWC node still run the same primitive and give the same bits, at
// one and two threads; a thin convolution stays on the channels-last kernel, the same either way.
TEST(DnnlKernels, HeavyConvolutionsGiveTheSameBitsInEitherFormat) {
  const ir::DType f = ir::DType::kFloat32;
  struct Case {
    ir::Shape x, w;  // NCHW, OIHW
    int64_t stride, pad;
    std::string activation;
    bool heavy;  // at least 200 FLOPs per activation byte
  };
  const std::vector<Case> cases = {
      {{1, 96, 19, 17}, {128, 96, 3, 3}, 1, 0, "none", true},     // 221 FLOP per byte
      {{2, 256, 9, 9}, {256, 256, 3, 3}, 2, 1, "relu", true},     // 272
      {{1, 1024, 5, 5}, {1024, 1024, 1, 1}, 1, 0, "silu", true},  // 256
      {{1, 16, 30, 30}, {16, 16, 3, 3}, 1, 1, "none", false},     // 36: channels-last kernel
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::shape_to_string(c.x) + " * " + ir::shape_to_string(c.w));
    std::vector<ir::TensorType> types = {{f, c.x}, {f, c.w}, {f, {c.w[0]}}};
    std::vector<HostTensor> in = random_inputs(types, 3);
    ir::Attrs attrs = conv({c.stride, c.stride}, {c.pad, c.pad}, 1);
    attrs["activation"] = c.activation;
    ir::get_op("conv2d").infer_types(types, attrs);
    EXPECT_EQ(ops::conv2d_runs_blocked_activations(types, attrs),
              c.heavy && !ops::conv2d_runs_packed(types, attrs) &&
                  !ops::onednn_channels_last_conv_is_brgconv());
    for (int threads : {1, 2}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      const HostTensor nchw_out =
          expect_nchw_gives_the_bits_of_channels_last(in, attrs, threads, true);
      if (threads == 2) {
        EXPECT_TRUE(nchw_out.same_bytes(run("conv2d", in, attrs, 1, true))) << "deterministic";
      }
    }
  }
}

// Padding far larger than the plane (with a stride that keeps the output small): the depthwise
// kernel reads the taps in place instead of copying the plane into a padded one of terabytes, and
// every output, all of whose taps are padding, is the bias.
TEST(DnnlKernels, DepthwiseWithHugePaddingNeedsNoPaddedCopy) {
  const ir::DType f = ir::DType::kFloat32;
  const int64_t pad = int64_t{1} << 35;
  std::vector<ir::TensorType> types = {{f, {1, 2, 4, 40}}, {f, {2, 1, 3, 3}}, {f, {2}}};
  std::vector<HostTensor> in = random_inputs(types, 9);
  ir::Attrs attrs = conv({pad * 2, 1}, {pad, pad, 1, 1}, 2);
  const HostTensor out = run("conv2d", in, attrs, 1, false);
  ASSERT_EQ(out.type.shape, (ir::Shape{1, 2, 2, 40}));
  const std::vector<double> values = out.to_doubles();
  const std::vector<double> bias = in[2].to_doubles();
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], bias[i / 80]) << i;
}

TEST(DnnlKernels, DeterministicConvGivesTheSameBytesAtOneAndTwoThreads) {
  const ir::DType f = ir::DType::kFloat32;
  const std::vector<DeterminismCase> cases = {
      // resnet18's first conv, a 3x3 and a strided 1x1 of its later stages, depthwise, dilated.
      {"conv2d", {{f, {1, 3, 224, 224}}, {f, {64, 3, 7, 7}}}, conv({2, 2}, {3, 3}, 1)},
      {"conv2d", {{f, {1, 64, 56, 56}}, {f, {64, 64, 3, 3}}}, conv({1, 1}, {1, 1}, 1)},
      {"conv2d", {{f, {1, 128, 28, 28}}, {f, {256, 128, 1, 1}}}, conv({2, 2}, {0, 0}, 1)},
      {"conv2d",
       {{f, {1, 256, 14, 14}}, {f, {256, 256, 3, 3}}, {f, {256}}},
       conv({1, 1}, {1, 1}, 1)},
      {"conv2d", {{f, {2, 512, 7, 7}}, {f, {512, 512, 3, 3}}}, conv({1, 1}, {1, 1}, 1)},
      {"conv2d", {{f, {1, 144, 56, 56}}, {f, {144, 1, 3, 3}}}, conv({1, 1}, {1, 1}, 144)},
      {"conv2d", {{f, {1, 32, 17, 19}}, {f, {64, 8, 3, 3}}}, conv({1, 2}, {2, 1, 0, 2}, 4, {2, 2})},
  };
  for (const DeterminismCase& c : cases) {
    SCOPED_TRACE(ir::shape_to_string(c.inputs[0].shape) + " * " +
                 ir::shape_to_string(c.inputs[1].shape));
    expect_same_bits_at_1_and_2_threads(c);
  }
}

// matmul_bias hands its bias to oneDNN's primitive, which adds it to each block of the product
// before storing it: the bytes must be those of matmul then add, at any thread count (a primitive
// with a bias could have been a different implementation, summing k in another order).
TEST(DnnlKernels, MatmulBiasGivesTheBytesOfMatmulThenAdd) {
  const ir::DType f = ir::DType::kFloat32;
  struct Case {
    ir::Shape a, b;
    bool transpose_b;
  };
  const Case cases[] = {
      {{1024, 256}, {256, 256}, false},    // the transformer's query, key and value projections
      {{1024, 256}, {256, 1024}, false},   // its first feed-forward layer
      {{1024, 1024}, {1024, 256}, false},  // its second
      {{64, 784}, {512, 784}, true},       // the mlp's first layer (Gemm, transposed weights)
      {{130, 33}, {33, 17}, false},        // odd sizes
      {{1000, 7}, {7, 3}, false},          // few columns
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ir::shape_to_string(c.a) + " * " + ir::shape_to_string(c.b));
    const int64_t n = c.transpose_b ? c.b[0] : c.b[1];
    std::vector<HostTensor> in = random_inputs({{f, c.a}, {f, c.b}, {f, {n}}}, 7);
    const ir::Attrs attrs = {{"transpose_a", false}, {"transpose_b", c.transpose_b}};
    for (int threads : {1, 2}) {
      std::vector<HostTensor> product_in = {in[0], in[1]};
      std::vector<HostTensor> add_in = {run("matmul", product_in, attrs, threads, false), in[2]};
      const HostTensor unfused = run("add", add_in, {}, threads, false);
      const HostTensor fused = run("matmul_bias", in, attrs, threads, false);
      EXPECT_TRUE(fused.same_bytes(unfused)) << threads << " thread(s)";
    }
  }
}

TEST(DnnlKernels, DeterministicMatmulGivesTheSameBytesAtOneAndTwoThreads) {
  const ir::DType f = ir::DType::kFloat32;
  auto t = [](bool a, bool b) { return ir::Attrs{{"transpose_a", a}, {"transpose_b", b}}; };
  const std::vector<DeterminismCase> cases = {
      {"matmul", {{f, {64, 784}}, {f, {784, 512}}}, t(false, false)},
      {"matmul", {{f, {1024, 256}}, {f, {256, 1024}}}, t(false, false)},
      // Small m * n against a long k: where a GEMM would split k across threads.
      {"matmul", {{f, {8, 16384}}, {f, {16384, 8}}}, t(false, false)},
      {"matmul", {{f, {4096, 16}}, {f, {16, 4096}}}, t(true, true)},
      {"matmul_bias", {{f, {130, 256}}, {f, {64, 256}}, {f, {64}}}, t(false, true)},
      {"batch_matmul", {{f, {4, 1, 64, 32}}, {f, {3, 64, 32}}}, t(false, true)},
      {"batch_matmul", {{f, {12, 2048, 4}}, {f, {12, 2048, 4}}}, t(true, false)},
      // One row by a matrix (gemv.cc): mobilenet_v2's and resnet18's classifiers.
      {"matmul_bias", {{f, {1, 1280}}, {f, {1000, 1280}}, {f, {1000}}}, t(false, true)},
      {"matmul", {{f, {1, 512}}, {f, {512, 1000}}}, t(false, false)},
  };
  for (const DeterminismCase& c : cases) {
    SCOPED_TRACE(c.op + " " + ir::shape_to_string(c.inputs[0].shape) + " * " +
                 ir::shape_to_string(c.inputs[1].shape));
    expect_same_bits_at_1_and_2_threads(c);
  }
}

}  // namespace
}  // namespace mf::runtime::dnnl_rt

namespace mf::runtime::dnnl_rt {
namespace {

TEST(DnnlKernels, AnUnknownDataFormatIsRejectedByName) {
  for (const char* op : {"conv2d", "max_pool2d", "avg_pool2d", "batch_norm"}) {
    std::vector<ir::TensorType> inputs = {{ir::DType::kFloat32, {1, 4, 6, 6}}};
    ir::Attrs attrs = {{"data_format", std::string("NCWH")}};
    if (std::string(op) == "conv2d") {
      inputs.push_back({ir::DType::kFloat32, {4, 4, 3, 3}});
    } else if (std::string(op) == "batch_norm") {
      for (int i = 0; i < 4; ++i) inputs.push_back({ir::DType::kFloat32, {4}});
    } else {
      attrs["kernel"] = std::vector<int64_t>{2, 2};
    }
    try {
      ir::get_op(op).infer_types(inputs, attrs);
      ADD_FAILURE() << op << " accepted data_format NCWH";
    } catch (const mf::Error& e) {
      EXPECT_EQ(e.kind(), mf::ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::string(op) +
                                           ": data_format must be 'NCHW' or 'NHWC', got 'NCWH'"),
                std::string::npos)
          << e.what();
    }
  }
  // A format from input is echoed escaped and cut, never raw.
  std::vector<ir::TensorType> inputs(5, {ir::DType::kFloat32, {4}});
  inputs[0] = {ir::DType::kFloat32, {1, 4, 6, 6}};
  ir::Attrs attrs = {{"data_format", std::string("\x1b[2J") + std::string(5000, 'N')}};
  try {
    ir::get_op("batch_norm").infer_types(inputs, attrs);
    ADD_FAILURE() << "batch_norm accepted a hostile data_format";
  } catch (const mf::Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\x1b'), std::string::npos);
    EXPECT_NE(message.find("got '\\x1b[2J"), std::string::npos) << message;
    EXPECT_LT(message.size(), 1000u);
  }
}

}  // namespace
}  // namespace mf::runtime::dnnl_rt

namespace mf::runtime::dnnl_rt {
namespace {

// A bad activation is refused when the node's types are inferred, before any kernel: an unknown
// name, clip bounds in the wrong order, a NaN bound.
TEST(DnnlKernels, ABadConvolutionActivationIsRejectedWithItsValues) {
  const std::vector<ir::TensorType> inputs = {{ir::DType::kFloat32, {1, 4, 6, 6}},
                                              {ir::DType::kFloat32, {4, 4, 3, 3}}};
  struct Case {
    std::string activation;
    double lo, hi;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"gelu", 0, 0,
       "conv2d: activation must be 'none', 'relu', 'clip', 'silu', 'sigmoid', 'hardswish' or "
       "'hardsigmoid', got 'gelu'"},
      {"clip", 6, 0, "conv2d: activation 'clip' needs clip_min <= clip_max, got 6 and 0"},
      {"clip", std::nan(""), 6, "conv2d: activation 'clip' needs clip_min <= clip_max, got nan"},
  };
  for (const Case& c : cases) {
    ir::Attrs attrs = {{"activation", c.activation}, {"clip_min", c.lo}, {"clip_max", c.hi}};
    try {
      ir::get_op("conv2d").infer_types(inputs, attrs);
      ADD_FAILURE() << "accepted " << c.activation << " " << c.lo << " " << c.hi;
    } catch (const mf::Error& e) {
      EXPECT_EQ(e.kind(), mf::ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mf::runtime::dnnl_rt
