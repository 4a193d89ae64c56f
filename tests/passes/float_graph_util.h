#pragma once
// For tests that build float32 graphs by hand: random values and constant weights, and one run of
// a compiled single-input graph.

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "ir/graph.h"
#include "passes/compiler.h"
#include "runtime/graph_executor.h"
#include "runtime/memory_pool.h"

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

// The first output of `c` (KernelExecutor) run on `input`, its one float32 parameter.
inline std::vector<float> run_on_floats(const CompiledGraph& c, const std::vector<float>& input,
                                        bool deterministic) {
  auto executor = runtime::make_kernel_executor(c.plan);
  const ir::TensorType type = c.graph->parameter(0)->type();
  auto buffer = runtime::default_pool().allocate(input.size() * sizeof(float), "input");
  std::memcpy(buffer->data(), input.data(), input.size() * sizeof(float));
  const runtime::TensorArg arg{type, buffer};
  runtime::RunOptions options;
  options.deterministic = deterministic;
  std::vector<runtime::TensorArg> out = executor->run({&arg, 1}, options);
  const float* data = static_cast<const float*>(out.at(0).buffer->data());
  return std::vector<float>(data, data + ir::num_elements(out[0].type.shape));
}

// Whether two results have the same bytes (+0 and -0, or two NaNs, are told apart).
inline bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace mf::passes::testing
