#pragma once
// Typed compile options: what the engine derives from the context Policy and hands to the pass
// pipeline. Nothing below the engine reads context keys; a pass sees only these fields.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/jit_level.h"

namespace mf::passes {

class Pass;
using PassFactory = std::function<std::unique_ptr<Pass>()>;

using mf::JitLevel;
using mf::to_string;
enum class MemoryLevel : uint8_t {
  kO0,
  kO1
};  // O0: a pooled buffer per tensor; O1: planned offsets with reuse

struct DumpOptions {
  int level = 0;              // save_graphs 0..3
  std::filesystem::path dir;  // created when missing; already includes rank_<id>/ when needed
  std::string prefix;         // prepended to file names, e.g. the network's name ("mlp")
  bool full_detail = false;   // debug_level=DEBUG: source locations in every dump, not only at 3
};

// Graph-kernel fusion settings, typed from the graph_kernel_flags the Policy parsed (the level
// itself is CompileOptions::fusion_level). Lists name ops; empty means "not given".
struct FusionOptions {
  bool dump_as_text = false;                         // --dump_as_text: graph_kernel_dump/ files
  std::vector<std::string> enable_expand_ops;        // also expand these where not bit-exact
  std::vector<std::string> enable_expand_ops_only;   // expand only these (whenever possible)
  std::vector<std::string> disable_expand_ops;       // never expand these
  std::vector<std::string> enable_cluster_ops;       // fusible ops to cluster (they already are)
  std::vector<std::string> enable_cluster_ops_only;  // cluster only these
  std::vector<std::string> disable_cluster_ops;      // never cluster these
  bool stitch = false;     // stitch-fusion (opt_level 3, or --enable_stitch_fusion)
  bool parallel = false;   // parallel-fusion (opt_level 3, or --enable_parallel_fusion)
  bool recompute = false;  // --enable_recompute_fusion
  std::optional<int> reduce_fuse_depth;  // producers above a reduce tail (unset: no limit)
  int composite_op_limit_size = 200;     // most ops in one fused kernel
};

struct CompileOptions {
  JitLevel jit_level = JitLevel::kO0;
  int fusion_level = 0;                     // graph-kernel opt_level 0..3
  FusionOptions fusion;                     // the graph_kernel_flags that shape fusion
  std::vector<std::string> enable_passes;   // --enable_pass= of graph_kernel_flags
  std::vector<std::string> disable_passes;  // --disable_pass=
  bool format_transform = true;             // false: disable_format_transform=true
  bool verify_every_pass =
      false;  // debug_level=DEBUG: verify after every pass, not only after changes
  // debug_level=DEBUG: a pass that fails (or leaves an invalid graph) writes the graph as it was
  // to dump.dir as <prefix>_failed_in_<pass>.ir, and the error names the file.
  bool write_failing_graph = false;
  MemoryLevel memory_level = MemoryLevel::kO0;
  bool memory_reuse = true;  // env_config_path's sys.mem_Reuse; false disables reuse at O1
  bool deterministic = false;
  DumpOptions dump;
  // `mf bisect`: run only the first N pass runs in pipeline order (front end, then back end; every
  // round of a fixed-point group counts), then skip every later pass except those execution needs
  // (select-kernels). Memory planning always runs, so the cut graph still executes. Empty: all.
  std::optional<size_t> stop_after_pass;
  // Test-only hook (bisect tests inject a deliberately broken rewrite): passes appended to the
  // front end after the table's passes. Never derived from the context; not part of any cache key.
  std::vector<PassFactory> extra_passes;
};

std::string_view to_string(MemoryLevel level);

}  // namespace mf::passes
