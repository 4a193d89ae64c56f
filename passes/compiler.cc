#include "passes/compiler.h"

#include <chrono>

#include "base/error.h"
#include "base/logging.h"
#include "passes/dump.h"
#include "passes/pass_table.h"
#include "passes/plan_memory.h"

namespace mf::passes {

namespace {

// "# kernels:" lines for the backend dump: what runs each node, numbered as the printer numbers
// nodes (program order), one block per graph.
void describe_kernels(const ir::Graph& graph, const std::string& path, std::string& out) {
  out += "# kernels of @" + path + ":\n";
  size_t position = 0;
  for (const ir::Node& node : graph.nodes()) {
    const bool control = node.def() != nullptr && node.def()->has(ir::Trait::kControlFlow);
    out += detail::str_cat("#   %", position++, " ", node.op(), ": ",
                           control ? "control flow (run by the executor)" : "cpu kernel", "\n");
  }
  for (const ir::Graph* sub : graph.subgraphs()) {
    describe_kernels(*sub, path + "/" + sub->name(), out);
  }
}

std::string pass_summary(const std::vector<PassRecord>& records) {
  std::string out = "# pass                              changed   time_ms  nodes\n";
  for (const PassRecord& r : records) {
    char line[256];
    std::snprintf(line, sizeof(line), "%-35s %-7s %9.3f  %s\n", r.name.c_str(),
                  r.changed ? "yes" : "no", r.millis, r.summary.c_str());
    out += line;
  }
  return out;
}

}  // namespace

CompiledGraph compile(std::unique_ptr<ir::Graph> graph, const CompileOptions& options) {
  MF_CHECK(graph != nullptr, InvalidArgument, "compile() needs a graph");
  // Everything that can be wrong with the options fails here, before any pass runs.
  Dumper dumper(options.dump);
  Pipeline frontend = build_frontend_pipeline(options);
  Pipeline backend = build_backend_pipeline(options);
  for (const PassFactory& make : options.extra_passes) frontend.add(make());
  // stop_after_pass: one budget of pass runs across both phases; past it only what execution needs.
  size_t runs = 0;
  auto within_cut = [&options, &runs](const Pass& pass) {
    if (runs < *options.stop_after_pass) {
      ++runs;
      return true;
    }
    return pass.name() == "select-kernels";
  };
  if (options.stop_after_pass) {
    frontend.set_filter(within_cut);
    backend.set_filter(within_cut);
  }

  CompiledGraph out;
  dumper.write_graph(*graph, "trace");
  auto observer = [&dumper](const ir::Graph& g, const PassRecord& record) {
    if (dumper.enabled(2)) dumper.write_graph(g, record.name);
  };
  frontend.set_observer(observer);
  backend.set_observer(observer);

  out.passes = frontend.run(*graph);
  dumper.write_graph(*graph, "frontend");
  for (PassRecord& record : backend.run(*graph)) out.passes.push_back(std::move(record));

  const auto start = std::chrono::steady_clock::now();
  runtime::Plan plan;
  try {
    plan = plan_memory(*graph, options);
  } catch (Error& e) {
    e.add_context("in pass 'plan-memory'");
    throw;
  }
  const double millis =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  out.passes.push_back({"plan-memory", false, millis,
                        detail::str_cat("arena ", plan.arena_bytes, " bytes, planned peak ",
                                        plan.planned_peak_bytes, " bytes")});

  std::string trailer;
  if (dumper.enabled(2)) {
    describe_kernels(*graph, graph->name(), trailer);
    trailer += plan.describe();
  }
  dumper.write_graph(*graph, "backend", trailer);
  if (dumper.enabled(2)) dumper.write_text("pass_summary", "txt", pass_summary(out.passes));

  out.plan = std::make_shared<const runtime::Plan>(std::move(plan));
  out.graph = std::move(graph);
  out.dump_files = dumper.files();
  return out;
}

}  // namespace mf::passes
