// Channels-last tensors between eager ops (engine/eager/eager_layout.h): which calls keep the order
// and which copy to NCHW first (the plan, per op), that a chain of convolutions, activations,
// residual and per-channel adds, pools and concats really passes channels-last tensors (the flag,
// not only the values), that every result reads back in NCHW order with the bits of the same ops on
// NCHW tensors (deterministic=ON: both sides run the same primitives), that a write through
// mutable_raw_data and a GRAPH run read the right bytes, and that op by op a graph's kernels are
// prepared for the layouts its calls use.

#include "engine/eager/eager_layout.h"

#include <gtest/gtest.h>

#include <cstring>

#include "engine/eager/ir_runner.h"
#include "engine/ops.h"
#include "engine_fixture.h"
#include "ir/graph.h"
#include "runtime/dnnl/primitive_cache.h"
#include "runtime/kernels/depthwise_conv.h"

namespace mf {
namespace {

using engine::EagerLayout;
using Convert = EagerLayout::Convert;
using EagerLayoutTest = testing::EngineTest;

ir::Attrs conv_attrs(int64_t pad, int64_t groups = 1) {
  return {{"stride", std::vector<int64_t>{1, 1}},
          {"padding", std::vector<int64_t>{pad, pad}},
          {"dilation", std::vector<int64_t>{1, 1}},
          {"groups", groups},
          {"data_format", std::string("NCHW")}};
}

// The plan for `op` over `inputs`, with the attributes and outputs inference gives.
EagerLayout plan(std::string_view op, std::vector<ir::TensorType> inputs, std::vector<bool> last,
                 ir::Attrs attrs = {}, bool keep = true, bool deterministic = false) {
  const ir::OpDef& def = ir::get_op(op);
  const std::vector<ir::TensorType> outputs = def.infer_types(inputs, attrs);
  return engine::plan_eager_layout(def, inputs, last, attrs, outputs, keep, deterministic);
}

ir::TensorType f32(ir::Shape shape) {
  return {DType::kFloat32, std::move(shape)};
}

TEST(EagerLayoutPlanTest, AConvolutionThatReordersAnywayLeavesItsOutputChannelsLast) {
  const EagerLayout p =
      plan("conv2d", {f32({1, 16, 56, 56}), f32({32, 16, 3, 3})}, {false, false}, conv_attrs(1));
  EXPECT_EQ(p.convert, (std::vector<Convert>{Convert::kToChannelsLast, Convert::kNone}));
  EXPECT_EQ(p.kernel_inputs[0].shape, (ir::Shape{1, 56, 56, 16}));
  EXPECT_EQ(p.kernel_inputs[1].shape, (ir::Shape{32, 16, 3, 3}));  // weights stay OIHW
  EXPECT_EQ(ir::attr_string(p.attrs, "data_format", "conv2d"), "NHWC");
  EXPECT_EQ(p.kernel_outputs[0].shape, (ir::Shape{1, 56, 56, 32}));
  EXPECT_TRUE(p.outputs_channels_last);
}

TEST(EagerLayoutPlanTest, PlainConvolutionsStayPlainUntilTheirInputIsChannelsLast) {
  // A 1x1 window runs as one plain GEMM over NCHW; the NCHW depthwise kernel needs no reorder.
  const EagerLayout pointwise =
      plan("conv2d", {f32({1, 16, 56, 56}), f32({32, 16, 1, 1})}, {false, false}, conv_attrs(0));
  EXPECT_FALSE(pointwise.outputs_channels_last);
  EXPECT_EQ(ir::attr_string(pointwise.attrs, "data_format", "conv2d"), "NCHW");
  const EagerLayout depthwise =
      plan("conv2d", {f32({1, 16, 56, 56}), f32({16, 1, 3, 3})}, {false, false}, conv_attrs(1, 16));
  // The NCHW depthwise kernel runs where it gives oneDNN's bits; elsewhere the convolution runs
  // oneDNN's channels-last kernel like the others.
  EXPECT_EQ(depthwise.outputs_channels_last, !runtime::ops::depthwise_nchw_matches_onednn());
  // Given a channels-last input, both read it as it is.
  for (const auto& [w, groups] :
       {std::pair{ir::Shape{32, 16, 1, 1}, 1}, std::pair{ir::Shape{16, 1, 3, 3}, 16}}) {
    const EagerLayout p =
        plan("conv2d", {f32({1, 16, 56, 56}), f32(w)}, {true, false}, conv_attrs(w[2] / 2, groups));
    EXPECT_EQ(p.convert[0], Convert::kNone);
    EXPECT_EQ(p.kernel_inputs[0].shape, (ir::Shape{1, 56, 56, 16}));
    EXPECT_TRUE(p.outputs_channels_last);
  }
  // float64 convolutions have no channels-last kernel.
  const EagerLayout f64 =
      plan("conv2d", {{DType::kFloat64, {1, 16, 56, 56}}, {DType::kFloat64, {32, 16, 3, 3}}},
           {false, false}, conv_attrs(1));
  EXPECT_FALSE(f64.outputs_channels_last);
}

TEST(EagerLayoutPlanTest, ElementwiseOpsKeepTheOrderOverEqualShapesScalarsAndPerChannelOperands) {
  const EagerLayout relu = plan("relu", {f32({2, 8, 5, 6})}, {true});
  EXPECT_EQ(relu.kernel_inputs[0].shape, (ir::Shape{2, 5, 6, 8}));
  EXPECT_EQ(relu.kernel_outputs[0].shape, (ir::Shape{2, 5, 6, 8}));
  EXPECT_TRUE(relu.outputs_channels_last);

  const EagerLayout residual = plan("add", {f32({2, 8, 5, 6}), f32({2, 8, 5, 6})}, {true, true});
  EXPECT_EQ(residual.convert, (std::vector<Convert>{Convert::kNone, Convert::kNone}));
  EXPECT_TRUE(residual.outputs_channels_last);

  // A (C, 1, 1) bias has the same bytes as (1, 1, 1, C): read as that, without a copy.
  const EagerLayout bias = plan("add", {f32({2, 8, 5, 6}), f32({8, 1, 1})}, {true, false});
  EXPECT_EQ(bias.convert[1], Convert::kNone);
  EXPECT_EQ(bias.kernel_inputs[1].shape, (ir::Shape{1, 1, 1, 8}));
  EXPECT_TRUE(bias.outputs_channels_last);

  const EagerLayout clip =
      plan("clip", {f32({2, 8, 5, 6}), f32({}), f32({})}, {true, false, false});
  EXPECT_EQ(clip.kernel_inputs[1].shape, ir::Shape{});
  EXPECT_TRUE(clip.outputs_channels_last);

  // A plain activation of its own, or a broadcast one: the op runs in NCHW on a copy.
  const EagerLayout mixed = plan("add", {f32({2, 8, 5, 6}), f32({2, 8, 5, 6})}, {true, false});
  EXPECT_EQ(mixed.convert, (std::vector<Convert>{Convert::kToPlain, Convert::kNone}));
  EXPECT_FALSE(mixed.outputs_channels_last);
  EXPECT_EQ(mixed.kernel_inputs[0].shape, (ir::Shape{2, 8, 5, 6}));
  const EagerLayout broadcast = plan("add", {f32({1, 8, 5, 6}), f32({2, 8, 5, 6})}, {true, true});
  EXPECT_EQ(broadcast.convert, (std::vector<Convert>{Convert::kToPlain, Convert::kToPlain}));
  EXPECT_FALSE(broadcast.outputs_channels_last);
}

TEST(EagerLayoutPlanTest, ConcatMovesItsAxisAndOtherOpsReadACopy) {
  const EagerLayout concat =
      plan("concat", {f32({1, 8, 5, 6}), f32({1, 4, 5, 6})}, {true, true}, {{"axis", int64_t{1}}});
  EXPECT_EQ(ir::attr_int(concat.attrs, "axis", "concat"), 3);
  EXPECT_EQ(concat.kernel_outputs[0].shape, (ir::Shape{1, 5, 6, 12}));
  const EagerLayout height =
      plan("concat", {f32({1, 8, 5, 6}), f32({1, 8, 2, 6})}, {true, true}, {{"axis", int64_t{-2}}});
  EXPECT_EQ(ir::attr_int(height.attrs, "axis", "concat"), 1);

  const EagerLayout reshape =
      plan("reshape", {f32({1, 8, 5, 6})}, {true}, {{"shape", std::vector<int64_t>{1, 240}}});
  EXPECT_EQ(reshape.convert[0], Convert::kToPlain);
  EXPECT_FALSE(reshape.outputs_channels_last);
  const EagerLayout gap = plan("global_avg_pool", {f32({1, 8, 5, 6})}, {true});
  EXPECT_EQ(gap.convert[0], Convert::kToPlain);
}

TEST(EagerLayoutPlanTest, DisabledEverythingChannelsLastIsCopiedToNchwFirst) {
  const EagerLayout conv = plan("conv2d", {f32({1, 16, 56, 56}), f32({32, 16, 3, 3})},
                                {true, false}, conv_attrs(1), /*keep=*/false);
  EXPECT_EQ(conv.convert[0], Convert::kToPlain);
  EXPECT_EQ(ir::attr_string(conv.attrs, "data_format", "conv2d"), "NCHW");
  EXPECT_FALSE(conv.outputs_channels_last);
  const EagerLayout relu = plan("relu", {f32({2, 8, 5, 6})}, {true}, {}, /*keep=*/false);
  EXPECT_EQ(relu.convert[0], Convert::kToPlain);
  EXPECT_FALSE(relu.outputs_channels_last);
}

// A small resnet/squeezenet-like chain, batch 2 (so image order matters), on 20x20 planes (large
// enough that its 3x3 convolution runs the channels-last kernel). Returns every step.
std::vector<Tensor> chain(const Tensor& x) {
  const Tensor w3 = Tensor::uniform({16, 8, 3, 3}, -0.3, 0.3, 1);
  const Tensor w1 = Tensor::uniform({16, 16, 1, 1}, -0.3, 0.3, 2);
  const Tensor dw = Tensor::uniform({16, 1, 3, 3}, -0.3, 0.3, 3);
  const Tensor bias = Tensor::uniform({16, 1, 1}, -0.5, 0.5, 4);
  std::vector<Tensor> s;
  s.push_back(ops::conv2d(x, w3, {.padding = {1, 1}}));                       // 0
  s.push_back(ops::relu(s.back()));                                           // 1
  s.push_back(ops::conv2d(s.back(), w1));                                     // 2
  s.push_back(ops::add(s.back(), s[1]));                                      // 3 residual
  s.push_back(ops::add(s.back(), bias));                                      // 4 per channel
  s.push_back(ops::clip(s.back(), ops::scalar(0), ops::scalar(0.6)));         // 5
  s.push_back(ops::conv2d(s.back(), dw, {.padding = {1, 1}, .groups = 16}));  // 6 depthwise
  s.push_back(ops::max_pool2d(s.back()));                                     // 7
  s.push_back(ops::concat({s.back(), s.back()}, 1));                          // 8
  const Tensor scale = Tensor::uniform({32}, 0.5, 1.5, 5), shift = Tensor::uniform({32}, -1, 1, 6);
  const Tensor mean = Tensor::uniform({32}, -1, 1, 8), var = Tensor::uniform({32}, 0.2, 2, 9);
  s.push_back(ops::batch_norm(s.back(), scale, shift, mean, var));  // 9 pre-activation
  s.push_back(ops::global_avg_pool(s.back()));                      // 10 reads NCHW
  s.push_back(ops::reshape(s[8], {2, -1}));                         // 11 reads NCHW
  return s;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

TEST_F(EagerLayoutTest, AChainPassesChannelsLastTensorsWithTheBitsOfNchw) {
  for (const bool synchronous : {true, false}) {
    SCOPED_TRACE(synchronous ? "synchronous" : "asynchronous");
    const Tensor x = Tensor::uniform({2, 8, 20, 20}, -1, 1, 7);
    context::set({{"deterministic", "ON"},
                  {"pynative_synchronize", synchronous},
                  {"disable_format_transform", false}});
    const std::vector<Tensor> kept = chain(x);
    context::set({{"disable_format_transform", true}});
    const std::vector<Tensor> plain = chain(x);
    for (size_t i = 0; i < kept.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i));
      EXPECT_EQ(kept[i].impl()->channels_last, i <= 9) << "which steps keep channels-last";
      EXPECT_FALSE(plain[i].impl()->channels_last);
      EXPECT_EQ(kept[i].shape(), plain[i].shape());
      EXPECT_TRUE(same_bytes(kept[i], plain[i]));
    }
  }
}

TEST_F(EagerLayoutTest, WithoutDeterminismTheValuesAgreeClosely) {
  const Tensor x = Tensor::uniform({2, 8, 20, 20}, -1, 1, 7);
  const std::vector<Tensor> kept = chain(x);
  context::set({{"disable_format_transform", true}});
  const std::vector<Tensor> plain = chain(x);
  ASSERT_TRUE(kept[8].impl()->channels_last);
  const std::vector<float> a = kept[8].to_vector<float>(), b = plain[8].to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5f) << "element " << i;
}

TEST_F(EagerLayoutTest, AWriteThroughMutableRawDataReachesLaterOps) {
  const Tensor x = Tensor::uniform({1, 8, 20, 20}, -1, 1, 7);
  Tensor y = ops::conv2d(x, Tensor::uniform({16, 8, 3, 3}, -0.3, 0.3, 1), {.padding = {1, 1}});
  ASSERT_TRUE(y.impl()->channels_last);
  const Tensor before = ops::relu(y);  // queued before the write: sees the old values
  float* p = static_cast<float*>(y.mutable_raw_data());
  EXPECT_FALSE(y.impl()->channels_last) << "the storage is NCHW from the write on";
  for (int64_t i = 0; i < y.numel(); ++i) p[i] = float(i % 7) - 3.f;
  const std::vector<float> after = ops::relu(y).to_vector<float>();
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(after[i], std::max(float(i % 7) - 3.f, 0.f));
  const std::vector<float> old = before.to_vector<float>();
  EXPECT_NE(old, after);
  for (float v : old) ASSERT_GE(v, 0.f);
}

TEST_F(EagerLayoutTest, AGraphRunReadsAChannelsLastInputInNchwOrder) {
  auto g = std::make_unique<ir::Graph>("main");
  ir::Value in = g->add_parameter("x", f32({1, 16, 20, 20}));
  // Not elementwise: a GRAPH run that read NHWC bytes as NCHW would move every element.
  g->add_output(g->add_node("reshape", {in}, {{"shape", std::vector<int64_t>{16, 400}}})->output());
  const Tensor x = Tensor::uniform({1, 8, 20, 20}, -1, 1, 7);
  const Tensor y =
      ops::conv2d(x, Tensor::uniform({16, 8, 3, 3}, -0.3, 0.3, 1), {.padding = {1, 1}});
  ASSERT_TRUE(y.impl()->channels_last);
  context::set({{"mode", "GRAPH_MODE"}});
  engine::IrRunner runner(std::move(g));
  const Tensor out = runner.run({{"x", y}}, 0).at(0).second;
  EXPECT_EQ(out.to_vector<float>(), y.to_vector<float>());
}

// Op by op, the kernels prepared before the first op are the ones the calls use: the first run
// creates no primitive of its own, and finds its weights already in the kernels' layout.
TEST_F(EagerLayoutTest, PreparedKernelsMatchTheLayoutsTheCallsUse) {
  auto g = std::make_unique<ir::Graph>("main");
  // Shapes no other test uses: nothing is in the primitive cache before.
  ir::Value x = g->add_parameter("x", f32({1, 9, 23, 23}));
  ir::Value w3 = g->add_parameter("w3", f32({12, 9, 3, 3}));
  ir::Value w1 = g->add_parameter("w1", f32({12, 12, 1, 1}));
  ir::Value y = g->add_node("conv2d", {x, w3}, conv_attrs(1))->output();
  y = g->add_node("relu", {y})->output();
  y = g->add_node("conv2d", {y, w1}, conv_attrs(0))->output();  // reads channels-last
  g->add_output(g->add_node("global_avg_pool", {y})->output());
  context::set({{"runtime_num_threads", 1}, {"pynative_synchronize", true}});
  engine::IrRunner runner(std::move(g));
  const int64_t before = runtime::dnnl_rt::primitive_cache().stats().creations;
  const auto weights_before = runtime::dnnl_rt::reordered_weights_cache().stats();
  runner.run({}, 3);
  const int64_t made = runtime::dnnl_rt::primitive_cache().stats().creations - before;
  EXPECT_EQ(runner.eager_prepare_report().kernels, 2u);
  EXPECT_EQ(made, int64_t(runner.eager_prepare_report().kernels))
      << "a call made a primitive that preparing did not";
  // Both convolutions' weights were reordered while preparing: the calls found them.
  const auto weights_after = runtime::dnnl_rt::reordered_weights_cache().stats();
  EXPECT_EQ(weights_after.creations - weights_before.creations, 2);
  EXPECT_EQ(weights_after.hits - weights_before.hits, 2) << "a call reordered its own weights";
}

}  // namespace
}  // namespace mf
