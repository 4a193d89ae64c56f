// `mf grad NET|MODEL`: the gradients of a sample network's or a model file's output (summed: an
// all-ones sensitivity) with respect to its input and every floating parameter, in the mode the
// context says (GRAPH: one compiled graph, forward and backward; PYNATIVE: the tape), with each
// gradient's statistics.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "engine/autodiff/grad.h"
#include "engine/eager/dispatch.h"
#include "engine/engine_state.h"
#include "engine/io/model_cell.h"
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

// What is differentiated: a sample network, or a model file as a cell (engine/io/model_cell.h).
struct Target {
  std::shared_ptr<nn::Cell> net;
  std::vector<Tensor> inputs;  // the first is differentiated; a model's others are drawn
  std::string title, input_name;
  std::vector<std::string> weight_names;  // as the network or the file names them
};

Target target_of(const GradOptions& options) {
  Target t;
  if (engine::model_format(options.target)) {
    auto cell = std::make_shared<engine::ModelCell>(options.target, options.seed);
    const std::vector<std::string>& parameters = cell->model().input_parameters();
    if (options.input.empty()) {
      MF_CHECK(!cell->model().dynamic(), InvalidArgument, "model ", echo(options.target),
               " has dynamic input dimensions; give its input with --input FILE.npy");
      const auto drawn = cell->model().runner().with_generated({}, options.seed);
      for (const std::string& parameter : parameters) t.inputs.push_back(drawn.at(parameter));
    } else {
      MF_CHECK(parameters.size() == 1, InvalidArgument, "model ", echo(options.target), " has ",
               parameters.size(),
               " inputs and --input gives one; leave --input out to draw them all from --seed");
      t.inputs.push_back(Tensor::load_npy(options.input));
    }
    t.title = options.target;
    // The IR's names (letters, digits, '_' and '.'): safe as file names under --output-dir.
    t.input_name = cell->model().input_parameters().front();
    for (const auto& [cell_name, model_name] : cell->weight_names()) {
      t.weight_names.push_back(model_name);
    }
    t.net = std::move(cell);
    return t;
  }
  const models::NetSpec& spec = models::find_net(options.target);
  t.net = spec.make(options.seed);
  t.inputs.push_back(options.input.empty() ? spec.make_input(options.seed)
                                           : Tensor::load_npy(options.input));
  t.title = spec.name;
  t.input_name = spec.input_name;
  for (const auto& [name, tensor] : t.net->named_parameters()) t.weight_names.push_back(name);
  return t;
}

void grad(const GradOptions& options) {
  MF_CHECK(options.iters >= 1, InvalidArgument, "--iters must be at least 1, got ", options.iters);
  Target target = target_of(options);
  nn::Cell* net = target.net.get();
  const Tensor& x = target.inputs.front();
  GradSpec grad_spec;
  grad_spec.input = ir::is_floating(x.dtype());  // token ids have no gradient
  std::vector<std::string> names;
  size_t k = 0;
  for (const auto& [name, tensor] : net->named_parameters()) {
    const std::string& shown = target.weight_names.at(k++);
    // Integer weights of a model (indices, shapes) have no gradient.
    if (!ir::is_floating(tensor.dtype())) continue;
    grad_spec.weights.push_back(tensor);
    names.push_back(shown);
  }
  GradFunction gradient = value_and_grad(*net, grad_spec);
  const auto policy = engine::current_policy();
  const bool graph = policy->mode.value == context::ExecutionMode::kGraph;
  Gradients g;
  engine::GraphRunReport first_report;
  std::vector<double> millis;
  for (int i = 0; i < options.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    g = gradient(std::span<const Tensor>(target.inputs));
    g.value.sync();
    for (const Tensor& w : g.weights) w.sync();
    engine::sync();
    millis.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    if (i == 0) first_report = gradient.graph_report();
  }
  std::printf("network: %s, input %s, %s\n", target.title.c_str(),
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
  if (g.input.defined()) {
    print_stats(target.input_name, g.input);
    save(options.output_dir, target.input_name, g.input);
  }
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
      "grad",
      "Differentiate a sample network or a model file: each parameter's gradient statistics");
  cmd->add_option("target", options->target,
                  "A network from `mf nets`, or a model file (.onnx, .ir); of its inputs, the "
                  "first is differentiated")
      ->required();
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
