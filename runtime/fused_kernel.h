#pragma once
// The fused-kernel evaluator: runs the body subgraph of a `fused` node (graph-kernel fusion) as one
// kernel. The body is analysed once; a run walks fixed chunks of rows in parallel and, inside a
// chunk, tiles of a few thousand elements, calling each member op's TileFn (the same math the plain
// kernels call) on small per-thread buffers, so intermediates stay in cache and only the outputs
// reach memory. Reductions over trailing axes run per row through the reduce op's own row math
// (ReduceMath); reduced values broadcast back over their rows (stitching), stage by stage.
//
// Bit-exactness: a TileFn computes every element through the same packet code whatever the tile
// boundaries or buffer addresses, and ReduceMath sums a row in an order fixed by its length
// (runtime/kernels/row_math.h), so fused and unfused results are identical, for any thread count.
// Tiles and buffers are still aligned (16 elements, 64 bytes), for speed only.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/plan.h"

namespace mf::runtime {

// One fused body, analysed for evaluation.
// Promise: run() writes exactly the body's outputs into ctx.outputs, bit for bit what running the
// body's ops one by one would give, whatever the thread count.
class FusedKernel {
 public:
  // InvalidArgument naming the reason when the evaluator cannot run `body` (see unsupported()).
  explicit FusedKernel(const ir::Graph& body);
  ~FusedKernel();
  FusedKernel(const FusedKernel&) = delete;
  FusedKernel& operator=(const FusedKernel&) = delete;

  // ctx.inputs are the body's parameters in order, ctx.outputs its outputs.
  void run(const ir::KernelContext& ctx) const;

  // "elementwise over (64, 784), 5 ops" / "stitched rows 4096 x 1024, 2 reduces, 3 stages".
  std::string describe() const;

  // Why the evaluator cannot run `body`, or "" when it can. Fusion passes ask before they build.
  static std::string unsupported(const ir::Graph& body);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The kernel of fused node `node` (op with Trait::kFused) of graph `owner`: its body is the
// subgraph its "graph" attribute names, resolved from `owner`.
std::shared_ptr<const FusedKernel> make_fused_kernel(const ir::Graph& owner, const ir::Node& node);

// The fused kernels of a plan's steps, built once when an executor is constructed, so a run only
// looks them up. Thread-safe; a node it does not hold is built on first use.
class FusedKernels {
 public:
  FusedKernels() = default;
  explicit FusedKernels(const Plan& plan);  // builds one per fused step of `plan`
  const FusedKernel& get(const ir::Graph& owner, const ir::Node& node) const;

 private:
  mutable std::mutex mutex_;
  mutable std::map<const ir::Node*, std::shared_ptr<const FusedKernel>> kernels_;
};

// True when `node` is run by the fused-kernel evaluator.
inline bool is_fused(const ir::Node& node) {
  return node.def() != nullptr && node.def()->has(ir::Trait::kFused);
}

}  // namespace mf::runtime
