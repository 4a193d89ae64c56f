#include "runtime/profile_report.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "base/file_reader.h"

namespace mf::runtime {
namespace {

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// A JSON string literal: quotes, backslashes and control bytes escaped.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

double us(int64_t ns) {
  return double(ns) / 1e3;
}

// One kernel: an op over one list of input types, with its runs summed.
struct KernelRow {
  std::string op, shapes;
  int64_t count = 0, total_ns = 0;
  double flops = 0, bytes = 0;  // summed over runs
};

// The arithmetic roof: the FMA peak, or the GEMM rate when that was not measured.
double compute_peak(const HardwareRates& m) {
  return m.fma_flops_per_s > 0 ? m.fma_flops_per_s : m.gemm_flops_per_s;
}

// The roofline bound in FLOP/s of a kernel doing `flops` over `bytes`, and whether the bandwidth
// (rather than the GEMM peak) sets it.
std::pair<double, bool> bound(double flops, double bytes, const HardwareRates& m) {
  const double peak = compute_peak(m);
  const double by_memory = bytes > 0 ? flops / bytes * m.bandwidth_bytes_per_s : peak;
  return by_memory < peak ? std::pair{by_memory, true} : std::pair{peak, false};
}

std::vector<KernelRow> kernel_rows(const Profile& p) {
  std::map<std::pair<std::string, std::string>, KernelRow> rows;
  for (const ProfileEvent& e : p.events) {
    if (e.kind != ProfileEventKind::kKernel) continue;
    KernelRow& r = rows[{e.name, e.shapes}];
    r.op = e.name;
    r.shapes = e.shapes;
    ++r.count;
    r.total_ns += e.duration_ns;
    r.flops += e.flops;
    r.bytes += e.bytes;
  }
  std::vector<KernelRow> out;
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  std::sort(out.begin(), out.end(),
            [](const KernelRow& a, const KernelRow& b) { return a.total_ns > b.total_ns; });
  return out;
}

// The time the summary's shares are of: the iterations' spans when iterations were marked,
// otherwise the whole profile.
int64_t iterations_ns(const Profile& p, int* count) {
  int64_t total = 0;
  *count = 0;
  for (const ProfileEvent& e : p.events) {
    if (e.kind != ProfileEventKind::kIteration) continue;
    total += e.duration_ns;
    ++*count;
  }
  return *count > 0 ? total : p.duration_ns;
}

}  // namespace

std::string profile_trace_json(const Profile& p, const HardwareRates& m) {
  std::string out =
      "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_events\":" + std::to_string(p.dropped) +
      ",\"fma_peak_gflops\":" + format("%.6g", compute_peak(m) / 1e9) +
      ",\"gemm_gflops\":" + format("%.6g", m.gemm_flops_per_s / 1e9) +
      ",\"bandwidth_gbps\":" + format("%.6g", m.bandwidth_bytes_per_s / 1e9) +
      ",\"threads\":" + std::to_string(m.threads) + "},\"traceEvents\":[\n";
  // Process 1: the engine's threads (and the pool's memory counter); process 2: compiling (each
  // pass, and the trace, cache lookup and store, and kernel preparation).
  out +=
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":"
      "\"modeflow\"}},\n";
  out +=
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"tid\":0,\"args\":{\"name\":"
      "\"compile\"}}";
  for (size_t t = 0; t < p.thread_names.size(); ++t) {
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(t) +
           ",\"args\":{\"name\":" + json_string(p.thread_names[t]) + "}}";
  }
  for (const ProfileEvent& e : p.events) {
    if (e.kind == ProfileEventKind::kMemory) {
      out += ",\n{\"name\":\"memory\",\"ph\":\"C\",\"pid\":1,\"ts\":" +
             format("%.3f", us(e.start_ns)) +
             ",\"args\":{\"reserved MiB\":" + format("%.3f", e.bytes / double(1 << 20)) + "}}";
      continue;
    }
    const bool pass = e.kind == ProfileEventKind::kPass || e.kind == ProfileEventKind::kPhase;
    const char* category = e.kind == ProfileEventKind::kKernel   ? "kernel"
                           : e.kind == ProfileEventKind::kPass   ? "pass"
                           : e.kind == ProfileEventKind::kPhase  ? "compile"
                           : e.kind == ProfileEventKind::kWorker ? "worker"
                                                                 : "iteration";
    out += ",\n{\"name\":" + json_string(e.name) + ",\"cat\":\"" + category +
           "\",\"ph\":\"X\",\"pid\":" + (pass ? "2" : "1") +
           ",\"tid\":" + std::to_string(e.thread) + ",\"ts\":" + format("%.3f", us(e.start_ns)) +
           ",\"dur\":" + format("%.3f", us(e.duration_ns));
    if (e.kind == ProfileEventKind::kKernel) {
      const double seconds = std::max(double(e.duration_ns), 1.0) / 1e9;
      out += ",\"args\":{\"mode\":" + json_string(e.mode) + ",\"inputs\":" + json_string(e.shapes) +
             ",\"flops\":" + format("%.0f", e.flops) + ",\"bytes\":" + format("%.0f", e.bytes) +
             ",\"gflops_per_s\":" + format("%.4g", e.flops / seconds / 1e9) +
             ",\"gb_per_s\":" + format("%.4g", e.bytes / seconds / 1e9) + "}";
    } else if (e.kind == ProfileEventKind::kWorker) {
      out += ",\"args\":{\"chunks\":" + std::to_string(e.chunks) + "}";
    } else if (!e.mode.empty()) {
      out += ",\"args\":{\"mode\":" + json_string(e.mode) + "}";
    }
    out += "}";
  }
  return out + "\n]}\n";
}

std::string profile_summary(const Profile& p, const HardwareRates& m) {
  int iterations = 0;
  const int64_t base_ns = std::max<int64_t>(iterations_ns(p, &iterations), 1);
  std::map<std::string, std::tuple<int64_t, int64_t>> by_op;  // op -> (count, total ns)
  int64_t kernel_ns = 0;
  size_t kernels = 0;
  for (const ProfileEvent& e : p.events) {
    if (e.kind != ProfileEventKind::kKernel) continue;
    auto& [count, total] = by_op[e.name];
    ++count;
    total += e.duration_ns;
    kernel_ns += e.duration_ns;
    ++kernels;
  }
  // The time at least one kernel was running (kernels on several threads overlap).
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const ProfileEvent& e : p.events) {
    if (e.kind == ProfileEventKind::kKernel)
      spans.emplace_back(e.start_ns, e.start_ns + e.duration_ns);
  }
  std::sort(spans.begin(), spans.end());
  int64_t covered_ns = 0, reach = INT64_MIN;
  for (const auto& [begin, end] : spans) {
    if (end <= reach) continue;
    covered_ns += end - std::max(begin, reach);
    reach = end;
  }
  std::string out = "# Profile\n\n";
  out += std::to_string(kernels) + " kernel runs in " + std::to_string(iterations) +
         " iteration(s), " + format("%.3f", double(kernel_ns) / 1e6) +
         " ms of kernels summed over threads; a kernel was running during " +
         format("%.1f", 100.0 * double(covered_ns) / double(base_ns)) + "% of " +
         (iterations > 0 ? "the iterations' " : "the profile's ") +
         format("%.3f", double(base_ns) / 1e6) + " ms.";
  if (p.dropped > 0) {
    out += " **" + std::to_string(p.dropped) +
           " events were dropped** (past the profiler's event limit): the tables count only "
           "those kept.";
  }
  out += "\n\nThe machine, measured in this run at " + std::to_string(m.threads) +
         " thread(s): FMA peak " + format("%.1f", compute_peak(m) / 1e9) +
         " GFLOP/s (an Eigen GEMM reaches " + format("%.1f", m.gemm_flops_per_s / 1e9) +
         "), memory bandwidth " + format("%.1f", m.bandwidth_bytes_per_s / 1e9) +
         " GB/s.\n\n## Ops by total time\n\n| op | count | total ms | mean µs | share |\n"
         "|---|---:|---:|---:|---:|\n";
  std::vector<std::pair<std::string, std::tuple<int64_t, int64_t>>> ops(by_op.begin(), by_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    return std::get<1>(a.second) > std::get<1>(b.second);
  });
  for (const auto& [op, stats] : ops) {
    const auto [count, total] = stats;
    out += "| " + op + " | " + std::to_string(count) + " | " + format("%.3f", double(total) / 1e6) +
           " | " + format("%.1f", us(total) / double(count)) + " | " +
           format("%.1f", 100.0 * double(total) / double(base_ns)) + "% |\n";
  }
  out +=
      "\n## Kernels against the machine\n\nEach op over one list of input types. The bound is "
      "the lower of the FMA peak and the bandwidth times the kernel's FLOPs per byte (its "
      "roofline); \"of bound\" is how much of it the kernel reached.\n\n"
      "| op | inputs | runs | mean µs | GFLOP/s | GB/s | FLOP/byte | bound by | of bound |\n"
      "|---|---|---:|---:|---:|---:|---:|---|---:|\n";
  for (const KernelRow& r : kernel_rows(p)) {
    const double seconds = std::max(double(r.total_ns), 1.0) / 1e9;
    const double rate = r.flops / seconds;
    const auto [limit, memory] = bound(r.flops, r.bytes, m);
    out += "| " + r.op + " | " + r.shapes + " | " + std::to_string(r.count) + " | " +
           format("%.1f", us(r.total_ns) / double(r.count)) + " | " + format("%.2f", rate / 1e9) +
           " | " + format("%.2f", r.bytes / seconds / 1e9) + " | " +
           format("%.3g", r.bytes > 0 ? r.flops / r.bytes : 0.0) + " | " +
           (memory ? "memory" : "compute") + " | " +
           format("%.1f", limit > 0 ? 100.0 * rate / limit : 0.0) + "% |\n";
  }
  return out;
}

std::string profile_roofline_svg(const Profile& p, const HardwareRates& m) {
  // Log axes: FLOP/byte from 1e-2 to 1e3, GFLOP/s from 1e-2 to twice the peak.
  constexpr double kWidth = 720, kHeight = 480, kLeft = 70, kBottom = 50, kTop = 20, kRight = 20;
  const double peak = std::max(compute_peak(m) / 1e9, 1e-3);
  const double x_lo = -2, x_hi = 3, y_lo = -2, y_hi = std::log10(peak * 2);
  const auto px = [&](double intensity) {
    const double v = std::clamp(std::log10(std::max(intensity, 1e-9)), x_lo, x_hi);
    return kLeft + (v - x_lo) / (x_hi - x_lo) * (kWidth - kLeft - kRight);
  };
  const auto py = [&](double gflops) {
    const double v = std::clamp(std::log10(std::max(gflops, 1e-9)), y_lo, y_hi);
    return kHeight - kBottom - (v - y_lo) / (y_hi - y_lo) * (kHeight - kBottom - kTop);
  };
  std::string out =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"480\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"720\" height=\"480\" fill=\"white\"/>\n";
  out +=
      "<text x=\"360\" y=\"472\" text-anchor=\"middle\">FLOP per byte (log)</text>\n"
      "<text x=\"16\" y=\"240\" transform=\"rotate(-90 16 240)\" text-anchor=\"middle\">"
      "GFLOP/s (log)</text>\n";
  // The roof: bandwidth x intensity up to the peak.
  std::string roof;
  for (int i = 0; i <= 100; ++i) {
    const double x = std::pow(10.0, x_lo + (x_hi - x_lo) * i / 100.0);
    const double y = std::min(peak, x * m.bandwidth_bytes_per_s / 1e9);
    roof += (i == 0 ? "M" : " L") + format("%.1f", px(x)) + "," + format("%.1f", py(y));
  }
  out += "<path d=\"" + roof + "\" fill=\"none\" stroke=\"black\" stroke-width=\"2\"/>\n";
  for (int e = int(x_lo); e <= int(x_hi); ++e) {
    out += "<text x=\"" + format("%.1f", px(std::pow(10.0, e))) + "\" y=\"" +
           format("%.1f", kHeight - kBottom + 16) + "\" text-anchor=\"middle\">1e" +
           std::to_string(e) + "</text>\n";
  }
  for (int e = int(y_lo); e <= int(std::floor(y_hi)); ++e) {
    out += "<text x=\"" + format("%.1f", kLeft - 6) + "\" y=\"" +
           format("%.1f", py(std::pow(10.0, e))) + "\" text-anchor=\"end\">1e" + std::to_string(e) +
           "</text>\n";
  }
  for (const KernelRow& r : kernel_rows(p)) {
    const double seconds = std::max(double(r.total_ns), 1.0) / 1e9;
    const double intensity = r.bytes > 0 ? r.flops / r.bytes : 0;
    std::string title = r.op + " " + r.shapes;
    std::string escaped;
    for (char c : title) {
      escaped += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
    }
    out += "<circle cx=\"" + format("%.1f", px(intensity)) + "\" cy=\"" +
           format("%.1f", py(r.flops / seconds / 1e9)) +
           "\" r=\"4\" fill=\"steelblue\" fill-opacity=\"0.6\"><title>" + escaped +
           "</title></circle>\n";
  }
  return out + "</svg>\n";
}

void write_profile(const std::filesystem::path& dir, const Profile& p, const HardwareRates& m) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MF_CHECK(!ec && std::filesystem::is_directory(dir), InvalidArgument,
           "cannot write the profile into '", echo(dir.string()),
           "': ", ec ? ec.message() : std::string("it is not a directory"));
  write_file_atomically(dir / "trace.json", profile_trace_json(p, m), "profile trace");
  write_file_atomically(dir / "summary.md", profile_summary(p, m), "profile summary");
  write_file_atomically(dir / "roofline.svg", profile_roofline_svg(p, m), "profile roofline");
}

HardwareRates measure_machine_for_profile(int threads) {
  HardwareProbe probe;
  probe.triad_bytes_per_array = size_t{64} << 20;
  probe.gemm_n = 512;
  probe.repeats = 3;
  return measure_hardware(threads, probe);
}

}  // namespace mf::runtime
