// The packed-weights convolution (runtime/kernels/packed_conv.cc): which convolutions it takes, and
// that every way of giving it weights (packed per call, kept under their content identity, prepared
// as constants), either data format and the fused activations give the same bits. Its values
// against the double reference, at one and many threads, are the op conformance suite's (conv2d's
// samples include packed shapes; PackedConv.SamplesCoverIt keeps them so).

#include <gtest/gtest.h>

#include <string>

#include "ir/op_def.h"
#include "runtime/dnnl/engine.h"
#include "runtime/dnnl/prepare.h"
#include "runtime/kernels/conv_layout.h"
#include "runtime/kernels/packed_conv.h"
#include "tests/runtime/ops_test_util.h"

namespace mf::runtime::ops {
namespace {

using testing::conv;
using testing::HostTensor;
using testing::random_inputs;
using testing::run;

constexpr ir::DType f = ir::DType::kFloat32;

WindowGeometry geometry(int64_t batch, int64_t channels, int64_t plane, int64_t k, int64_t stride) {
  WindowGeometry g;
  g.batch = batch, g.channels = channels, g.h = g.w = plane;
  g.kh = g.kw = k, g.sh = g.sw = stride, g.top = g.left = k / 2;
  g.oh = g.ow = (plane + 2 * (k / 2) - k) / stride + 1;
  return g;
}

TEST(PackedConv, TakesConvolutionsWhoseWeightsOutweighTheirPlane) {
  // resnet18's 7x7 stage and the 1x1 windows of its 14x14 one; squeezenet's classifier.
  const bool available = packed_conv_available();
  EXPECT_EQ(packed_conv_applies(geometry(1, 512, 7, 3, 1), 512, 1), available);
  EXPECT_EQ(packed_conv_applies(geometry(1, 256, 14, 3, 2), 512, 1), available);
  EXPECT_EQ(packed_conv_applies(geometry(1, 256, 14, 1, 2), 512, 1), available);
  EXPECT_EQ(packed_conv_applies(geometry(1, 512, 13, 1, 1), 1000, 1), available);
  // A 3x3 window over 14x14, a larger plane (each weight reused thousands of times), small
  // weights, a last panel half empty (960 -> 160), groups, empty outputs.
  EXPECT_FALSE(packed_conv_applies(geometry(1, 256, 14, 3, 1), 256, 1));
  EXPECT_FALSE(packed_conv_applies(geometry(1, 64, 56, 3, 1), 64, 1));
  EXPECT_FALSE(packed_conv_applies(geometry(8, 512, 7, 3, 1), 512, 1));
  EXPECT_FALSE(packed_conv_applies(geometry(1, 512, 17, 1, 1), 512, 1));
  EXPECT_FALSE(packed_conv_applies(geometry(1, 16, 7, 3, 1), 32, 1));
  EXPECT_FALSE(packed_conv_applies(geometry(1, 960, 7, 1, 1), 160, 1));
  EXPECT_FALSE(packed_conv_applies(geometry(1, 512, 7, 3, 1), 512, 2));
  EXPECT_FALSE(packed_conv_applies(geometry(0, 512, 7, 3, 1), 512, 1));
}

// conv2d's samples run through the conformance suite (reference, one and many threads): some of
// them must take this kernel, with more than one panel of output channels, a last panel cut short,
// several blocks of k, a tap's channels split across blocks, stride, dilation, asymmetric padding
// and a batch of two.
TEST(PackedConv, SamplesCoverIt) {
  if (!packed_conv_available()) GTEST_SKIP() << "the packed kernel needs an AVX-512 CPU and build";
  int packed = 0;
  for (const ir::OpSample& s : ir::get_op("conv2d").samples) {
    ir::Attrs attrs = s.attrs;
    ir::get_op("conv2d").infer_types(s.inputs, attrs);
    if (conv2d_runs_packed(s.inputs, attrs)) ++packed;
  }
  EXPECT_GE(packed, 3);
}

// Layer 4 of resnet18 in miniature: 2 panels (the second 36 channels: two vectors, one of 4
// lanes, one empty), blocks of k cut at 256 channels and at each tap; NCHW with two images, stride,
// dilation and asymmetric padding; a 1x1 over 300 channels.
struct PackedCase {
  std::vector<ir::TensorType> inputs;  // NCHW
  ir::Attrs attrs;
};

std::vector<PackedCase> packed_cases() {
  ir::Attrs strided = conv({2, 2}, {1, 0, 2, 1}, 1, {1, 2});
  ir::Attrs relu = conv({1, 1}, {1, 1}, 1);
  relu["activation"] = std::string("relu");
  ir::Attrs clip = conv({1, 1}, {0, 0}, 1);
  clip["activation"] = std::string("clip");
  clip["clip_min"] = -0.25, clip["clip_max"] = 0.5;
  return {
      {{{f, {1, 320, 7, 7}}, {f, {100, 320, 3, 3}}, {f, {100}}}, relu},
      {{{f, {2, 96, 9, 11}}, {f, {40, 96, 3, 3}}}, strided},
      {{{f, {1, 300, 5, 5}}, {f, {180, 300, 1, 1}}, {f, {180}}}, clip},
  };
}

ir::Attrs nhwc(ir::Attrs attrs) {
  attrs["data_format"] = std::string("NHWC");
  return attrs;
}

// `c` with x channels-last and the attributes' defaults filled in.
PackedCase channels_last_case(PackedCase c) {
  c.attrs = nhwc(c.attrs);
  ir::Shape& x = c.inputs[0].shape;
  x = {x[0], x[2], x[3], x[1]};
  ir::get_op("conv2d").infer_types(c.inputs, c.attrs);
  return c;
}

// The layout pass and the eager layouts move a convolution between NCHW and NHWC: same bits.
TEST(PackedConv, NchwGivesTheBitsOfChannelsLast) {
  if (!packed_conv_available()) GTEST_SKIP() << "the packed kernel needs an AVX-512 CPU and build";
  const ir::Attrs to_nhwc = {{"perm", std::vector<int64_t>{0, 2, 3, 1}}};
  const ir::Attrs to_nchw = {{"perm", std::vector<int64_t>{0, 3, 1, 2}}};
  for (PackedCase c : packed_cases()) {
    ir::get_op("conv2d").infer_types(c.inputs, c.attrs);
    ASSERT_TRUE(conv2d_runs_packed(c.inputs, c.attrs) || !packed_conv_available());
    EXPECT_TRUE(conv2d_reorders_to_channels_last(c.inputs, c.attrs, false))
        << "an NCHW activation before a packed convolution goes channels-last";
    std::vector<HostTensor> in = random_inputs(c.inputs, 11);
    for (int threads : {1, 2}) {
      const HostTensor nchw_out = run("conv2d", in, c.attrs, threads, false);
      std::vector<HostTensor> x = {in[0]};
      std::vector<HostTensor> last_in = in;
      last_in[0] = run("transpose", x, to_nhwc, threads, false);
      std::vector<HostTensor> y = {run("conv2d", last_in, nhwc(c.attrs), threads, false)};
      EXPECT_TRUE(nchw_out.same_bytes(run("transpose", y, to_nchw, threads, false)))
          << ir::shape_to_string(c.inputs[1].shape) << " threads " << threads;
    }
  }
}

// Weights packed on every call (no identity), kept under their identity, and prepared as a
// compiled graph's constants give the same bits; bound at run time, nothing is prepared.
TEST(PackedConv, EveryWayOfGivingTheWeightsGivesTheSameBits) {
  for (const PackedCase& nchw : packed_cases()) {
    PackedCase c = channels_last_case(nchw);
    ir::Attrs& filled = c.attrs;
    std::vector<HostTensor> in = random_inputs(c.inputs, 5);
    const HostTensor plain = run("conv2d", in, filled, 1, false);
    const void* constants[] = {nullptr, in[1].view().data};
    const dnnl_rt::Prepared prepared =
        dnnl_rt::prepare("conv2d", {c.inputs, constants, filled, 2, false});
    ASSERT_TRUE(prepared.created);
    ASSERT_NE(prepared.state, nullptr);
    EXPECT_TRUE(plain.same_bytes(run("conv2d", in, filled, 2, false, prepared.state.get())));
    EXPECT_EQ(dnnl_rt::prepare("conv2d", {c.inputs, {}, filled, 1, false}).state, nullptr);
    // Kept under an identity: packed ahead (as an op-by-op run prepares), then found.
    const ir::OpDef& op = ir::get_op("conv2d");
    HostTensor out(op.infer_types(c.inputs, filled)[0]);
    std::vector<ir::TensorView> views;
    for (HostTensor& t : in) views.push_back(t.view());
    views[1].content_id = 0x7061636b6564;  // any id no other test uses
    views[1].content_version = 1;
    reorder_conv2d_weights_ahead(c.inputs, filled, views[1], 1, false);
    const ir::TensorView out_view[] = {out.view()};
    op.kernel(ir::KernelContext{views, out_view, filled, op.name, false});
    EXPECT_TRUE(plain.same_bytes(out)) << ir::shape_to_string(c.inputs[1].shape);
  }
}

// State prepared for one kernel is never read by the other: a graph compiled while oneDNN was
// forced and run after (or the reverse) runs the kernel chosen now, with the same bits.
TEST(PackedConv, StatePreparedForTheOtherKernelIsIgnored) {
  if (!packed_conv_available()) GTEST_SKIP() << "the packed kernel needs an AVX-512 CPU and build";
  PackedCase c = channels_last_case(packed_cases()[0]);
  ir::Attrs& attrs = c.attrs;
  std::vector<HostTensor> in = random_inputs(c.inputs, 13);
  const HostTensor expected = run("conv2d", in, attrs, 1, false);
  const void* constants[] = {nullptr, in[1].view().data};
  const dnnl_rt::Prepared packed =
      dnnl_rt::prepare("conv2d", {c.inputs, constants, attrs, 1, false});
  dnnl_rt::set_conv_layout(dnnl_rt::ConvLayout::kBlocked);
  const dnnl_rt::Prepared onednn =
      dnnl_rt::prepare("conv2d", {c.inputs, constants, attrs, 1, false});
  const HostTensor onednn_with_packed_state =
      run("conv2d", in, attrs, 1, false, packed.state.get());
  dnnl_rt::set_conv_layout(dnnl_rt::ConvLayout::kAuto);
  const HostTensor packed_with_onednn_state =
      run("conv2d", in, attrs, 1, false, onednn.state.get());
  ASSERT_NE(packed.state, nullptr);
  ASSERT_NE(onednn.state, nullptr);
  EXPECT_TRUE(onednn_with_packed_state.same_bytes(expected));
  EXPECT_TRUE(packed_with_onednn_state.same_bytes(expected));
}

// conv-epilogue-fusion's promise here: the activation inside the kernel gives the bytes of the
// convolution then the activation as an op of its own.
TEST(PackedConv, FusedActivationGivesTheBytesOfTheSeparateOps) {
  for (PackedCase c : packed_cases()) {
    const auto named = c.attrs.find("activation");
    if (named == c.attrs.end()) continue;
    const std::string activation = std::get<std::string>(named->second);
    std::vector<HostTensor> in = random_inputs(c.inputs, 3);
    ir::Attrs bare = c.attrs;
    bare["activation"] = std::string("none");
    std::vector<HostTensor> y = {run("conv2d", in, bare, 2, false)};
    HostTensor separate;
    if (activation == "relu") {
      separate = run("relu", y, {}, 2, false);
    } else {
      std::vector<HostTensor> lo_in = {y[0], testing::f32({}, {-0.25})};
      std::vector<HostTensor> lo = {run("maximum", lo_in, {}, 2, false), testing::f32({}, {0.5})};
      separate = run("minimum", lo, {}, 2, false);
    }
    EXPECT_TRUE(run("conv2d", in, c.attrs, 2, false).same_bytes(separate)) << activation;
  }
}

// oneDNN's channels-last kernel (brgconv) sums each output in the same order, (ky, kx, c) from 0,
// then adds the bias: forcing a oneDNN layout (MF_DNNL_CONV_LAYOUT, for measuring) runs oneDNN and
// gives the same bits, so this kernel changed no network's results.
TEST(PackedConv, GivesTheBitsOfOneDnnChannelsLast) {
  if (!packed_conv_available()) GTEST_SKIP() << "the packed kernel needs an AVX-512 CPU and build";
  for (PackedCase c : packed_cases()) {
    ir::get_op("conv2d").infer_types(c.inputs, c.attrs);  // the attributes' defaults filled in
    std::vector<HostTensor> in = random_inputs(c.inputs, 9);
    for (int threads : {1, 2}) {
      // The claim is about the packed kernel: it must be the one that ran.
      ASSERT_TRUE(conv2d_runs_packed(c.inputs, c.attrs)) << ir::shape_to_string(c.inputs[1].shape);
      const HostTensor packed = run("conv2d", in, c.attrs, threads, false);
      dnnl_rt::set_conv_layout(dnnl_rt::ConvLayout::kBlocked);
      const HostTensor onednn = run("conv2d", in, c.attrs, threads, false);
      dnnl_rt::set_conv_layout(dnnl_rt::ConvLayout::kAuto);
      EXPECT_TRUE(packed.same_bytes(onednn))
          << ir::shape_to_string(c.inputs[1].shape) << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace mf::runtime::ops
