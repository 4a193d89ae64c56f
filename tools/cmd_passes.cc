// `mf passes` prints the pass pipeline that applies (the table of passes/pass_table.cc under the
// context's or the given levels); `mf ir check FILE` parses and verifies an .ir file.

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "context/context.h"
#include "context/policy.h"
#include "engine/graph/driver.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "passes/compiler.h"
#include "passes/pass_table.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

struct PassesOptions {
  std::string jit;  // O0|O1|O2; empty: the context's jit_level
  std::optional<int> fusion;
  std::vector<std::string> enable_passes;
  std::vector<std::string> disable_passes;
};

// graph_kernel_flags with --name=value in place of any --name=... it had; `merge` keeps the old
// list's items first (for the pass lists).
std::string with_flag(const std::string& flags, const std::string& name, std::string value,
                      bool merge) {
  const std::string prefix = "--" + name + "=";
  std::string out, old;
  size_t pos = 0;
  while (pos < flags.size()) {
    const size_t start = flags.find_first_not_of(" \t", pos);
    if (start == std::string::npos) break;
    const size_t end = std::min(flags.find_first_of(" \t", start), flags.size());
    const std::string token = flags.substr(start, end - start);
    if (token.starts_with(prefix)) {
      old = token.substr(prefix.size());
    } else {
      out += (out.empty() ? "" : " ") + token;
    }
    pos = end;
  }
  if (merge && !old.empty()) value = old + "," + value;
  return out + (out.empty() ? "" : " ") + prefix + value;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

// The command's flags are context settings (--jit is jit_config.jit_level, --fusion is
// graph_kernel_flags' --opt_level, --enable-pass/--disable-pass its pass lists), so the pipeline
// printed is the one the driver builds from the same Policy: `mf passes` cannot drift from what
// compiles.
void apply_flags(const PassesOptions& flags) {
  context::Json settings = context::Json::object();
  if (!flags.jit.empty()) {
    context::Json jit_config = context::get("jit_config");
    jit_config["jit_level"] = flags.jit;
    settings["jit_config"] = jit_config;
  }
  std::string kernel_flags = context::get("graph_kernel_flags").get<std::string>();
  if (flags.fusion) {
    kernel_flags = with_flag(kernel_flags, "opt_level", std::to_string(*flags.fusion), false);
  }
  if (!flags.enable_passes.empty()) {
    kernel_flags = with_flag(kernel_flags, "enable_pass", joined(flags.enable_passes), true);
  }
  if (!flags.disable_passes.empty()) {
    kernel_flags = with_flag(kernel_flags, "disable_pass", joined(flags.disable_passes), true);
  }
  settings["graph_kernel_flags"] = kernel_flags;
  context::set(settings);
}

void print_pipeline(const PassesOptions& flags) {
  apply_flags(flags);
  // The policy of a compiled graph: GRAPH mode's, or a jit-compiled part's in PYNATIVE mode.
  const context::Policy policy =
      context::derive_policy(context::snapshot(), context::DeriveOptions{.jit_region = true});
  const passes::CompileOptions options = engine::driver_options(policy, "passes").compile;
  const auto rows = passes::describe_pipeline(options);
  const bool pynative = policy.mode.value == context::ExecutionMode::kPynative;
  const bool downgraded =
      pynative && policy.jit_level.reason.find("use O0 instead") != std::string::npos;
  std::printf("pipeline: jit_level %s, fusion opt_level %d, executor %s%s\n",
              std::string(passes::to_string(options.jit_level)).c_str(), options.fusion_level,
              std::string(context::to_string(policy.executor.value)).c_str(),
              downgraded ? " (PYNATIVE_MODE: jit-compiled cells and functions asked for O2 run at "
                           "O0, as in MindSpore; --set mode=GRAPH_MODE shows O2)"
              : pynative ? " (PYNATIVE_MODE: for jit-compiled cells and functions)"
                         : "");
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
