#pragma once
// The graph_kernel_flags string ("--opt_level=2 --dump_as_text ...") parsed into typed fields. As
// in MindSpore, an unknown flag is ignored with a warning naming the nearest known one; a malformed
// value of a known flag is an error naming it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mf::context {

// What graph_kernel_flags asked for. Unset optionals mean "the flag was not given".
struct GraphKernelFlags {
  std::optional<int> opt_level;                      // --opt_level=0..3
  bool dump_as_text = false;                         // --dump_as_text
  std::vector<std::string> enable_expand_ops;        // --enable_expand_ops=a,b
  std::vector<std::string> enable_expand_ops_only;   // --enable_expand_ops_only=a,b
  std::vector<std::string> disable_expand_ops;       // --disable_expand_ops=a,b
  std::vector<std::string> enable_cluster_ops;       // --enable_cluster_ops=a,b
  std::vector<std::string> enable_cluster_ops_only;  // --enable_cluster_ops_only=a,b
  std::vector<std::string> disable_cluster_ops;      // --disable_cluster_ops=a,b
  std::vector<std::string> enable_pass;              // --enable_pass=a,b
  std::vector<std::string> disable_pass;             // --disable_pass=a,b
  bool enable_stitch_fusion = false;                 // --enable_stitch_fusion
  bool enable_recompute_fusion = false;              // --enable_recompute_fusion
  bool enable_parallel_fusion = false;               // --enable_parallel_fusion
  std::optional<int> reduce_fuse_depth;              // --reduce_fuse_depth=N (N >= 1)
  std::optional<int> composite_op_limit_size;        // --composite_op_limit_size=N (N >= 1)
  std::vector<std::string> unknown;  // flags the parser does not know ("--opt_levle=2"), ignored

  bool operator==(const GraphKernelFlags&) const = default;
};

// Parses flags separated by whitespace. Boolean flags accept "--flag" and "--flag=true|false" (or
// 1/0, on/off); lists are comma-separated names. Unknown flags go to `unknown`. Where MindSpore
// warns and goes on, so does this: a token without "--" is ignored, a flag given twice takes its
// last value, an opt_level above 3 is 3; each such adjustment is described in `adjustments` when
// given. Throws InvalidArgument naming the offending flag for a bad value.
GraphKernelFlags parse_graph_kernel_flags(std::string_view text);
GraphKernelFlags parse_graph_kernel_flags(std::string_view text,
                                          std::vector<std::string>* adjustments);

// "graph_kernel_flags: unknown flag '--opt_levle' is ignored; did you mean '--opt_level'?", one per
// unknown flag.
std::vector<std::string> unknown_flag_warnings(const GraphKernelFlags& flags);

// The canonical text of the flags (fixed order, only what was given): equal flags give equal text.
std::string to_string(const GraphKernelFlags& flags);

}  // namespace mf::context
