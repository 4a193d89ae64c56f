#pragma once
// Factories of every pass, one per file under passes/. The table in passes/pass_table.cc decides
// which of them run; tests build them directly to check one pass on IR text.

#include <cstdint>
#include <memory>

#include "passes/pass.h"

namespace mf::passes {

std::unique_ptr<Pass> make_infer_shapes();           // "infer-shapes"
std::unique_ptr<Pass> make_inline_calls();           // "inline"
std::unique_ptr<Pass> make_dead_code_elimination();  // "dead-code-elimination"
std::unique_ptr<Pass> make_select_kernels();         // "select-kernels"

// Constants with more elements than this are not materialised by folding: a broadcast of a
// scalar to a huge shape stays a node, so the graph (and every dump) stays small.
inline constexpr int64_t kMaxFoldedElements = int64_t{1} << 20;
std::unique_ptr<Pass> make_constant_folding(int64_t max_elements = kMaxFoldedElements);
std::unique_ptr<Pass> make_algebraic_simplification();  // "algebraic-simplification"
std::unique_ptr<Pass> make_cse();                       // "common-subexpression-elimination"
std::unique_ptr<Pass> make_format_transform();          // "format-transform"

}  // namespace mf::passes
