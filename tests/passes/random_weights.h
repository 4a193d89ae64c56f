#pragma once
// Random float32 values and constant weights for tests that build graphs by hand.

#include <cstdint>
#include <random>
#include <vector>

#include "ir/graph.h"

namespace mf::passes::testing {

// n uniform values in [-1, 1), the same for the same seed.
inline std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// A float32 constant of `shape` holding random_values(seed).
inline ir::Value weight(ir::Graph& g, ir::Shape shape, uint32_t seed) {
  const int64_t n = ir::num_elements(shape);
  return g.add_constant(std::move(shape), random_values(n, seed));
}

}  // namespace mf::passes::testing
