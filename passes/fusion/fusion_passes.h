#pragma once
// Graph-kernel fusion passes (fusion opt_level 1..3), one per file in passes/fusion/. The table in
// passes/pass_table.cc decides which run; each takes the CompileOptions (its flags and the level)
// and fails in its factory, before any pass runs, on a flag naming an op that cannot apply.

#include <memory>

#include "passes/compile_options.h"
#include "passes/pass.h"

namespace mf::passes {

// "expand-composite-ops" (opt_level 1): composite ops replaced by their expanders' basic ops,
// where the expansion is bit-exact unless a flag asks for it by name.
std::unique_ptr<Pass> make_expand_composite_ops(const CompileOptions& options);
// "conv-epilogue-fusion" (opt_level 1): a relu or clip that is a float32 conv2d's only user runs
// inside the convolution (a oneDNN eltwise post-op).
std::unique_ptr<Pass> make_conv_epilogue_fusion(const CompileOptions& options);
// "elementwise-fusion" (opt_level 1; several outputs and recompute from 2): chains of
// elementwise/broadcast ops, with reductions as tails, become `fused` nodes.
std::unique_ptr<Pass> make_elementwise_fusion(const CompileOptions& options);
// "stitch-fusion" (opt_level 3 or --enable_stitch_fusion): reduce -> broadcast -> elementwise over
// the same rows in one kernel (softmax, layer_norm).
std::unique_ptr<Pass> make_stitch_fusion(const CompileOptions& options);
// "matmul-epilogue-fusion" (opt_level 2): a matmul whose only user adds a bias row becomes one
// matmul_bias node (the bias added to each row block while it is in cache).
std::unique_ptr<Pass> make_matmul_epilogue_fusion(const CompileOptions& options);
// "parallel-fusion" (opt_level 3 or --enable_parallel_fusion): independent small elementwise
// kernels of the same shape run as one.
std::unique_ptr<Pass> make_parallel_fusion(const CompileOptions& options);

}  // namespace mf::passes
