// `mf bisect NET`: which compile pass first makes a network's GRAPH-mode output differ from its
// PYNATIVE reference. The logic lives in engine/graph/bisect.h; this file parses and prints.

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <string>

#include "base/logging.h"
#include "engine/graph/bisect.h"
#include "engine/models/registry.h"
#include "ir/graph.h"
#include "passes/pass.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

// Exit status when a divergence is found: distinct from 1 (an error) and 2 (bad usage), so a
// script can tell "the engine is wrong here" from "the command could not run".
constexpr int kDivergenceExitStatus = 3;

struct BisectCommandOptions {
  std::string net;
  double tolerance = 1e-4;
  uint64_t seed = 0;
  bool all = false;
};

std::string cut_label(const engine::BisectCut& cut) {
  return cut.passes_run == 0 ? std::string("(trace only)") : "after " + cut.after_pass;
}

void print_cut(const engine::BisectCut& cut) {
  if (!cut.error.empty()) {
    std::printf("cut %3zu %-42s FAILED: %s\n", cut.passes_run, cut_label(cut).c_str(),
                cut.error.c_str());
  } else {
    std::printf("cut %3zu %-42s max abs diff %-11.4g %s\n", cut.passes_run, cut_label(cut).c_str(),
                cut.comparison.max_abs_diff, cut.comparison.diverged ? "DIVERGES" : "ok");
  }
  std::fflush(stdout);
}

// MF_BISECT_INJECT_OFFSET=V (for the project's CLI tests; the engine itself never diverges): a
// deliberately wrong front-end pass, "injected-offset", adds V to the network's first output, so
// the command's report and exit status for a divergence can be checked end to end.
class InjectedOffset final : public passes::Pass {
 public:
  explicit InjectedOffset(float offset) : offset_(offset) {}
  std::string_view name() const override { return "injected-offset"; }
  bool run(ir::Graph& graph) override {
    ir::Constant* offset = graph.add_constant<float>({}, {offset_});
    graph.set_output(0, graph.add_node("add", {graph.outputs()[0], offset})->output());
    return true;
  }

 private:
  float offset_;
};

void add_injected_offset(engine::BisectOptions& options) {
  const char* env = std::getenv("MF_BISECT_INJECT_OFFSET");
  if (env == nullptr || *env == '\0') return;
  char* end = nullptr;
  const float offset = std::strtof(env, &end);
  MF_CHECK(end != env && *end == '\0' && std::isfinite(offset), InvalidArgument,
           "MF_BISECT_INJECT_OFFSET='", env, "' is not a finite number; unset it");
  log::warn(
      "MF_BISECT_INJECT_OFFSET={}: a pass that adds it to the output is injected (a test "
      "hook)",
      offset);
  options.extra_passes.push_back([offset] { return std::make_unique<InjectedOffset>(offset); });
}

int run_bisect(const BisectCommandOptions& options) {
  MF_CHECK(options.tolerance >= 0 && std::isfinite(options.tolerance), InvalidArgument,
           "--tolerance must be a finite number >= 0, got ", options.tolerance);
  const models::NetSpec& spec = models::find_net(options.net);
  engine::BisectOptions bisect_options;
  bisect_options.tolerance = options.tolerance;
  bisect_options.seed = options.seed;
  bisect_options.stop_at_first = !options.all;
  bisect_options.on_cut = print_cut;
  add_injected_offset(bisect_options);
  std::printf(
      "bisect: %s, reference PYNATIVE, tolerance %g (|graph - reference| > tolerance * "
      "max(1, |reference|))\n",
      spec.name.c_str(), options.tolerance);
  std::fflush(stdout);

  const engine::BisectReport report = engine::bisect(spec, bisect_options);
  std::printf("pipeline: jit_level %s, fusion opt_level %d, %zu pass runs\n",
              report.jit_level.c_str(), report.fusion_level, report.pipeline.size());
  for (const engine::UnfusedCheck& check : report.unfused) {
    if (!check.error.empty()) {
      std::printf("unfused %-40s FAILED: %s\n", check.kernel.c_str(), check.error.c_str());
    } else {
      std::printf("unfused %-40s vs fused max abs diff %-11.4g vs reference %-11.4g %s\n",
                  check.kernel.c_str(), check.vs_fused.max_abs_diff,
                  check.vs_reference.max_abs_diff, check.vs_fused.diverged ? "DIVERGES" : "ok");
    }
  }
  std::printf("fused kernels: %zu in the compiled graph, %zu checked unfused\n",
              report.fused_kernels.size(), report.unfused.size());
  if (report.first_divergent_kernel) {
    const engine::UnfusedCheck& check = report.unfused[*report.first_divergent_kernel];
    const engine::Comparison& c = check.vs_fused;
    std::printf(
        "divergent fused kernel: %s: run unfused, element [%lld] is %.9g; fused it is %.9g\n",
        check.kernel.c_str(), static_cast<long long>(c.worst_index), c.reference, c.value);
  }
  if (report.first_divergence) {
    const engine::BisectCut& cut = report.cuts[*report.first_divergence];
    const engine::Comparison& c = cut.comparison;
    if (cut.passes_run == 0) {
      std::printf("first divergence: before any pass (the traced graph with kernels selected)");
    } else {
      std::printf("first divergence: after pass '%s' (pass run %zu of %zu)", cut.after_pass.c_str(),
                  cut.passes_run, report.pipeline.size());
    }
    if (!c.note.empty()) std::printf(": %s", c.note.c_str());
    if (c.worst_index >= 0) {
      std::printf("\n  worst element [%lld]: reference %.9g, graph %.9g (abs diff %.4g)",
                  static_cast<long long>(c.worst_index), c.reference, c.value,
                  std::abs(c.value - c.reference));
    }
    std::printf("\n");
    std::fflush(stdout);
    return kDivergenceExitStatus;
  }
  if (report.first_divergent_kernel) return kDivergenceExitStatus;
  if (report.first_error) {
    const engine::BisectCut& cut = report.cuts[*report.first_error];
    MF_FAIL(Internal, "cut ", cut.passes_run, " (", cut_label(cut),
            ") failed to compile or run: ", cut.error);
  }
  std::printf("no divergence: %zu cuts checked, max abs diff %.4g\n", report.cuts.size(),
              report.max_abs_diff);
  return 0;
}

}  // namespace

void add_bisect_command(CLI::App& app, GlobalOptions& global) {
  auto options = std::make_shared<BisectCommandOptions>();
  CLI::App* cmd =
      app.add_subcommand("bisect",
                         "Find the first compile pass after which GRAPH mode differs from PYNATIVE "
                         "(exit 0: none, 3: a divergence)");
  cmd->add_option("net", options->net, "A network from `mf nets`")->required();
  cmd->add_option("--tolerance", options->tolerance,
                  "An element diverges when |graph - reference| > T * max(1, |reference|) "
                  "(default 1e-4)");
  cmd->add_option("--seed", options->seed, "Seed of the weights and input (default 0)");
  cmd->add_flag("--all", options->all, "Check every cut, not only up to the first divergence");
  add_global_options(*cmd, global);
  cmd->callback([options, &global] {
    apply_global_options(global);
    const int status = run_bisect(*options);
    if (status != 0) {
      std::fflush(stdout);
      std::exit(status);
    }
  });
}

}  // namespace mf::tools
