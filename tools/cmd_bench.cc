// `mf bench`: the fusion sweep. Runs each sample network in GRAPH mode over a grid of fusion
// levels, jit levels and thread counts, and measures in the same run what the machine allows
// (memory bandwidth, GEMM rate), so every cell also reads as a fraction of its roofline.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "context/context.h"
#include "engine/engine_state.h"
#include "engine/graph/graph_mode.h"
#include "engine/graph/trace.h"
#include "engine/models/registry.h"
#include "runtime/machine_limits.h"
#include "tools/bench/cost_model.h"
#include "tools/bench/report.h"
#include "tools/bench/stats.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

using bench::BenchCell;
using bench::BenchResult;

constexpr int kMaxFusionLevel = 3;

struct BenchOptions {
  std::string nets =
      "elementwise,clamp_chain,layernorm,softmax,layernorm_ops,softmax_ops,mlp,cnn,transformer";
  std::string fusion = "0,1,2,3";
  std::string jit = "O0,O1,O2";
  std::string threads = "1,2";
  int iters = 10;
  std::string format = "table";
  std::string svg;
  int triad_mib = 0;  // 0: sized from the last-level cache
  int gemm_n = 1024;
  int probe_repeats = 5;
};

// The grid after validation.
struct Grid {
  std::vector<std::string> nets;
  std::vector<int> fusion;
  std::vector<std::string> jit;
  std::vector<int> threads;
};

std::vector<std::string> split_list(const std::string& text, std::string_view option) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    MF_CHECK(first != std::string::npos, InvalidArgument, option, " '", text,
             "' has an empty item; give a comma-separated list");
    items.push_back(item.substr(first, last - first + 1));
  }
  MF_CHECK(!items.empty(), InvalidArgument, option, " needs at least one value");
  return items;
}

int parse_int(const std::string& text, std::string_view option) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  MF_CHECK(used == text.size() && used > 0, InvalidArgument, option, " value '", text,
           "' is not an integer");
  return value;
}

Grid validate(const BenchOptions& options) {
  Grid grid;
  std::string known;
  for (const auto& net : models::all_nets()) known += (known.empty() ? "" : ", ") + net.name;
  for (const std::string& name : split_list(options.nets, "--nets")) {
    bool found = false;
    for (const auto& net : models::all_nets()) found |= net.name == name;
    MF_CHECK(found, InvalidArgument, "--nets: no sample network named '", name,
             "'; the built-in networks are: ", known);
    grid.nets.push_back(name);
  }
  for (const std::string& item : split_list(options.fusion, "--fusion")) {
    const int level = parse_int(item, "--fusion");
    MF_CHECK(level >= 0 && level <= kMaxFusionLevel, InvalidArgument, "--fusion: opt_level ", level,
             " is out of range; graph_kernel_flags --opt_level takes 0, 1, 2 or 3");
    grid.fusion.push_back(level);
  }
  for (const std::string& item : split_list(options.jit, "--jit")) {
    MF_CHECK(item == "O0" || item == "O1" || item == "O2", InvalidArgument, "--jit: '", item,
             "' is not a jit_level; use O0, O1 or O2");
    grid.jit.push_back(item);
  }
  for (const std::string& item : split_list(options.threads, "--threads")) {
    const int threads = parse_int(item, "--threads");
    MF_CHECK(threads >= 1, InvalidArgument, "--threads: ", threads,
             " is not a thread count; give 1 or more");
    grid.threads.push_back(threads);
  }
  MF_CHECK(options.iters >= 1, InvalidArgument, "--iters must be at least 1, got ", options.iters);
  MF_CHECK(options.format == "table" || options.format == "csv" || options.format == "json",
           InvalidArgument, "--format: '", options.format,
           "' is not a format; use table, csv or json");
  MF_CHECK(options.triad_mib >= 0, InvalidArgument,
           "--triad-mib must be >= 0 (0: from the cache size)");
  MF_CHECK(options.gemm_n >= 16, InvalidArgument, "--gemm-n must be at least 16, got ",
           options.gemm_n);
  MF_CHECK(options.probe_repeats >= 1, InvalidArgument, "--probe-repeats must be at least 1");
  return grid;
}

// The user's graph_kernel_flags with --opt_level replaced, so other flags given with --set stay.
std::string fusion_flags(const std::string& user_flags, int level) {
  std::istringstream in(user_flags);
  std::string token, out;
  while (in >> token) {
    if (!token.starts_with("--opt_level")) out += token + " ";
  }
  return out + "--opt_level=" + std::to_string(level);
}

std::string string_value(const context::Json& value) {
  return value.is_string() ? value.get<std::string>() : std::string();
}

const bench::HardwareRates& rates_for(const BenchResult& result, int threads) {
  for (const auto& rates : result.hardware) {
    if (rates.threads == threads) return rates;
  }
  MF_FAIL(Internal, "no hardware rates measured for ", threads, " threads");
}

// One cell: a fresh network, one warm-up call (trace + compile + run, not timed), `iters` timed.
BenchCell run_cell(const models::NetSpec& spec, int fusion, const std::string& jit, int threads,
                   int iters, const std::string& user_flags) {
  context::set({{"mode", "GRAPH_MODE"},
                {"jit_config", {{"jit_level", jit}}},
                {"graph_kernel_flags", fusion_flags(user_flags, fusion)},
                {"runtime_num_threads", threads}});
  engine::current_policy();
  BenchCell cell;
  cell.net = spec.name;
  cell.fusion = fusion;
  cell.jit = jit;
  cell.threads = threads;
  std::unique_ptr<nn::Cell> net = spec.make(0);
  Tensor x = spec.make_input(0);
  x.sync();
  Tensor y = (*net)(x);
  y.sync();
  cell.compile_ms = net->graph_report().compile_ms + net->graph_report().trace_ms;
  std::vector<double> millis;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    y = (*net)(x);
    y.sync();
    millis.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  cell.millis = bench::summarize(std::move(millis));
  return cell;
}

std::string command_line(const BenchOptions& o) {
  std::string out = "mf bench --nets " + o.nets + " --fusion " + o.fusion + " --jit " + o.jit +
                    " --threads " + o.threads + " --iters " + std::to_string(o.iters);
  if (o.triad_mib > 0) out += " --triad-mib " + std::to_string(o.triad_mib);
  if (o.gemm_n != 1024) out += " --gemm-n " + std::to_string(o.gemm_n);
  return out;
}

void run_bench(const BenchOptions& options) {
  const Grid grid = validate(options);
  BenchResult result;
  result.command = command_line(options);
  result.iters = options.iters;
  bench::HardwareProbe probe;
  probe.triad_bytes_per_array = size_t(options.triad_mib) << 20;
  probe.gemm_n = options.gemm_n;
  probe.repeats = options.probe_repeats;
  result.triad_bytes_per_array = bench::triad_bytes_per_array(probe);
  result.gemm_n = options.gemm_n;

  std::vector<int> thread_counts;
  for (int t : grid.threads) {
    if (std::find(thread_counts.begin(), thread_counts.end(), t) == thread_counts.end()) {
      thread_counts.push_back(t);
    }
  }
  // Probed before and after the sweep, keeping the best of each: other load on the machine at
  // one moment then cannot pass for the hardware's limit.
  auto probe_all = [&](const char* when) {
    for (size_t i = 0; i < thread_counts.size(); ++i) {
      const int threads = thread_counts[i];
      std::fprintf(stderr,
                   "measuring memory bandwidth (triad, %zu MiB per array) and GEMM rate "
                   "(%d^3 float) with %d thread%s, %s the sweep\n",
                   result.triad_bytes_per_array >> 20, options.gemm_n, threads,
                   threads == 1 ? "" : "s", when);
      const bench::HardwareRates rates = bench::measure_hardware(threads, probe);
      if (result.hardware.size() <= i) {
        result.hardware.push_back(rates);
      } else {
        bench::HardwareRates& best = result.hardware[i];
        best.bandwidth_bytes_per_s =
            std::max(best.bandwidth_bytes_per_s, rates.bandwidth_bytes_per_s);
        best.gemm_flops_per_s = std::max(best.gemm_flops_per_s, rates.gemm_flops_per_s);
        best.fma_flops_per_s = std::max(best.fma_flops_per_s, rates.fma_flops_per_s);
      }
    }
  };
  probe_all("before");

  const std::string user_flags = string_value(context::snapshot().get("graph_kernel_flags"));
  for (const std::string& name : grid.nets) {
    const models::NetSpec& spec = models::find_net(name);
    std::unique_ptr<nn::Cell> net = spec.make(0);
    const engine::TraceResult trace = engine::Tracer::trace(*net, spec.make_input(0), 1000, false);
    result.nets.push_back({name, bench::minimal_cost(*trace.graph)});
  }

  const size_t total =
      grid.nets.size() * grid.fusion.size() * grid.jit.size() * grid.threads.size();
  size_t done = 0;
  for (size_t n = 0; n < grid.nets.size(); ++n) {
    const models::NetSpec& spec = models::find_net(grid.nets[n]);
    for (int fusion : grid.fusion) {
      for (const std::string& jit : grid.jit) {
        for (int threads : grid.threads) {
          std::fprintf(stderr, "[%zu/%zu] %s fusion=%d jit=%s threads=%d\n", ++done, total,
                       spec.name.c_str(), fusion, jit.c_str(), threads);
          result.cells.push_back(run_cell(spec, fusion, jit, threads, options.iters, user_flags));
        }
      }
    }
  }
  probe_all("after");
  for (BenchCell& cell : result.cells) {
    size_t n = 0;
    while (result.nets[n].name != cell.net) ++n;
    const bench::Bound bound =
        bench::roofline_bound(result.nets[n].cost, rates_for(result, cell.threads));
    cell.bound_ms = bound.seconds * 1e3;
    cell.bound_kind = bound.kind;
  }
  bench::compute_ratios(result.cells);

  if (options.format == "json") {
    bench::write_json(result, std::cout);
  } else if (options.format == "csv") {
    bench::write_csv(result, std::cout);
  } else {
    bench::write_table(result, std::cout);
  }
  std::cout.flush();
  if (!options.svg.empty()) {
    std::ofstream file(options.svg);
    MF_CHECK(file.good(), InvalidArgument, "--svg: cannot write '", options.svg, "'");
    bench::write_svg(result, file);
    file.close();
    MF_CHECK(file.good(), InvalidArgument, "--svg: writing '", options.svg, "' failed");
    std::fprintf(stderr, "wrote %s\n", options.svg.c_str());
  }
}

}  // namespace

void add_bench_command(CLI::App& app, GlobalOptions& global) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Sweep sample networks over fusion level x jit level x threads in GRAPH mode; report "
      "median and spread per cell against the measured memory bandwidth and GEMM rate");
  cmd->add_option("--nets", options->nets,
                  "Comma-separated networks (default " + options->nets + ")");
  cmd->add_option("--fusion", options->fusion,
                  "graph_kernel_flags --opt_level values (default " + options->fusion + ")");
  cmd->add_option("--jit", options->jit,
                  "jit_config.jit_level values (default " + options->jit + ")");
  cmd->add_option("--threads", options->threads,
                  "runtime_num_threads values (default " + options->threads + ")");
  cmd->add_option("--iters", options->iters,
                  "Timed iterations per cell after one warm-up run (default 10)");
  cmd->add_option("--format", options->format, "table, csv or json (default table)");
  cmd->add_option("--svg", options->svg, "Also write an SVG bar chart to FILE")->type_name("FILE");
  cmd->add_option("--triad-mib", options->triad_mib,
                  "MiB per triad array (default: 4x the last-level cache, 256..1024)");
  cmd->add_option("--gemm-n", options->gemm_n, "Size of the GEMM probe (default 1024)");
  cmd->add_option("--probe-repeats", options->probe_repeats,
                  "Best of how many triad and GEMM runs (default 5)");
  add_global_options(*cmd, global);
  cmd->callback([options, &global] {
    apply_global_options(global);
    run_bench(*options);
  });
}

}  // namespace mf::tools
