// A kernel keeps weights reordered into its layout under the weights' content identity (a
// convolution's weights, op by op and in GRAPH mode without infer_boost, are reordered once, not on
// every call). The identity must never let stale weights through: a weight tensor written in place
// (Tensor::mutable_raw_data) or replaced (Cell::set_parameter) gives the new result at once, in
// both modes, bit for bit what fresh tensors with those values give.

#include <gtest/gtest.h>

#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine_fixture.h"
#include "runtime/dnnl/primitive_cache.h"
#include "runtime/storage.h"
#include "tests/tensor_bytes.h"

namespace mf {
namespace {

using ReorderedWeightsTest = testing::EngineTest;

// 64 -> 64 channels over 28x28: a shape whose kernel wants its weights reordered.
ops::Conv2dOptions padded() {
  ops::Conv2dOptions options;
  options.padding = {1, 1};
  return options;
}

TEST_F(ReorderedWeightsTest, OpByOpAWeightWrittenInPlaceIsNeverServedStale) {
  const Tensor x = Tensor::randn({1, 64, 28, 28}, 1);
  Tensor w = Tensor::randn({64, 64, 3, 3}, 2);
  auto& cache = runtime::dnnl_rt::reordered_weights_cache();
  const std::vector<uint8_t> first = testing::bytes_of(ops::conv2d(x, w, padded()));
  const int64_t hits = cache.stats().hits;
  EXPECT_EQ(testing::bytes_of(ops::conv2d(x, w, padded())), first);
  EXPECT_GT(cache.stats().hits, hits) << "the same weights were reordered again";
  // Written in place: the next call sees the new bytes.
  static_cast<float*>(w.mutable_raw_data())[5] += 0.5f;
  const Tensor fresh = Tensor::from_vector(w.to_vector<float>(), {64, 64, 3, 3});
  const std::vector<uint8_t> after = testing::bytes_of(ops::conv2d(x, w, padded()));
  EXPECT_NE(after, first);
  EXPECT_EQ(after, testing::bytes_of(ops::conv2d(x, fresh, padded())));
}

TEST_F(ReorderedWeightsTest, GraphModeWithoutInferBoostFollowsItsParameters) {
  context::set({{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", "O1"}}}});
  nn::Conv2dConfig config;
  config.in_channels = 64;
  config.out_channels = 64;
  config.padding = 1;
  nn::Conv2d net(config, 3);
  const Tensor x = Tensor::randn({1, 64, 28, 28}, 4);
  const std::vector<uint8_t> first = testing::bytes_of(net(x));
  auto& cache = runtime::dnnl_rt::reordered_weights_cache();
  const int64_t hits = cache.stats().hits;
  EXPECT_EQ(testing::bytes_of(net(x)), first);
  EXPECT_GT(cache.stats().hits, hits) << "the parameter's weights were reordered again";
  // In place: the compiled graph's next run uses the new bytes.
  Tensor weight = net.named_parameters().at(0).second;
  ASSERT_EQ(weight.shape(), (Shape{64, 64, 3, 3}));
  static_cast<float*>(weight.mutable_raw_data())[0] += 0.5f;
  const std::vector<uint8_t> written = testing::bytes_of(net(x));
  EXPECT_NE(written, first);
  // Replaced: likewise.
  net.set_parameter(net.named_parameters().at(0).first, Tensor::randn({64, 64, 3, 3}, 5));
  const std::vector<uint8_t> replaced = testing::bytes_of(net(x));
  EXPECT_NE(replaced, written);
  // Each equals what op by op computes from the same values.
  context::set({{"mode", "PYNATIVE_MODE"}});
  EXPECT_EQ(testing::bytes_of(net(x)), replaced);
}

TEST_F(ReorderedWeightsTest, MemoryAnotherOwnerWritesIsNeverKept) {
  std::vector<float> bytes(16, 1.0f);
  EXPECT_FALSE(
      runtime::wrap_external(bytes.data(), bytes.size() * sizeof(float))->owns_its_bytes());
  EXPECT_TRUE(runtime::allocate_unpooled(64)->owns_its_bytes());
  // Two buffers never share an identity, even at one address.
  auto a = runtime::allocate_unpooled(64);
  const uint64_t id = a->id();
  a.reset();
  EXPECT_NE(runtime::allocate_unpooled(64)->id(), id);
}

}  // namespace
}  // namespace mf
