#pragma once
// Float32 tensors handed to executors in runtime tests: a type, a buffer from the default pool
// holding given values, or uniform random values in [-range, range] from a seed.
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "runtime/graph_executor.h"
#include "runtime/memory_pool.h"

namespace mf::runtime::testing {

inline ir::TensorType f32(ir::Shape shape) {
  return {ir::DType::kFloat32, std::move(shape)};
}

inline TensorArg make_arg(const ir::TensorType& type, const std::vector<float>& values) {
  TensorArg arg{type, default_pool().allocate(std::max<size_t>(values.size() * 4, 64), "test")};
  std::memcpy(arg.buffer->data(), values.data(), values.size() * sizeof(float));
  return arg;
}

inline TensorArg random_arg(const ir::TensorType& type, uint32_t seed, float range = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<float> values(ir::num_elements(type.shape));
  for (float& v : values) v = dist(rng);
  return make_arg(type, values);
}

}  // namespace mf::runtime::testing
