// `mf run NET|FILE.ir` and `mf nets`: run a sample network (or an IR file) and report its outputs
// and time.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>

#include "engine/eager/dispatch.h"
#include "engine/eager/ir_runner.h"
#include "engine/engine_state.h"
#include "engine/io/model_file.h"
#include "engine/models/registry.h"
#include "runtime/memory_format.h"
#include "runtime/memory_pool.h"
#include "runtime/profile_report.h"
#include "runtime/profiler.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

struct RunOptions {
  std::string target;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  uint64_t seed = 0;
  int iters = 1;
  std::string output_dir;
  std::vector<std::string> jit_cells;  // --jit: child cells compiled inside PYNATIVE mode
  std::string profile_dir;             // --profile: trace.json, summary.md, roofline.svg here
  size_t profile_events = 1'000'000;   // --profile-events: at most this many kept
};

// Marks the named child cells of a sample network for jit; an unknown name lists the cells.
std::vector<std::pair<std::string, nn::Cell*>> mark_jit_cells(nn::Cell& net,
                                                              const std::vector<std::string>& names,
                                                              const std::string& net_name) {
  std::vector<std::pair<std::string, nn::Cell*>> marked;
  for (const std::string& name : names) {
    nn::Cell* cell = net.find_child(name);
    if (cell == nullptr) {
      std::string known;
      for (const auto& [path, child] : net.named_descendants()) {
        known += (known.empty() ? "" : ", ") + path + " (" + child->class_name() + ")";
      }
      MF_FAIL(InvalidArgument, "--jit: network '", net_name, "' has no cell '", name,
              "'; its cells are: ", known.empty() ? "(none)" : known);
    }
    cell->set_jit(true);
    marked.emplace_back(name, cell);
  }
  return marked;
}

void print_graph_report(const std::string& label, const engine::GraphRunReport& report) {
  std::printf(
      "%s: compiled in %.3g ms (trace %.3g ms), jit_level %s, fusion %d, %s, memory %s, planned "
      "peak %s, %zu kernels prepared\n",
      label.c_str(), report.compile_ms, report.trace_ms, report.jit_level.c_str(),
      report.fusion_level, report.executor.c_str(), report.memory_regime.c_str(),
      runtime::format_bytes(report.planned_peak_bytes).c_str(), report.prepared_kernels);
  if (report.frozen_weight_bytes > 0) {
    std::printf("weights: %s compiled in as constants (jit_config.infer_boost=on)\n",
                runtime::format_bytes(report.frozen_weight_bytes).c_str());
  }
  if (!report.cache_key.empty()) {
    std::printf("compile cache: %s %s (%s)\n", report.cache_hit ? "hit" : "miss",
                report.cache_key.c_str(), report.cache_note.c_str());
  }
  for (const auto& file : report.dump_files) std::printf("dumped %s\n", file.string().c_str());
}

// Where a name comes again, a new input set starts: `--input x=a.npy --input x=b.npy` is two runs.
// NAME=DIR gives one set per .npy file in DIR, in name order.
std::vector<std::map<std::string, Tensor>> load_input_sets(const std::vector<std::string>& items) {
  std::vector<std::map<std::string, Tensor>> sets(1);
  for (const auto& item : items) {
    const size_t eq = item.find('=');
    MF_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < item.size(), InvalidArgument,
             "--input '", echo(item), "' is malformed; expected NAME=FILE.npy or NAME=DIR");
    const std::string name = item.substr(0, eq);
    const std::filesystem::path path = item.substr(eq + 1);
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
        if (entry.path().extension() == ".npy") files.push_back(entry.path());
      }
      MF_CHECK(!ec && !files.empty(), InvalidArgument, "--input ", echo(name, 80), "=",
               echo(path.string()), ": the folder holds no .npy file");
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(path);
    }
    for (const auto& file : files) {
      auto target =
          std::find_if(sets.begin(), sets.end(), [&](const auto& set) { return !set.count(name); });
      if (target == sets.end()) target = sets.emplace(sets.end());
      (*target)[name] = Tensor::load_npy(file.string());
    }
  }
  return sets;
}

void print_output(const std::string& name, const Tensor& t) {
  if (t.numel() == 0) {
    // No elements: no mean, minimum or maximum to report.
    std::printf("output %s: shape %s dtype %s (empty)\n", name.c_str(),
                ir::shape_to_string(t.shape()).c_str(),
                std::string(ir::dtype_name(t.dtype())).c_str());
    return;
  }
  const TensorStats s = tensor_stats(t);
  std::printf("output %s: shape %s dtype %s sum %.9g mean %.9g min %.9g max %.9g\n", name.c_str(),
              ir::shape_to_string(t.shape()).c_str(),
              std::string(ir::dtype_name(t.dtype())).c_str(), s.sum, s.mean, s.min, s.max);
}

// --output-dir: each output as DIR/<name><suffix>.npy (nothing when `dir` is empty).
void write_outputs(const std::string& dir,
                   const std::vector<std::pair<std::string, Tensor>>& outputs,
                   const std::string& suffix) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MF_CHECK(!ec, InvalidArgument, "cannot create --output-dir '", echo(dir), "': ", ec.message());
  for (const auto& [name, t] : outputs) {
    const auto file = std::filesystem::path(dir) / (name + suffix + ".npy");
    t.save_npy(file);
    std::printf("wrote %s\n", file.string().c_str());
  }
}

// Runs one iteration and waits for its outputs; returns its milliseconds.
double run_iteration(const std::function<std::vector<std::pair<std::string, Tensor>>()>& step,
                     std::vector<std::pair<std::string, Tensor>>& outputs) {
  const auto start = std::chrono::steady_clock::now();
  outputs = step();
  for (auto& [name, t] : outputs) {
    if (t.defined()) t.sync();
  }
  engine::sync();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The first iteration (compile, fresh pages) apart; the median over the ones after it.
struct Timing {
  double first = 0, median = 0;
  size_t steady_count = 0;
};
Timing timing(const std::vector<double>& millis) {
  std::vector<double> steady(millis.begin() + (millis.size() > 1 ? 1 : 0), millis.end());
  std::sort(steady.begin(), steady.end());
  return {millis.front(), steady[steady.size() / 2], steady.size()};
}

// A model with dynamic dimensions: how its sizes were prepared.
void print_dynamic_report(const engine::ModelFile& file, bool graph_mode) {
  std::printf("prepared input signatures: %zu held (at most %zu kept)\n", file.prepared_shapes(),
              engine::ModelFile::kPreparedShapes);
  if (!graph_mode) return;
  std::printf("dynamic: %s\n", file.dynamic_note().c_str());
  const std::string sizes = file.symbolic_description();
  if (!sizes.empty()) std::printf("%s", sizes.c_str());
}

// Several input sets (sizes, for a model with dynamic dimensions): each runs once, in this one
// process, and the report says what each compiled.
void run_input_sets(const RunOptions& options,
                    const std::vector<std::map<std::string, Tensor>>& sets) {
  MF_CHECK(options.iters >= 1, InvalidArgument, "--iters must be at least 1, got ", options.iters);
  MF_CHECK(options.profile_dir.empty() && options.jit_cells.empty(), InvalidArgument,
           "several input sets: drop --profile and --jit (or give one set)");
  const auto policy = engine::current_policy();
  const bool graph_mode = policy->mode.value == context::ExecutionMode::kGraph;
  std::unique_ptr<nn::Cell> net;
  std::unique_ptr<engine::ModelFile> file;
  const bool is_file = engine::model_format(options.target).has_value();
  const models::NetSpec* spec = nullptr;
  if (is_file) {
    file = std::make_unique<engine::ModelFile>(engine::ModelFile::load(options.target));
    if (file->dynamic()) {
      std::printf("dynamic inputs: %s\n", ir::signature_to_string(file->signature()).c_str());
    }
  } else {
    spec = &models::find_net(options.target);
    net = spec->make(options.seed);
    // The sets declare the input: an axis where they differ is dynamic (Cell.set_inputs).
    const auto input = sets.front().find(spec->input_name);
    MF_CHECK(input != sets.front().end(), InvalidArgument, "network '", spec->name,
             "' has one input named '", spec->input_name, "': give it in every input set");
    ir::SymbolicShape declared = ir::symbolic_shape(input->second.shape());
    for (const auto& set : sets) {
      const auto it = set.find(spec->input_name);
      MF_CHECK(it != set.end() && it->second.shape().size() == declared.size(), InvalidArgument,
               "network '", spec->name, "': every input set gives '", spec->input_name,
               "' with one rank");
      for (size_t axis = 0; axis < declared.size(); ++axis) {
        if (declared[axis].size != it->second.shape()[axis]) declared[axis] = {-1, ""};
      }
    }
    net->set_inputs(declared, input->second.dtype());
    std::printf("declared input %s: %s\n", spec->input_name.c_str(),
                ir::symbolic_shape_to_string(declared).c_str());
  }
  std::printf("run: %s in %s, %zu input sets\n", options.target.c_str(),
              std::string(context::to_string(policy->mode.value)).c_str(), sets.size());
  size_t compiles = 0;
  for (size_t k = 0; k < sets.size(); ++k) {
    std::vector<std::pair<std::string, Tensor>> outputs;
    std::string shapes;
    for (const auto& [name, t] : sets[k]) {
      shapes +=
          (shapes.empty() ? "" : ", ") + echo(name, 80) + " " + ir::shape_to_string(t.shape());
    }
    std::vector<double> millis;
    bool compiled = false, specialized = false;
    double compile_ms = 0;
    for (const auto& [name, tensor] : sets[k]) {
      MF_CHECK(file || name == spec->input_name, InvalidArgument, "network '", spec->name,
               "' has one input named '", spec->input_name, "', not '", echo(name, 80), "'");
    }
    const auto step = [&]() -> std::vector<std::pair<std::string, Tensor>> {
      if (file) return file->run(sets[k], options.seed);
      return {{"output", (*net)(sets[k].at(spec->input_name))}};
    };
    for (int i = 0; i < options.iters; ++i) {
      millis.push_back(run_iteration(step, outputs));
      if (graph_mode && i == 0) {
        const engine::GraphRunReport& report =
            net ? net->graph_report() : file->runner().graph_report();
        compiled = report.compiled;
        specialized = report.specialized;
        compile_ms = report.compile_ms;
      }
    }
    const Timing time = timing(millis);
    std::string what = "op by op";
    if (graph_mode) {
      compiles += compiled ? 1 : 0;
      char buffer[160];
      if (compiled) {
        std::snprintf(buffer, sizeof buffer, "compiled in %.3g ms", compile_ms);
      } else if (specialized) {
        std::snprintf(buffer, sizeof buffer, "bound the symbolic compile to these sizes in %.3g ms",
                      compile_ms);
      } else {
        std::snprintf(buffer, sizeof buffer, "reused a compiled form");
      }
      what = buffer;
    }
    std::printf("input set %zu (%s): %s, first %.3g ms", k, shapes.c_str(), what.c_str(),
                time.first);
    if (millis.size() > 1) {
      std::printf(", median %.3g ms over %zu iterations after the first", time.median,
                  time.steady_count);
    }
    std::printf("\n");
    for (const auto& [name, t] : outputs) print_output(name, t);
    write_outputs(options.output_dir, outputs, "_" + std::to_string(k));
  }
  if (graph_mode) std::printf("compiles: %zu for %zu input sets\n", compiles, sets.size());
  if (file && file->dynamic()) print_dynamic_report(*file, graph_mode);
}

void run(const RunOptions& options) {
  const auto policy = engine::current_policy();
  const bool is_file = engine::model_format(options.target).has_value();
  MF_CHECK(options.iters >= 1, InvalidArgument, "--iters must be at least 1, got ", options.iters);

  // One iteration of the work, returning named outputs.
  std::function<std::vector<std::pair<std::string, Tensor>>()> step;
  std::unique_ptr<nn::Cell> net;
  std::unique_ptr<engine::ModelFile> file;
  const std::vector<std::map<std::string, Tensor>> input_sets = load_input_sets(options.inputs);
  if (input_sets.size() > 1) {
    run_input_sets(options, input_sets);
    return;
  }
  std::map<std::string, Tensor> inputs = input_sets.front();
  MF_CHECK(options.jit_cells.empty() || !is_file, InvalidArgument,
           "--jit names cells of a sample network; an .ir or .onnx file has none (run it with "
           "--mode graph to compile it whole)");
  std::vector<std::pair<std::string, nn::Cell*>> jit_cells;
  if (is_file) {
    // An ONNX model's weights are its exporter's; --input names may be the file's or the IR's.
    file = std::make_unique<engine::ModelFile>(engine::ModelFile::load(options.target));
    if (file->dynamic()) {
      std::printf("dynamic inputs: %s\n", ir::signature_to_string(file->signature()).c_str());
    }
    inputs =
        file->runner_for(file->feeds(inputs)).with_generated(file->feeds(inputs), options.seed);
    step = [&] { return file->runner().run(inputs, options.seed); };
  } else {
    const models::NetSpec& spec = models::find_net(options.target);
    for (const auto& [name, tensor] : inputs) {
      MF_CHECK(name == spec.input_name, InvalidArgument, "network '", spec.name,
               "' has one input named '", spec.input_name, "', not '", name, "'");
    }
    net = spec.make(options.seed);
    jit_cells = mark_jit_cells(*net, options.jit_cells, spec.name);
    if (!inputs.count(spec.input_name)) inputs[spec.input_name] = spec.make_input(options.seed);
    step = [&] {
      return std::vector<std::pair<std::string, Tensor>>{
          {"output", (*net)(inputs[spec.input_name])}};
    };
  }

  std::printf("run: %s in %s\n", options.target.c_str(),
              std::string(context::to_string(policy->mode.value)).c_str());
  std::vector<double> millis;
  double first_compile_ms = 0;  // trace and compile inside the first iteration
  double first_prepare_ms = 0;  // op by op: kernels made before a file's first op
  std::vector<std::pair<std::string, Tensor>> outputs;
  runtime::default_pool().reset_peak();
  const bool graph_mode = policy->mode.value == context::ExecutionMode::kGraph;
  auto graph_report = [&]() -> const engine::GraphRunReport& {
    return net ? net->graph_report() : file->runner().graph_report();
  };
  if (!options.profile_dir.empty()) {
    runtime::profile_thread_name("mf run (caller)");
    runtime::Profiler::start(options.profile_events);
  }
  for (int i = 0; i < options.iters; ++i) {
    {
      const runtime::SpanTimer iteration(runtime::ProfileEventKind::kIteration,
                                         "iteration " + std::to_string(i),
                                         graph_mode ? "GRAPH" : "PYNATIVE");
      millis.push_back(run_iteration(step, outputs));
    }
    if (!graph_mode && i == 0 && file) {
      const engine::IrRunner::EagerPrepareReport& prepared = file->runner().eager_prepare_report();
      std::printf("op by op: %zu kernels prepared in %.3g ms before the first op\n",
                  prepared.kernels, prepared.ms);
      first_prepare_ms = prepared.ms;
    }
    if (!graph_mode && i == 0) {
      for (const auto& [name, cell] : jit_cells) {
        print_graph_report("jit " + name, cell->graph_report());
        if (cell->graph_report().compiled) {
          first_compile_ms += cell->graph_report().trace_ms + cell->graph_report().compile_ms;
        }
      }
      if (!jit_cells.empty() && policy->precompile_only.value) {
        std::printf("precompile_only: jit-compiled cells compiled, not run\n");
        return;
      }
    }
    if (graph_mode && i == 0) {
      const engine::GraphRunReport& report = graph_report();
      print_graph_report("graph", report);
      if (file && file->dynamic()) print_dynamic_report(*file, graph_mode);
      if (report.compiled) first_compile_ms = report.trace_ms + report.compile_ms;
      if (!report.ran) {
        std::printf("precompile_only: compiled, not run\n");
        return;
      }
    }
  }
  if (!options.profile_dir.empty()) {
    const runtime::Profile profile = runtime::Profiler::stop();
    const runtime::HardwareRates machine =
        runtime::measure_machine_for_profile(policy->intra_op_threads.value);
    runtime::write_profile(options.profile_dir, profile, machine);
    std::printf(
        "profile: %zu events%s in %s (trace.json, summary.md, roofline.svg)\n",
        profile.events.size(),
        profile.dropped ? (", " + std::to_string(profile.dropped) + " dropped").c_str() : "",
        options.profile_dir.c_str());
  }
  for (const auto& [name, t] : outputs) print_output(name, t);
  // The first iteration (compile in GRAPH mode, fresh pages, first-touch costs) is reported on its
  // own; the median is the steady state, over the iterations after it.
  const Timing time = timing(millis);
  const double first = time.first;
  std::printf("time: first %.3g ms, median %.3g ms over %zu iteration%s%s", first, time.median,
              time.steady_count, time.steady_count == 1 ? "" : "s",
              millis.size() > 1 ? " after the first" : "");
  // What the first run cost beyond the steady state, apart from compiling (the first-iteration
  // measure).
  if (first_compile_ms > 0) {
    std::printf("; first without its %.3g ms of compiling: %.3g ms", first_compile_ms,
                std::max(0.0, first - first_compile_ms));
  }
  if (first_prepare_ms > 0) {
    std::printf("; first without its %.3g ms of preparing kernels: %.3g ms", first_prepare_ms,
                std::max(0.0, first - first_prepare_ms));
  }
  std::printf("\n");
  const runtime::MemoryStats stats = runtime::default_pool().stats();
  std::printf("memory: peak %s in use, %s reserved, %zu system allocations (%s)\n",
              runtime::format_bytes(stats.peak_in_use_bytes).c_str(),
              runtime::format_bytes(stats.reserved_bytes).c_str(), stats.system_allocations,
              runtime::describe_reserved(stats).c_str());
  write_outputs(options.output_dir, outputs, "");
}

}  // namespace

void add_run_command(CLI::App& app, GlobalOptions& global) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd =
      app.add_subcommand("run", "Run a sample network or an .ir file and report its outputs");
  cmd->add_option("target", options->target, "A network from `mf nets`, a FILE.ir or a FILE.onnx")
      ->required();
  cmd->add_option("--input", options->inputs,
                  "Feed an input from a .npy file: NAME=FILE.npy (repeatable). A name given "
                  "again starts another input set, and NAME=DIR gives one set per .npy file in "
                  "DIR: each set runs once in this process");
  cmd->add_option("--seed", options->seed, "Seed of the weights and generated inputs (default 0)");
  cmd->add_option("--iters", options->iters, "Iterations to time (default 1)");
  cmd->add_option("--profile", options->profile_dir,
                  "Profile the iterations into DIR: trace.json (Chrome's trace format), "
                  "summary.md (ops by time, kernels against the machine), roofline.svg");
  cmd->add_option("--profile-events", options->profile_events,
                  "Events a profile keeps at most (default 1000000; the rest are counted)");
  cmd->add_option("--output-dir", options->output_dir,
                  "Write each output as <name>.npy here (the name the network gives it, else "
                  "output<i>)");
  cmd->add_option("--jit", options->jit_cells,
                  "In PYNATIVE mode, compile these child cells of a sample network as graphs "
                  "(names as in their scopes: 'encoder' or 'encoder-TransformerEncoderLayer', or a "
                  "full scope path; comma-separated or repeated). The rest runs op by op")
      ->delimiter(',');
  add_global_options(*cmd, global);
  cmd->callback([options, &global] {
    apply_global_options(global);
    run(*options);
  });

  CLI::App* nets = app.add_subcommand("nets", "List the built-in sample networks");
  add_global_options(*nets, global);
  nets->callback([&global] {
    apply_global_options(global);
    for (const auto& net : models::all_nets())
      std::printf("%-12s %s\n", net.name.c_str(), net.description.c_str());
  });
}

}  // namespace mf::tools
