// `mf dump NET|FILE.ir --level N --out DIR`: compile in GRAPH mode with save_graphs=N into DIR,
// without running (precompile_only), and list the files written.

#include <cstdio>
#include <filesystem>

#include "engine/ir_runner.h"
#include "engine/models/registry.h"
#include "engine/onnx/importer.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

struct DumpOptions {
  std::string target;
  int level = 2;
  std::string out = "./ir";
  uint64_t seed = 0;
};

void dump(const DumpOptions& options) {
  context::set({{"mode", "GRAPH_MODE"},
                {"save_graphs", options.level},
                {"save_graphs_path", options.out},
                {"precompile_only", true}});
  std::vector<std::filesystem::path> files;
  if (std::filesystem::path(options.target).extension() == ".ir") {
    auto runner = engine::IrRunner::from_file(options.target);
    runner.run({}, options.seed);
    files = runner.graph_report().dump_files;
  } else if (std::filesystem::path(options.target).extension() == ".onnx") {
    engine::IrRunner runner(engine::import_onnx(options.target));
    runner.run({}, options.seed);
    files = runner.graph_report().dump_files;
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
  cmd->add_option("--level", options->level,
                  "save_graphs level: 1 key stages, 2 every pass, 3 + Graphviz")
      ->check(CLI::Range(1, 3));
  cmd->add_option("--out", options->out,
                  "Directory for the files (created when missing; default ./ir)");
  cmd->add_option("--seed", options->seed, "Seed of the weights (default 0)");
  add_global_options(*cmd, global);
  cmd->callback([options, &global] {
    apply_global_options(global);
    dump(*options);
  });
}

}  // namespace mf::tools
