// `mf grad NET`: the gradients of a sample network's output (summed: an all-ones sensitivity) with
// respect to its input and every parameter, in the mode the context says (GRAPH: one compiled
// graph, forward and backward; PYNATIVE: the tape), with each gradient's statistics.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "engine/autodiff/grad.h"
#include "engine/eager/dispatch.h"
#include "engine/engine_state.h"
#include "engine/models/registry.h"
#include "runtime/memory_format.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

struct GradOptions {
  std::string target;
  std::string input;  // FILE.npy
  uint64_t seed = 0;
  int iters = 1;
  std::string output_dir;
};

void print_stats(const std::string& name, const Tensor& t) {
  const TensorStats s = tensor_stats(t);
  double norm = 0;
  for (double v : t.to_doubles()) norm += v * v;
  std::printf("  %-40s %-16s sum %-12.6g mean %-12.6g min %-12.6g max %-12.6g norm %.6g\n",
              name.c_str(), ir::shape_to_string(t.shape()).c_str(), s.sum, s.mean, s.min, s.max,
              std::sqrt(norm));
}

void save(const std::string& dir, const std::string& name, const Tensor& t) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MF_CHECK(!ec, InvalidArgument, "cannot create --output-dir '", echo(dir), "': ", ec.message());
  const auto file = std::filesystem::path(dir) / ("grad_" + name + ".npy");
  t.save_npy(file);
  std::printf("wrote %s\n", file.string().c_str());
}

void grad(const GradOptions& options) {
  MF_CHECK(options.iters >= 1, InvalidArgument, "--iters must be at least 1, got ", options.iters);
  const models::NetSpec& spec = models::find_net(options.target);
  auto net = spec.make(options.seed);
  const Tensor x =
      options.input.empty() ? spec.make_input(options.seed) : Tensor::load_npy(options.input);
  GradSpec grad_spec;
  std::vector<std::string> names;
  for (const auto& [name, tensor] : net->named_parameters()) {
    grad_spec.weights.push_back(tensor);
    names.push_back(name);
  }
  GradFunction gradient = value_and_grad(*net, grad_spec);
  const auto policy = engine::current_policy();
  const bool graph = policy->mode.value == context::ExecutionMode::kGraph;
  Gradients g;
  engine::GraphRunReport first_report;
  std::vector<double> millis;
  for (int i = 0; i < options.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    g = gradient(x);
    g.value.sync();
    for (const Tensor& w : g.weights) w.sync();
    engine::sync();
    millis.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    if (i == 0) first_report = gradient.graph_report();
  }
  std::printf("network: %s, input %s, %s\n", spec.name.c_str(),
              ir::type_to_string(x.type()).c_str(),
              graph ? "GRAPH_MODE (forward and backward compiled as one graph)"
                    : "PYNATIVE_MODE (op by op, on a tape)");
  if (graph) {
    const engine::GraphRunReport& r = first_report;
    std::printf("compiled: jit_level %s, fusion %d, %s, planned peak %s, compile %.3g ms\n",
                r.jit_level.c_str(), r.fusion_level, r.executor.c_str(),
                runtime::format_bytes(r.planned_peak_bytes).c_str(), r.compile_ms);
    for (const auto& f : r.dump_files) std::printf("dump: %s\n", f.string().c_str());
  }
  print_stats("value", g.value);
  std::printf("gradients:\n");
  print_stats(spec.input_name, g.input);
  save(options.output_dir, spec.input_name, g.input);
  for (size_t i = 0; i < names.size(); ++i) {
    print_stats(names[i], g.weights[i]);
    save(options.output_dir, names[i], g.weights[i]);
  }
  double steady = millis.front();
  if (millis.size() > 1) {
    std::vector<double> rest(millis.begin() + 1, millis.end());
    std::sort(rest.begin(), rest.end());
    steady = rest[rest.size() / 2];
  }
  std::printf("time: first %.3g ms, median %.3g ms (forward and backward)\n", millis.front(),
              steady);
}

}  // namespace

void add_grad_command(CLI::App& app, GlobalOptions& global) {
  auto options = std::make_shared<GradOptions>();
  CLI::App* cmd = app.add_subcommand(
      "grad", "Differentiate a sample network: each parameter's gradient statistics");
  cmd->add_option("target", options->target, "A network from `mf nets`")->required();
  cmd->add_option("--input", options->input, "The input from a .npy file (default: generated)");
  cmd->add_option("--seed", options->seed, "Seed of the weights and generated input (default 0)");
  cmd->add_option("--iters", options->iters, "Iterations to time (default 1)");
  cmd->add_option("--output-dir", options->output_dir,
                  "Write each gradient as grad_<name>.npy here (the input's as grad_x.npy)");
  add_global_options(*cmd, global);
  cmd->callback([options, &global] {
    apply_global_options(global);
    grad(*options);
  });
}

}  // namespace mf::tools
