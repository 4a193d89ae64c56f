// transformer: one pre-LayerNorm encoder block, batch 8, seq 128, d_model 256, 4 heads, FFN 1024,
// GELU(tanh).
#include "engine/models/registry.h"
#include "engine/nn/layers.h"

namespace mf::models {
namespace {

class Transformer : public nn::Cell {
 public:
  explicit Transformer(uint64_t seed)
      : Cell("Transformer"),
        block_(register_child("encoder",
                              std::make_unique<nn::TransformerEncoderLayer>(256, 4, 1024, seed))) {}
  Tensor forward(const Tensor& x) override { return block_(x); }

 private:
  nn::TransformerEncoderLayer& block_;
};

}  // namespace

NetSpec transformer_spec() {
  return {"transformer",
          "pre-LN encoder block: batch 8, seq 128, d_model 256, 4 heads, FFN 1024 (GELU tanh)",
          [](uint64_t seed) { return std::make_unique<Transformer>(seed); },
          [](uint64_t seed) {
            return Tensor::randn({8, 128, 256}, seed + 1000);
          }};
}

}  // namespace mf::models
