// The `mf` command: global options, the subcommands of tools/commands.h, and the exit-status
// contract: 0 success, 1 a user error (one "error: ..." line on stderr), 2 a usage error. Never a
// crash.

#include <cstdlib>
#include <iostream>
#include <new>
#include <string_view>

#include "base/error.h"
#include "base/logging.h"
#include "context/context.h"
#include "context/replacement_api.h"
#include "runtime/dnnl/engine.h"
#include "runtime/memory_pool.h"
#include "tools/commands.h"

namespace mf::tools {

void add_global_options(CLI::App& app, GlobalOptions& options) {
  app.add_option("--set", options.sets,
                 "Set a context key: key=value (dotted sub-keys: jit_config.jit_level=O1)")
      ->type_name("KEY=VALUE")
      ->take_all()
      ->allow_extra_args(false);
  app.add_option("--context", options.context_file, "Load context values from a JSON file")
      ->type_name("FILE");
  app.add_option("--mode", options.mode, "Execution mode: graph or pynative")
      ->check(
          CLI::IsMember({"graph", "pynative", "GRAPH_MODE", "PYNATIVE_MODE"}, CLI::ignore_case));
  app.add_flag("--deterministic", options.deterministic,
               "Same bits for any thread count (mindspore.set_deterministic(True))");
  app.add_flag("--launch-blocking", options.launch_blocking,
               "PYNATIVE: run each op before its call returns "
               "(mindspore.runtime.launch_blocking())");
  app.add_option(
      "--log-level", options.log_level,
      "trace, debug, info, warn, error, critical or off (default: MF_LOG_LEVEL, else warn)");
}

// Measurement knobs of the runtime, read once here: the library never reads the environment.
void apply_runtime_environment() {
  if (const char* v = std::getenv("MF_POOL_HUGE_PAGES");
      v != nullptr && std::string_view(v) == "0") {
    runtime::set_huge_pages(false);
  }
  if (const char* v = std::getenv("MF_DNNL_CONV_LAYOUT"); v != nullptr) {
    const std::string_view layout(v);
    runtime::dnnl_rt::set_conv_layout(layout == "plain"     ? runtime::dnnl_rt::ConvLayout::kPlain
                                      : layout == "blocked" ? runtime::dnnl_rt::ConvLayout::kBlocked
                                                            : runtime::dnnl_rt::ConvLayout::kAuto);
  }
}

void apply_global_options(const GlobalOptions& options) {
  apply_runtime_environment();
  // MindSpore's variables (MS_DEV_SAVE_GRAPHS, MS_COMPILER_CACHE_ENABLE, ...), with its precedence
  // against the --set / --context values applied below.
  configure_from_environment();
  if (options.deterministic) set_deterministic(true);
  if (options.launch_blocking) context::runtime::launch_blocking();
  if (!options.log_level.empty()) {
    log::set_level(log::parse_level(options.log_level));
  } else if (const char* env = std::getenv("MF_LOG_LEVEL"); env != nullptr && *env != '\0') {
    log::set_level(log::parse_level(env));
  }
  // Everything below is applied as one all-or-nothing change, so a bad --set leaves the file's
  // values out too.
  context::Json change = context::Json::object();
  if (!options.context_file.empty()) change.update(context::read_json_file(options.context_file));
  if (!options.mode.empty()) {
    const bool graph =
        options.mode == "graph" || options.mode == "GRAPH_MODE" || options.mode == "GRAPH";
    change["mode"] = graph ? "GRAPH_MODE" : "PYNATIVE_MODE";
  }
  // Held in a local: items() of a temporary would dangle inside the loop.
  const context::Json assignments = context::parse_assignments(options.sets);
  for (const auto& [key, value] : assignments.items()) {
    if (change.contains(key) && change[key].is_object() && value.is_object()) {
      change[key].update(value);
    } else {
      change[key] = value;
    }
  }
  if (!change.empty()) context::set(change);
}

}  // namespace mf::tools

int main(int argc, char** argv) {
  using namespace mf::tools;
  CLI::App app{"mf: run, compile, dump and benchmark networks under a MindSpore-style context"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  GlobalOptions options;
  add_global_options(app, options);
  for (AddCommand add : kCommands) add(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const mf::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory (the input asks for more than this machine can allocate; "
                 "check its shapes and sizes)\n";
    return 1;
  } catch (const std::exception& e) {
    // Not an mf::Error: a check is missing somewhere, so say so instead of printing a bare C++
    // text such as "vector::_M_default_append".
    std::cerr << "error: internal error (" << mf::echo(e.what())
              << "); this is a bug, please report it with the input that caused it\n";
    return 1;
  }
  return 0;
}
