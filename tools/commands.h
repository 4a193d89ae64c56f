#pragma once
// The subcommands of `mf`. Each family lives in its own cmd_*.cc and registers itself on the app;
// kCommands below is the one list of them.

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace mf::tools {

// Options every subcommand accepts. They are applied to the context before the subcommand runs.
struct GlobalOptions {
  std::vector<std::string> sets;  // --set key=value, in order
  std::string context_file;       // --context FILE.json
  std::string mode;               // --mode graph|pynative
  std::string log_level;          // --log-level, else MF_LOG_LEVEL
  bool deterministic = false;     // --deterministic: mindspore.set_deterministic(True)
  bool launch_blocking = false;   // --launch-blocking: mindspore.runtime.launch_blocking()
};

// Adds the global options to a (sub)command, so they may appear after the subcommand's name too.
void add_global_options(CLI::App& app, GlobalOptions& options);

// Applies parsed global options: log level, then the context file, then --mode, then each --set.
void apply_global_options(const GlobalOptions& options);

using AddCommand = void (*)(CLI::App& app, GlobalOptions& options);

void add_context_command(CLI::App& app, GlobalOptions& options);
void add_run_command(CLI::App& app, GlobalOptions& options);    // run, nets
void add_print_command(CLI::App& app, GlobalOptions& options);  // print-parse
void add_passes_command(CLI::App& app, GlobalOptions& options);
void add_ir_command(CLI::App& app, GlobalOptions& options);  // ir check
void add_dump_command(CLI::App& app, GlobalOptions& options);
void add_bench_command(CLI::App& app, GlobalOptions& options);   // bench (the fusion sweep)
void add_bisect_command(CLI::App& app, GlobalOptions& options);  // bisect NET
void add_cache_command(CLI::App& app, GlobalOptions& options);   // cache ls|clear|verify|explain
void add_grad_command(CLI::App& app, GlobalOptions& options);    // grad NET
void add_train_command(CLI::App& app, GlobalOptions& options);   // train NET --data fashion-mnist
void add_launch_command(CLI::App& app, GlobalOptions& options);  // launch --worker_num=N -- CMD

inline constexpr AddCommand kCommands[] = {
    add_context_command, add_run_command,  add_print_command, add_passes_command,
    add_ir_command,      add_dump_command, add_cache_command, add_bench_command,
    add_bisect_command,  add_grad_command, add_train_command, add_launch_command,
};

}  // namespace mf::tools
