#pragma once
// Ahead-of-time preparation of oneDNN primitives: the kernels of conv2d, matmul, batch_matmul and
// the pools register here the function that, given a node's input types and attributes, creates
// (or finds) the primitive their kernel will run, in the same primitive cache. A compile-time step
// can call prepare() for each such node so the first run creates nothing: the driver does, for
// every compiled graph (engine/driver.cc).

#include <span>
#include <string_view>

#include "ir/op_def.h"

namespace mf::runtime::dnnl_rt {

// Returns false when the op has no oneDNN path for these types (e.g. float64: Eigen runs it), or
// creates its primitives only at run time in this mode.
using PrepareFn = bool (*)(std::span<const ir::TensorType> inputs, const ir::Attrs& attrs,
                           int threads, bool deterministic);

// Creates (or finds) the primitive the op's kernel runs for `inputs` and `attrs` at `threads`
// intra-op threads under `deterministic` (which can choose another algorithm). False when the op
// registered nothing or has no oneDNN path for these types.
bool prepare(std::string_view op, std::span<const ir::TensorType> inputs, const ir::Attrs& attrs,
             int threads, bool deterministic = false);

// Registers `fn` for `op` from a static object in the op's file.
struct PreparerRegistration {
  PreparerRegistration(std::string_view op, PrepareFn fn);
};

}  // namespace mf::runtime::dnnl_rt
