// mlp: batch 64, 784 -> 512 -> 512 -> 10 with ReLU between layers.
#include "engine/models/registry.h"
#include "engine/nn/layers.h"

namespace mf::models {

Mlp::Mlp(const std::vector<int64_t>& sizes, uint64_t seed) : Cell("Mlp") {
  MF_CHECK(sizes.size() >= 2, InvalidArgument, "Mlp needs at least an input and an output size");
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    layers_.push_back(
        &register_child("fc" + std::to_string(i + 1),
                        std::make_unique<nn::Dense>(sizes[i], sizes[i + 1], seed * 64 + i)));
    if (i + 2 < sizes.size())
      layers_.push_back(
          &register_child("relu" + std::to_string(i + 1), std::make_unique<nn::ReLU>()));
  }
}

Tensor Mlp::forward(const Tensor& x) {
  Tensor y = x;
  for (nn::Cell* layer : layers_) y = (*layer)(y);
  return y;
}

NetSpec mlp_spec() {
  return {"mlp", "batch 64, 784 -> 512 -> 512 -> 10, ReLU",
          [](uint64_t seed) {
            return std::make_unique<Mlp>(std::vector<int64_t>{784, 512, 512, 10}, seed);
          },
          [](uint64_t seed) {
            return Tensor::randn({64, 784}, seed + 1000);
          }};
}

}  // namespace mf::models
