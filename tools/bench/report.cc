#include "tools/bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

namespace mf::tools::bench {
namespace {

std::string format(const char* fmt, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), fmt, value);
  return buffer;
}

std::string ratio_text(const std::optional<double>& ratio) {
  return ratio ? format("%.2fx", *ratio) : std::string("-");
}

template <typename T>
void add_unique(std::vector<T>& values, const T& value) {
  if (std::find(values.begin(), values.end(), value) == values.end()) values.push_back(value);
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string BenchCell::config() const {
  return "fusion=" + std::to_string(fusion) + " jit=" + jit + " threads=" + std::to_string(threads);
}

void compute_ratios(std::vector<BenchCell>& cells) {
  auto find = [&cells](const BenchCell& like, int fusion,
                       const std::string& jit) -> const BenchCell* {
    for (const BenchCell& c : cells) {
      if (c.net == like.net && c.threads == like.threads && c.fusion == fusion && c.jit == jit)
        return &c;
    }
    return nullptr;
  };
  for (BenchCell& cell : cells) {
    cell.roofline_fraction = cell.millis.median > 0 ? cell.bound_ms / cell.millis.median : 0;
    if (const BenchCell* base = find(cell, 0, cell.jit);
        base != nullptr && cell.millis.median > 0) {
      cell.vs_fusion0 = base->millis.median / cell.millis.median;
    }
    if (const BenchCell* base = find(cell, cell.fusion, "O0");
        base != nullptr && cell.millis.median > 0) {
      cell.vs_jit_o0 = base->millis.median / cell.millis.median;
    }
  }
}

void write_table(const BenchResult& result, std::ostream& out) {
  for (const HardwareRates& h : result.hardware) {
    out << "hardware threads=" << h.threads << ": memory bandwidth "
        << format("%.2f", h.bandwidth_bytes_per_s / 1e9) << " GB/s (triad, "
        << result.triad_bytes_per_array / (1 << 20) << " MiB per array), GEMM "
        << format("%.1f", h.gemm_flops_per_s / 1e9) << " GFLOP/s (float " << result.gemm_n
        << "^3), FMA peak " << format("%.1f", h.fma_flops_per_s / 1e9) << " GFLOP/s\n";
  }
  for (const NetInfo& net : result.nets) {
    out << "minimal cost " << net.name << ": " << format("%.3f", net.cost.bytes / 1e6)
        << " MB moved, " << format("%.3f", net.cost.flops / 1e9) << " GFLOP\n";
  }
  out << "median and spread over " << result.iters
      << " timed iterations (warm-up excluded); roofline = bound / median; vs_f0 and vs_O0 are "
         "speedups over fusion 0 and jit O0\n";
  char line[256];
  std::snprintf(line, sizeof(line), "%-12s %6s %4s %7s %10s %10s %10s %10s %10s %-7s %8s %7s %7s\n",
                "net", "fusion", "jit", "threads", "median_ms", "min_ms", "max_ms", "iqr_ms",
                "bound_ms", "bound", "roofline", "vs_f0", "vs_O0");
  out << line;
  for (const BenchCell& c : result.cells) {
    std::snprintf(line, sizeof(line),
                  "%-12s %6d %4s %7d %10.4g %10.4g %10.4g %10.4g %10.4g %-7s %8.3f %7s %7s\n",
                  c.net.c_str(), c.fusion, c.jit.c_str(), c.threads, c.millis.median, c.millis.min,
                  c.millis.max, c.millis.q3 - c.millis.q1, c.bound_ms, c.bound_kind.c_str(),
                  c.roofline_fraction, ratio_text(c.vs_fusion0).c_str(),
                  ratio_text(c.vs_jit_o0).c_str());
    out << line;
  }
}

void write_csv(const BenchResult& result, std::ostream& out) {
  out << "net,fusion,jit,threads,iters,median_ms,min_ms,q1_ms,q3_ms,max_ms,compile_ms,bound_ms,"
         "bound_kind,roofline_fraction,vs_fusion0,vs_jit_o0,bandwidth_gbps,gemm_gflops\n";
  auto optional_text = [](const std::optional<double>& v) { return v ? format("%.6g", *v) : ""; };
  for (const BenchCell& c : result.cells) {
    HardwareRates rates;
    for (const HardwareRates& h : result.hardware) {
      if (h.threads == c.threads) rates = h;
    }
    out << c.net << ',' << c.fusion << ',' << c.jit << ',' << c.threads << ',' << c.millis.count
        << ',' << format("%.6g", c.millis.median) << ',' << format("%.6g", c.millis.min) << ','
        << format("%.6g", c.millis.q1) << ',' << format("%.6g", c.millis.q3) << ','
        << format("%.6g", c.millis.max) << ',' << format("%.6g", c.compile_ms) << ','
        << format("%.6g", c.bound_ms) << ',' << c.bound_kind << ','
        << format("%.6g", c.roofline_fraction) << ',' << optional_text(c.vs_fusion0) << ','
        << optional_text(c.vs_jit_o0) << ',' << format("%.6g", rates.bandwidth_bytes_per_s / 1e9)
        << ',' << format("%.6g", rates.gemm_flops_per_s / 1e9) << '\n';
  }
}

void write_json(const BenchResult& result, std::ostream& out) {
  using Json = nlohmann::ordered_json;
  Json hardware = Json::array();
  for (const HardwareRates& h : result.hardware) {
    hardware.push_back({{"threads", h.threads},
                        {"bandwidth_bytes_per_s", h.bandwidth_bytes_per_s},
                        {"bandwidth_gbps", h.bandwidth_bytes_per_s / 1e9},
                        {"gemm_flops_per_s", h.gemm_flops_per_s},
                        {"gemm_gflops", h.gemm_flops_per_s / 1e9}});
  }
  Json nets = Json::array();
  for (const NetInfo& n : result.nets) {
    nets.push_back({{"name", n.name}, {"bytes", n.cost.bytes}, {"flops", n.cost.flops}});
  }
  Json cells = Json::array();
  for (const BenchCell& c : result.cells) {
    Json cell = {{"net", c.net},
                 {"fusion", c.fusion},
                 {"jit", c.jit},
                 {"threads", c.threads},
                 {"iters", c.millis.count},
                 {"median_ms", c.millis.median},
                 {"min_ms", c.millis.min},
                 {"q1_ms", c.millis.q1},
                 {"q3_ms", c.millis.q3},
                 {"max_ms", c.millis.max},
                 {"compile_ms", c.compile_ms},
                 {"bound_ms", c.bound_ms},
                 {"bound_kind", c.bound_kind},
                 {"roofline_fraction", c.roofline_fraction}};
    cell["vs_fusion0"] = c.vs_fusion0 ? Json(*c.vs_fusion0) : Json(nullptr);
    cell["vs_jit_o0"] = c.vs_jit_o0 ? Json(*c.vs_jit_o0) : Json(nullptr);
    cells.push_back(std::move(cell));
  }
  Json doc = {{"command", result.command},
              {"iters", result.iters},
              {"triad_bytes_per_array", result.triad_bytes_per_array},
              {"gemm_n", result.gemm_n},
              {"hardware", hardware},
              {"nets", nets},
              {"cells", cells}};
  out << doc.dump(2) << '\n';
}

void write_svg(const BenchResult& result, std::ostream& out) {
  std::vector<std::string> nets, configs;
  std::vector<int> fusions;
  for (const BenchCell& c : result.cells) {
    add_unique(nets, c.net);
    add_unique(configs, c.config());
    add_unique(fusions, c.fusion);
  }
  // Colour: hue by fusion level, lightness by the (jit, threads) variant within that level.
  std::map<std::string, std::string> colour;
  {
    static constexpr int kHues[] = {215, 30, 120, 355};
    std::map<int, std::vector<std::string>> by_fusion;
    std::map<std::string, int> fusion_of;
    for (const BenchCell& c : result.cells) {
      add_unique(by_fusion[c.fusion], c.config());
      fusion_of[c.config()] = c.fusion;
    }
    for (const auto& [fusion, members] : by_fusion) {
      for (size_t i = 0; i < members.size(); ++i) {
        const double lightness =
            members.size() == 1 ? 45.0 : 28.0 + 42.0 * double(i) / double(members.size() - 1);
        colour[members[i]] = "hsl(" + std::to_string(kHues[std::clamp(fusion, 0, 3)]) + ",60%," +
                             format("%.0f", lightness) + "%)";
      }
    }
  }

  const double bar_w =
      std::clamp(720.0 / double(std::max<size_t>(1, nets.size() * configs.size())), 4.0, 22.0);
  const double group_gap = 24, left = 70, top = 56, plot_h = 300, right = 20;
  const double group_w = bar_w * double(configs.size());
  const double plot_w = std::max(640.0, double(nets.size()) * (group_w + group_gap) + group_gap);
  const double legend_col_w = 210, legend_row_h = 18;
  const int legend_cols = std::max(1, int((plot_w + left) / legend_col_w));
  const int legend_rows = int((configs.size() + size_t(legend_cols) - 1) / size_t(legend_cols));
  const double width = left + plot_w + right;
  const double height = top + plot_h + 60 + legend_rows * legend_row_h + 20;

  double y_max = 1.0;
  for (const BenchCell& c : result.cells) y_max = std::max(y_max, c.roofline_fraction);
  y_max *= 1.1;
  const double step = y_max <= 1.2 ? 0.2 : y_max <= 3 ? 0.5 : std::ceil(y_max / 6);
  auto y_of = [&](double v) { return top + plot_h - v / y_max * plot_h; };

  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << format("%.0f", width)
      << "\" height=\"" << format("%.0f", height) << "\" viewBox=\"0 0 " << format("%.0f", width)
      << ' ' << format("%.0f", height) << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  out << "<rect x=\"0\" y=\"0\" width=\"" << format("%.0f", width) << "\" height=\""
      << format("%.0f", height) << "\" fill=\"white\"/>\n";
  std::string subtitle;
  for (const HardwareRates& h : result.hardware) {
    subtitle += (subtitle.empty() ? "" : "; ") + std::string("threads=") +
                std::to_string(h.threads) + ": " + format("%.1f", h.bandwidth_bytes_per_s / 1e9) +
                " GB/s, " + format("%.1f", h.gemm_flops_per_s / 1e9) + " GFLOP/s";
  }
  out << "<text x=\"" << left << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">mf bench: "
      << "fraction of roofline (higher is better)</text>\n";
  out << "<text x=\"" << left << "\" y=\"40\" fill=\"#555\">" << xml_escape(subtitle)
      << " (median of " << result.iters << " iterations)</text>\n";

  // Axes, grid and the roofline.
  for (double v = 0; v <= y_max + 1e-9; v += step) {
    const double y = y_of(v);
    out << "<line x1=\"" << left << "\" y1=\"" << format("%.1f", y) << "\" x2=\""
        << format("%.1f", left + plot_w) << "\" y2=\"" << format("%.1f", y)
        << "\" stroke=\"#e4e4e4\"/>\n";
    out << "<text x=\"" << left - 6 << "\" y=\"" << format("%.1f", y + 4)
        << "\" text-anchor=\"end\">" << format("%.2g", v) << "</text>\n";
  }
  out << "<line x1=\"" << left << "\" y1=\"" << format("%.1f", y_of(1.0)) << "\" x2=\""
      << format("%.1f", left + plot_w) << "\" y2=\"" << format("%.1f", y_of(1.0))
      << "\" stroke=\"#c00\" stroke-dasharray=\"6,4\"/>\n";
  out << "<text x=\"" << left + 4 << "\" y=\"" << format("%.1f", y_of(1.0) - 4)
      << "\" fill=\"#c00\">roofline (1.0)</text>\n";
  out << "<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\""
      << top + plot_h << "\" stroke=\"black\"/>\n";
  out << "<line x1=\"" << left << "\" y1=\"" << top + plot_h << "\" x2=\""
      << format("%.1f", left + plot_w) << "\" y2=\"" << top + plot_h << "\" stroke=\"black\"/>\n";
  out << "<text transform=\"translate(18," << format("%.1f", top + plot_h / 2)
      << ") rotate(-90)\" text-anchor=\"middle\">fraction of roofline (bound / median "
         "time)</text>\n";
  out << "<text x=\"" << format("%.1f", left + plot_w / 2) << "\" y=\"" << top + plot_h + 40
      << "\" text-anchor=\"middle\">network</text>\n";

  // Bars, grouped by net.
  for (size_t g = 0; g < nets.size(); ++g) {
    const double x0 = left + group_gap + double(g) * (group_w + group_gap);
    out << "<g class=\"net\" data-net=\"" << xml_escape(nets[g]) << "\">\n";
    for (const BenchCell& c : result.cells) {
      if (c.net != nets[g]) continue;
      const size_t index =
          size_t(std::find(configs.begin(), configs.end(), c.config()) - configs.begin());
      const double x = x0 + double(index) * bar_w;
      const double y = y_of(c.roofline_fraction);
      out << "<rect class=\"bar\" x=\"" << format("%.1f", x) << "\" y=\"" << format("%.1f", y)
          << "\" width=\"" << format("%.1f", std::max(1.0, bar_w - 1)) << "\" height=\""
          << format("%.1f", top + plot_h - y) << "\" fill=\"" << colour[c.config()] << "\">"
          << "<title>" << xml_escape(c.net + " " + c.config()) << ": median "
          << format("%.4g", c.millis.median) << " ms, " << format("%.3f", c.roofline_fraction)
          << " of roofline</title></rect>\n";
    }
    out << "<text x=\"" << format("%.1f", x0 + group_w / 2) << "\" y=\"" << top + plot_h + 18
        << "\" text-anchor=\"middle\">" << xml_escape(nets[g]) << "</text>\n";
    out << "</g>\n";
  }

  // Legend.
  const double legend_top = top + plot_h + 58;
  for (size_t i = 0; i < configs.size(); ++i) {
    const double x = 10 + double(i % size_t(legend_cols)) * legend_col_w;
    const double y = legend_top + double(i / size_t(legend_cols)) * legend_row_h;
    out << "<rect class=\"legend\" x=\"" << format("%.1f", x) << "\" y=\"" << format("%.1f", y)
        << "\" width=\"12\" height=\"12\" fill=\"" << colour[configs[i]] << "\"/>\n";
    out << "<text x=\"" << format("%.1f", x + 17) << "\" y=\"" << format("%.1f", y + 10) << "\">"
        << xml_escape(configs[i]) << "</text>\n";
  }
  out << "</svg>\n";
}

}  // namespace mf::tools::bench
