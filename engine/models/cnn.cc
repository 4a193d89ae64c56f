// cnn: batch 32 of 3x32x32 images through three 3x3 convolutions (padding 1), two max-pools and two
// dense layers.
#include "engine/models/registry.h"
#include "engine/nn/layers.h"

namespace mf::models {
namespace {

class Cnn : public nn::Cell {
 public:
  explicit Cnn(uint64_t seed) : Cell("Cnn") {
    auto conv = [&](int64_t in, int64_t out, uint64_t s) {
      return std::make_unique<nn::Conv2d>(
          nn::Conv2dConfig{.in_channels = in, .out_channels = out, .kernel_size = 3, .padding = 1},
          seed * 64 + s);
    };
    layers_ = {&register_child("conv1", conv(3, 32, 1)),
               &register_child("relu1", std::make_unique<nn::ReLU>()),
               &register_child("conv2", conv(32, 32, 2)),
               &register_child("relu2", std::make_unique<nn::ReLU>()),
               &register_child("pool1", std::make_unique<nn::MaxPool2d>(2, 2)),
               &register_child("conv3", conv(32, 64, 3)),
               &register_child("relu3", std::make_unique<nn::ReLU>()),
               &register_child("pool2", std::make_unique<nn::MaxPool2d>(2, 2)),
               &register_child("flatten", std::make_unique<nn::Flatten>()),
               &register_child("fc1", std::make_unique<nn::Dense>(4096, 128, seed * 64 + 4)),
               &register_child("relu4", std::make_unique<nn::ReLU>()),
               &register_child("fc2", std::make_unique<nn::Dense>(128, 10, seed * 64 + 5))};
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (nn::Cell* layer : layers_) y = (*layer)(y);
    return y;
  }

 private:
  std::vector<nn::Cell*> layers_;
};

}  // namespace

NetSpec cnn_spec() {
  return {"cnn", "batch 32, 3x32x32: conv3x3 x3 (+ReLU), 2 max-pools, dense 4096 -> 128 -> 10",
          [](uint64_t seed) { return std::make_unique<Cnn>(seed); },
          [](uint64_t seed) {
            return Tensor::randn({32, 3, 32, 32}, seed + 1000);
          }};
}

}  // namespace mf::models
