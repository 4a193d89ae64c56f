#pragma once
// Ahead-of-time preparation of oneDNN kernels: conv2d, matmul, batch_matmul and the pools register
// here the function that, given a node's input types and attributes, creates (or finds) the
// primitive their kernel will run, in the same primitive cache, so the first run creates nothing.
// Where some inputs are constants of the compiled graph (their bytes fixed for its lifetime, e.g.
// an ONNX model's weights), a preparer may also build per-node state from them once, such as the
// weights reordered into the layout the primitive wants, which the kernel then reads through
// KernelContext::prepared instead of reordering them on every call. The executors call prepare()
// for each of their steps (runtime/prepared_kernels.h) when the driver compiles a graph.

#include <memory>
#include <span>
#include <string_view>

#include "ir/op_def.h"

namespace mf::runtime::dnnl_rt {

struct PrepareRequest {
  std::span<const ir::TensorType> inputs;
  // Per input: its bytes when it is a constant of the compiled graph, else nullptr. Empty when the
  // caller knows no constants (every input is bound at run time).
  std::span<const void* const> constants;
  const ir::Attrs& attrs;
  int threads = 1;  // intra-op threads the kernel will run with
  bool deterministic = false;

  const void* constant(size_t input) const {
    return input < constants.size() ? constants[input] : nullptr;
  }
};

struct Prepared {
  bool created = false;  // the op has a oneDNN path for these types and its primitive exists now
  std::shared_ptr<const void> state;  // for KernelContext::prepared; may be null
};

using PrepareFn = Prepared (*)(const PrepareRequest& request);

// Prepares the op's kernel for `request`: {false, null} when the op registered nothing or has no
// oneDNN path for these types (e.g. float64: Eigen runs it).
Prepared prepare(std::string_view op, const PrepareRequest& request);

// Registers `fn` for `op` from a static object in the op's file.
struct PreparerRegistration {
  PreparerRegistration(std::string_view op, PrepareFn fn);
};

}  // namespace mf::runtime::dnnl_rt
