#pragma once
// The built-in sample networks (`mf nets`): each builds its cell from a seed and makes its input.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/nn/cell.h"

namespace mf::models {

struct NetSpec {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<nn::Cell>(uint64_t seed)> make;
  std::function<Tensor(uint64_t seed)> make_input;
  std::string input_name = "x";
};

std::span<const NetSpec> all_nets();
const NetSpec& find_net(std::string_view name);  // NotFound listing the names

// The networks, one per file in engine/models/.
NetSpec mlp_spec();
NetSpec cnn_spec();
NetSpec lenet5_spec();
NetSpec transformer_spec();
NetSpec elementwise_spec();
NetSpec clamp_chain_spec();
NetSpec layernorm_spec();
NetSpec softmax_spec();
NetSpec layernorm_ops_spec();
NetSpec softmax_ops_spec();
NetSpec chain_spec();

// Built directly, for user code: `models::Mlp net({784, 512, 512, 10});`
class Mlp : public nn::Cell {
 public:
  explicit Mlp(const std::vector<int64_t>& sizes, uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<nn::Cell*> layers_;
};

// MindSpore's LeNet5, for 32x32 images of num_channel channels.
class LeNet5 : public nn::Cell {
 public:
  explicit LeNet5(int64_t num_class = 10, int64_t num_channel = 1, uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<nn::Cell*> layers_;
};

}  // namespace mf::models
