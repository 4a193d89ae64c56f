#include "engine/models/registry.h"

#include "base/error.h"

namespace mf::models {

std::span<const NetSpec> all_nets() {
  // The one list of sample networks.
  static const std::vector<NetSpec> nets = {
      mlp_spec(),         cnn_spec(),       transformer_spec(), elementwise_spec(),
      clamp_chain_spec(), layernorm_spec(), softmax_spec(),     layernorm_ops_spec(),
      softmax_ops_spec(), chain_spec(),     lenet5_spec()};
  return nets;
}

const NetSpec& find_net(std::string_view name) {
  std::string names;
  for (const auto& net : all_nets()) {
    if (net.name == name) return net;
    names += (names.empty() ? "" : ", ") + net.name;
  }
  MF_FAIL(NotFound, "no sample network named '", name, "'; the built-in networks are: ", names,
          " (or give a .ir or .onnx file)");
}

}  // namespace mf::models
