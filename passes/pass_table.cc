// THE table: which pass runs from which jit_level (and fusion opt_level), in which group, in
// which phase. Everything else here only reads it.

#include "passes/pass_table.h"

#include <algorithm>

#include "base/error.h"
#include "passes/dump.h"
#include "passes/fusion/fusion_passes.h"
#include "passes/passes.h"

namespace mf::passes {

namespace {

enum class Group { kNone, kSimplify, kFusionSimplify };
enum class Phase { kFrontend, kBackend };

using MakePass = std::unique_ptr<Pass> (*)(const CompileOptions&);

// Adapters for passes that take no options.
template <std::unique_ptr<Pass> (*Make)()>
std::unique_ptr<Pass> plain(const CompileOptions&) {
  return Make();
}

std::unique_ptr<Pass> make_default_constant_folding() {
  return make_constant_folding();
}

// Where a row needs more than its fusion level: stitch and parallel fusion also run below opt_level
// 3 when their flags ask (and fusion is on at all).
enum class Extra { kNone, kStitch, kParallel };

// A typed option that can turn a row off at every level.
enum class Switch { kNone, kFormatTransform };

struct PassEntry {
  std::string_view name;
  MakePass make;  // null: a stage that is not a Pass (an executor choice, or compile()'s planner)
  JitLevel from;
  int from_fusion;             // fusion opt_level the pass also needs (0: none)
  Group group;                 // consecutive rows of one group repeat together to a fixed point
  Phase phase;                 // the "frontend" dump is written between the phases
  Extra extra = Extra::kNone;  // a flag that turns the row on below its fusion level
  Switch off_switch = Switch::kNone;
};

// clang-format off
constexpr PassEntry kGraphPipeline[] = {
  // pass                              factory                                      jit_level      fusion  group                   phase
  {"infer-shapes",                     plain<make_infer_shapes>,                    JitLevel::kO0, 0, Group::kNone,           Phase::kFrontend},
  {"inline",                           plain<make_inline_calls>,                    JitLevel::kO0, 0, Group::kNone,           Phase::kFrontend},
  // Layouts are part of choosing kernels, as op by op (engine/eager/eager_layout.h): at every level.
  {"format-transform",                 plain<make_format_transform>,                JitLevel::kO0, 0, Group::kNone,           Phase::kFrontend, Extra::kNone, Switch::kFormatTransform},
  {"dead-code-elimination",            plain<make_dead_code_elimination>,           JitLevel::kO0, 0, Group::kNone,           Phase::kFrontend},
  {"constant-folding",                 plain<make_default_constant_folding>,        JitLevel::kO1, 0, Group::kSimplify,       Phase::kFrontend},
  {"algebraic-simplification",         plain<make_algebraic_simplification>,        JitLevel::kO1, 0, Group::kSimplify,       Phase::kFrontend},
  {"common-subexpression-elimination", plain<make_cse>,                             JitLevel::kO1, 0, Group::kSimplify,       Phase::kFrontend},
  {"dead-code-elimination",            plain<make_dead_code_elimination>,           JitLevel::kO1, 0, Group::kSimplify,       Phase::kFrontend},
  // Graph-kernel fusion: expand composites, simplify what expansion exposed (2), take a
  // convolution's activation into it (1), stitch rows (3), fold bias adds into their matmuls (2),
  // fuse elementwise chains (1), merge independent small kernels (3), then
  // simplify inside and around the fused kernels' bodies (2).
  {"expand-composite-ops",             make_expand_composite_ops,                   JitLevel::kO0, 1, Group::kNone,           Phase::kFrontend},
  {"algebraic-simplification",         plain<make_algebraic_simplification>,        JitLevel::kO0, 2, Group::kFusionSimplify, Phase::kFrontend},
  {"common-subexpression-elimination", plain<make_cse>,                             JitLevel::kO0, 2, Group::kFusionSimplify, Phase::kFrontend},
  {"dead-code-elimination",            plain<make_dead_code_elimination>,           JitLevel::kO0, 2, Group::kFusionSimplify, Phase::kFrontend},
  {"conv-epilogue-fusion",             make_conv_epilogue_fusion,                   JitLevel::kO0, 1, Group::kNone,           Phase::kFrontend},
  {"stitch-fusion",                    make_stitch_fusion,                          JitLevel::kO0, 3, Group::kNone,           Phase::kFrontend, Extra::kStitch},
  {"matmul-epilogue-fusion",           make_matmul_epilogue_fusion,                 JitLevel::kO0, 2, Group::kNone,           Phase::kFrontend},
  {"elementwise-fusion",               make_elementwise_fusion,                     JitLevel::kO0, 1, Group::kNone,           Phase::kFrontend},
  {"parallel-fusion",                  make_parallel_fusion,                        JitLevel::kO0, 3, Group::kNone,           Phase::kFrontend, Extra::kParallel},
  {"common-subexpression-elimination", plain<make_cse>,                             JitLevel::kO0, 2, Group::kFusionSimplify, Phase::kFrontend},
  {"algebraic-simplification",         plain<make_algebraic_simplification>,        JitLevel::kO0, 2, Group::kFusionSimplify, Phase::kFrontend},
  {"dead-code-elimination",            plain<make_dead_code_elimination>,           JitLevel::kO0, 2, Group::kFusionSimplify, Phase::kFrontend},
  {"select-kernels",                   plain<make_select_kernels>,                  JitLevel::kO0, 0, Group::kNone,           Phase::kBackend},
  {"plan-memory",                      nullptr,                                     JitLevel::kO0, 0, Group::kNone,           Phase::kBackend},  // compile() calls plan_memory
};
// clang-format on

std::string_view group_name(Group group) {
  switch (group) {
    case Group::kSimplify:
      return "simplify";
    case Group::kFusionSimplify:
      return "fusion-simplify";
    case Group::kNone:
      break;
  }
  return "";
}

bool contains(const std::vector<std::string>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const PassEntry* find_entry(std::string_view name) {
  for (const PassEntry& entry : kGraphPipeline) {
    if (entry.name == name && entry.make != nullptr) return &entry;
  }
  return nullptr;
}

std::string joined_known_names() {
  std::string out;
  for (const std::string& name : known_pass_names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

void check_names(const std::vector<std::string>& names, std::string_view flag) {
  for (const std::string& name : names) {
    MF_CHECK(find_entry(name) != nullptr, InvalidArgument, flag, "=", name,
             " names no pass; known passes: ", joined_known_names());
  }
}

// Why a row runs under the options, or "" when it does not.
std::string origin_of(const PassEntry& entry, const CompileOptions& options) {
  if (entry.make != nullptr && contains(options.disable_passes, std::string(entry.name))) return "";
  if (entry.off_switch == Switch::kFormatTransform && !options.format_transform) return "";
  if (options.jit_level >= entry.from && options.fusion_level >= entry.from_fusion) {
    return entry.from_fusion > 0 ? detail::str_cat("fusion opt_level ", entry.from_fusion)
                                 : detail::str_cat("jit_level ", to_string(entry.from));
  }
  if (options.jit_level >= entry.from && options.fusion_level >= 1) {
    if (entry.extra == Extra::kStitch && options.fusion.stitch) return "--enable_stitch_fusion";
    if (entry.extra == Extra::kParallel && options.fusion.parallel) {
      return "--enable_parallel_fusion";
    }
  }
  if (entry.make != nullptr && contains(options.enable_passes, std::string(entry.name))) {
    return "--enable_pass";
  }
  return "";
}

// The Pipeline of one phase: rows that run, consecutive rows of a group gathered into one group.
Pipeline build_phase(const CompileOptions& options, Phase phase) {
  check_names(options.enable_passes, "--enable_pass");
  check_names(options.disable_passes, "--disable_pass");
  Pipeline pipeline;
  pipeline.set_verify_every_pass(options.verify_every_pass);
  if (options.write_failing_graph) {
    pipeline.set_failure_writer(
        [dump = options.dump](const ir::Graph& graph, std::string_view pass) {
          return write_failing_graph(
              graph, dump.dir,
              (dump.prefix.empty() ? "" : dump.prefix + "_") + "failed_in_" + std::string(pass));
        });
  }
  Group open_group = Group::kNone;
  std::vector<std::unique_ptr<Pass>> grouped;
  auto close_group = [&] {
    if (open_group != Group::kNone) {
      pipeline.add_group(std::string(group_name(open_group)), std::move(grouped));
    }
    grouped.clear();
    open_group = Group::kNone;
  };
  for (const PassEntry& entry : kGraphPipeline) {
    if (entry.phase != phase || entry.make == nullptr || origin_of(entry, options).empty()) {
      continue;
    }
    if (entry.group != open_group) close_group();
    if (entry.group == Group::kNone) {
      pipeline.add(entry.make(options));
    } else {
      open_group = entry.group;
      grouped.push_back(entry.make(options));
    }
  }
  close_group();
  return pipeline;
}

}  // namespace

Pipeline build_frontend_pipeline(const CompileOptions& options) {
  return build_phase(options, Phase::kFrontend);
}

Pipeline build_backend_pipeline(const CompileOptions& options) {
  return build_phase(options, Phase::kBackend);
}

std::vector<std::string> known_pass_names() {
  std::vector<std::string> names;
  for (const PassEntry& entry : kGraphPipeline) {
    if (entry.make != nullptr && !contains(names, std::string(entry.name))) {
      names.emplace_back(entry.name);
    }
  }
  return names;
}

std::unique_ptr<Pass> make_pass(std::string_view name) {
  const PassEntry* entry = find_entry(name);
  MF_CHECK(entry != nullptr, NotFound, "no pass named '", name,
           "'; known passes: ", joined_known_names());
  static const CompileOptions kDefaults;
  return entry->make(kDefaults);
}

std::vector<PipelineRow> describe_pipeline(const CompileOptions& options) {
  check_names(options.enable_passes, "--enable_pass");
  check_names(options.disable_passes, "--disable_pass");
  std::vector<PipelineRow> rows;
  for (const PassEntry& entry : kGraphPipeline) {
    std::string origin = origin_of(entry, options);
    if (!origin.empty()) {
      rows.push_back(
          {std::string(entry.name), std::move(origin), std::string(group_name(entry.group))});
    }
  }
  return rows;
}

}  // namespace mf::passes
