#pragma once
// The results of one `mf bench` sweep and their four renderings: an aligned table, CSV, JSON and an
// SVG bar chart. Pure functions of the data, so tests can render without running a sweep.

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/machine_limits.h"
#include "tools/bench/cost_model.h"
#include "tools/bench/stats.h"

namespace mf::tools::bench {

// One point of the grid and what it measured (times in milliseconds).
struct BenchCell {
  std::string net;
  int fusion = 0;          // graph_kernel_flags --opt_level
  std::string jit;         // "O0", "O1", "O2"
  int threads = 1;         // runtime_num_threads
  Summary millis;          // over the timed iterations (the warm-up run excluded)
  double compile_ms = 0;   // the warm-up run's trace + compile
  double bound_ms = 0;     // roofline_bound of the net at this thread count's rates
  std::string bound_kind;  // "memory" / "compute"
  // bound_ms / median: 1.0 runs at the hardware's limit, 0.25 takes four times that.
  double roofline_fraction = 0;
  // Speedups (> 1: faster) against the cell with fusion 0 (same net, jit, threads) and against the
  // cell with jit O0 (same net, fusion, threads); empty when that cell is not in the sweep.
  std::optional<double> vs_fusion0;
  std::optional<double> vs_jit_o0;

  std::string config() const;  // "fusion=1 jit=O1 threads=2"
};

struct NetInfo {
  std::string name;
  NetCost cost;
};

struct BenchResult {
  std::string command;  // the command line, for the record
  int iters = 0;
  size_t triad_bytes_per_array = 0;
  int gemm_n = 0;
  std::vector<HardwareRates> hardware;  // one per thread count swept
  std::vector<NetInfo> nets;
  std::vector<BenchCell> cells;  // in sweep order: net, fusion, jit, threads
};

// Fills roofline_fraction, vs_fusion0 and vs_jit_o0 from the medians and bound_ms.
void compute_ratios(std::vector<BenchCell>& cells);

void write_table(const BenchResult& result, std::ostream& out);
void write_csv(const BenchResult& result, std::ostream& out);
void write_json(const BenchResult& result, std::ostream& out);
// Grouped bars, one group per net and one bar per configuration, height = fraction of roofline;
// legend, axis labels and a dashed line at 1.0. Every bar is a <rect class="bar"> with a <title>.
void write_svg(const BenchResult& result, std::ostream& out);
// Text escaped for SVG/XML content and attribute values.
std::string xml_escape(const std::string& text);

}  // namespace mf::tools::bench
