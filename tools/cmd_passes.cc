// `mf passes` prints the pass pipeline that applies (the table of passes/pipelines.cc under the
// context's or the given levels); `mf ir check FILE` parses and verifies an .ir file.

#include <cstdio>
#include <optional>
#include <string>

#include "context/policy.h"
#include "engine/engine_state.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/compiler.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

struct PassesOptions {
  std::string jit;  // O0|O1|O2; empty: the context's jit_level
  std::optional<int> fusion;
  std::vector<std::string> enable_passes;
  std::vector<std::string> disable_passes;
};

// The levels the context decides, overridden by the command's flags.
passes::CompileOptions options_from(const PassesOptions& flags) {
  const auto policy = engine::current_policy();
  passes::CompileOptions options;
  options.jit_level = static_cast<passes::JitLevel>(policy->jit_level.value);
  if (!flags.jit.empty()) {
    options.jit_level = static_cast<passes::JitLevel>(context::parse_jit_level(flags.jit));
  }
  options.fusion_level = flags.fusion.value_or(policy->fusion_level.value);
  options.enable_passes = policy->fusion_flags.enable_pass;
  options.disable_passes = policy->fusion_flags.disable_pass;
  options.enable_passes.insert(options.enable_passes.end(), flags.enable_passes.begin(),
                               flags.enable_passes.end());
  options.disable_passes.insert(options.disable_passes.end(), flags.disable_passes.begin(),
                                flags.disable_passes.end());
  options.memory_level = policy->memory_optimize_level.value == context::MemoryOptimizeLevel::kO1
                             ? passes::MemoryLevel::kO1
                             : passes::MemoryLevel::kO0;
  return options;
}

void print_pipeline(const PassesOptions& flags) {
  const passes::CompileOptions options = options_from(flags);
  const auto rows = passes::describe_pipeline(options);
  std::printf("pipeline: jit_level %s, fusion opt_level %d\n",
              std::string(passes::to_string(options.jit_level)).c_str(), options.fusion_level);
  std::printf("%-4s %-34s %-20s %s\n", "#", "pass", "from", "group");
  int i = 0;
  for (const auto& row : rows) {
    std::printf("%-4d %-34s %-20s %s\n", ++i, row.name.c_str(), row.origin.c_str(),
                row.group.empty() ? "-" : (row.group + " (to a fixed point)").c_str());
  }
}

void check_ir(const std::string& file) {
  auto graph = ir::parse_graph_file(file);
  ir::verify(*graph);
  size_t nodes = 0, subgraphs = 0;
  auto count = [&](auto&& self, const ir::Graph& g) -> void {
    nodes += g.num_nodes();
    for (const ir::Graph* sub : g.subgraphs()) {
      ++subgraphs;
      self(self, *sub);
    }
  };
  count(count, *graph);
  std::printf("ok: %zu nodes, %zu subgraphs\n", nodes, subgraphs);
}

}  // namespace

void add_passes_command(CLI::App& app, GlobalOptions& global) {
  auto flags = std::make_shared<PassesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "passes",
      "Print the compile pipeline that applies: each pass, where it comes from, its group");
  cmd->add_option("--jit", flags->jit, "jit_level O0, O1 or O2 (default: the context's)")
      ->check(CLI::IsMember({"O0", "O1", "O2"}));
  cmd->add_option("--fusion", flags->fusion,
                  "Graph-kernel fusion opt_level 0..3 (default: the context's)")
      ->check(CLI::Range(0, 3));
  cmd->add_option("--enable-pass", flags->enable_passes, "Add a pass (repeatable)");
  cmd->add_option("--disable-pass", flags->disable_passes, "Remove a pass (repeatable)");
  add_global_options(*cmd, global);
  cmd->callback([flags, &global] {
    apply_global_options(global);
    print_pipeline(*flags);
  });
}

void add_ir_command(CLI::App& app, GlobalOptions& global) {
  CLI::App* ir_cmd = app.add_subcommand("ir", "Work with .ir files");
  ir_cmd->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  CLI::App* check = ir_cmd->add_subcommand("check", "Parse and verify an .ir file");
  check->add_option("file", *file, "The .ir file")->required();
  add_global_options(*check, global);
  check->callback([file, &global] {
    apply_global_options(global);
    check_ir(*file);
  });
}

}  // namespace mf::tools
