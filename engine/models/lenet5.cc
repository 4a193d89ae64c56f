// lenet5: MindSpore's LeNet5 (model zoo) on batch 64 of 1x32x32 images: two valid 5x5
// convolutions (6 and 16 channels) each followed by ReLU and a 2x2 max-pool, then dense
// 400 -> 120 -> 84 -> 10 with ReLU between. Fashion-MNIST's 28x28 images are padded to 32x32.
#include "engine/models/registry.h"
#include "engine/nn/layers.h"

namespace mf::models {

LeNet5::LeNet5(int64_t num_class, int64_t num_channel, uint64_t seed) : Cell("LeNet5") {
  auto conv = [&](int64_t in, int64_t out, uint64_t s) {
    return std::make_unique<nn::Conv2d>(nn::Conv2dConfig{.in_channels = in,
                                                         .out_channels = out,
                                                         .kernel_size = 5,
                                                         .pad_mode = nn::PadMode::kValid},
                                        seed * 64 + s);
  };
  layers_ = {&register_child("conv1", conv(num_channel, 6, 1)),
             &register_child("relu1", std::make_unique<nn::ReLU>()),
             &register_child("pool1", std::make_unique<nn::MaxPool2d>(2, 2)),
             &register_child("conv2", conv(6, 16, 2)),
             &register_child("relu2", std::make_unique<nn::ReLU>()),
             &register_child("pool2", std::make_unique<nn::MaxPool2d>(2, 2)),
             &register_child("flatten", std::make_unique<nn::Flatten>()),
             &register_child("fc1", std::make_unique<nn::Dense>(400, 120, seed * 64 + 3)),
             &register_child("relu3", std::make_unique<nn::ReLU>()),
             &register_child("fc2", std::make_unique<nn::Dense>(120, 84, seed * 64 + 4)),
             &register_child("relu4", std::make_unique<nn::ReLU>()),
             &register_child("fc3", std::make_unique<nn::Dense>(84, num_class, seed * 64 + 5))};
}

Tensor LeNet5::forward(const Tensor& x) {
  Tensor y = x;
  for (nn::Cell* layer : layers_) y = (*layer)(y);
  return y;
}

NetSpec lenet5_spec() {
  return {"lenet5",
          "batch 64, 1x32x32: LeNet5 (conv5x5 6, 16 + ReLU + max-pool, dense 400-120-84-10)",
          [](uint64_t seed) { return std::make_unique<LeNet5>(10, 1, seed); },
          [](uint64_t seed) {
            return Tensor::randn({64, 1, 32, 32}, seed + 1000);
          }};
}

}  // namespace mf::models
