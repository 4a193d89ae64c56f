// `mf dump NET|FILE.ir --level N --out DIR`: compile in GRAPH mode with save_graphs=N into DIR,
// without running (precompile_only), and list the files written. Without --level / --out, a
// save_graphs / save_graphs_path the user set (--set, --context, MS_DEV_SAVE_GRAPHS) is used
// before the command's defaults: `mf dump NET --set save_graphs_path=/tmp/d` writes to /tmp/d.

#include <cstdio>
#include <filesystem>

#include "context/context.h"
#include "engine/eager/ir_runner.h"
#include "engine/io/model_file.h"
#include "engine/models/registry.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

struct DumpOptions {
  std::string target;
  int level = 2;
  std::string out = "./ir";
  uint64_t seed = 0;
  bool level_given = false;
  bool out_given = false;
};

// The options with what the context says filled in where the command line was silent.
DumpOptions with_context_defaults(DumpOptions options) {
  const context::Snapshot snapshot = context::snapshot();
  if (!options.out_given && !snapshot.origin("save_graphs_path").empty()) {
    options.out = snapshot.get("save_graphs_path").get<std::string>();
  }
  if (!options.level_given && !snapshot.origin("save_graphs").empty()) {
    const int level = snapshot.get("save_graphs").get<int>();
    if (level >= 1) options.level = level;  // 0 (dumps off) would make the command pointless
  }
  return options;
}

void dump(const DumpOptions& options) {
  context::set({{"mode", "GRAPH_MODE"},
                {"save_graphs", options.level},
                {"save_graphs_path", options.out},
                {"precompile_only", true}});
  std::vector<std::filesystem::path> files;
  if (engine::model_format(options.target)) {
    engine::ModelFile file = engine::ModelFile::load(options.target);
    file.run({}, options.seed);
    files = file.runner().graph_report().dump_files;
  } else {
    const models::NetSpec& spec = models::find_net(options.target);
    auto net = spec.make(options.seed);
    (*net)(spec.make_input(options.seed));
    files = net->graph_report().dump_files;
  }
  for (const auto& file : files) std::printf("%s\n", file.string().c_str());
  std::printf("dump: %zu files for %s at save_graphs=%d\n", files.size(), options.target.c_str(),
              options.level);
}

}  // namespace

void add_dump_command(CLI::App& app, GlobalOptions& global) {
  auto options = std::make_shared<DumpOptions>();
  CLI::App* cmd =
      app.add_subcommand("dump", "Compile a network with IR dumps on, without running it");
  cmd->add_option("target", options->target, "A network from `mf nets`, a FILE.ir or a FILE.onnx")
      ->required();
  CLI::Option* level = cmd->add_option(
      "--level", options->level,
      "save_graphs level: 1 key stages, 2 every pass, 3 + Graphviz (default: save_graphs if set, "
      "else 2)");
  level->check(CLI::Range(1, 3));
  CLI::Option* out = cmd->add_option(
      "--out", options->out,
      "Directory for the files, created when missing (default: save_graphs_path if set, else "
      "./ir)");
  cmd->add_option("--seed", options->seed, "Seed of the weights (default 0)");
  add_global_options(*cmd, global);
  cmd->callback([options, level, out, &global] {
    apply_global_options(global);
    options->level_given = level->count() > 0;
    options->out_given = out->count() > 0;
    dump(with_context_defaults(*options));
  });
}

}  // namespace mf::tools
