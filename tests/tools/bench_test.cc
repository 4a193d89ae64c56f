// mf bench through the binary: the JSON report's fields and hardware figures, the SVG chart (well
// formed, one bar per cell), and bad arguments (exit 1 with an "error: ..." line).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include "mf_cli.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

using mf::testing::MfRun;
using mf::testing::run_mf;
using mf::testing::slurp;

std::filesystem::path scratch_dir() {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mf_bench_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Small probes keep the suite quick; the figures stay real measurements.
const std::string kQuickProbe = " --triad-mib 32 --gemm-n 128 --probe-repeats 2";

// A minimal XML well-formedness check: one root, tags nest and close, attribute values quoted, no
// bare '<' or '&' in text. Returns "" or what is wrong; counts elements by tag in `counts`.
std::string check_xml(const std::string& xml, std::map<std::string, int>& counts) {
  std::vector<std::string> open;
  int roots = 0;
  size_t i = 0;
  auto fail = [&](const std::string& what) { return what + " at offset " + std::to_string(i); };
  while (i < xml.size()) {
    if (xml[i] != '<') {
      if (xml[i] == '&') {
        const size_t semi = xml.find(';', i);
        if (semi == std::string::npos || semi - i > 6) return fail("bare '&'");
      }
      if (open.empty() && !std::isspace(static_cast<unsigned char>(xml[i]))) {
        return fail("text outside the root element");
      }
      ++i;
      continue;
    }
    if (xml.compare(i, 5, "<?xml") == 0) {
      const size_t end = xml.find("?>", i);
      if (end == std::string::npos) return fail("unterminated declaration");
      i = end + 2;
      continue;
    }
    const bool closing = i + 1 < xml.size() && xml[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < xml.size() && (std::isalnum(static_cast<unsigned char>(xml[j])) || xml[j] == '-' ||
                              xml[j] == ':' || xml[j] == '_')) {
      ++j;
    }
    const std::string name = xml.substr(name_start, j - name_start);
    if (name.empty()) return fail("empty tag name");
    // Attributes: name="value" pairs until > or />.
    bool self_closing = false;
    while (true) {
      while (j < xml.size() && std::isspace(static_cast<unsigned char>(xml[j]))) ++j;
      if (j >= xml.size()) return fail("unterminated tag <" + name);
      if (xml[j] == '>') break;
      if (xml.compare(j, 2, "/>") == 0) {
        self_closing = true;
        ++j;
        break;
      }
      if (closing) return fail("attributes on a closing tag");
      const size_t eq = xml.find('=', j);
      if (eq == std::string::npos || xml[eq + 1] != '"')
        return fail("unquoted attribute in <" + name);
      const size_t end_quote = xml.find('"', eq + 2);
      if (end_quote == std::string::npos) return fail("unterminated attribute");
      if (xml.substr(eq + 2, end_quote - eq - 2).find('<') != std::string::npos) {
        return fail("'<' inside an attribute");
      }
      j = end_quote + 1;
    }
    i = j + 1;
    if (closing) {
      if (open.empty() || open.back() != name)
        return fail("</" + name + "> does not close the open tag");
      open.pop_back();
    } else {
      if (open.empty()) ++roots;
      ++counts[name];
      if (!self_closing) open.push_back(name);
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (roots != 1) return "expected one root element, found " + std::to_string(roots);
  return "";
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(BenchCliTest, JsonReportHasCellsAndHardwareFigures) {
  const MfRun run =
      run_mf("bench --nets chain --fusion 0 --jit O0 --iters 2 --format json" + kQuickProbe);
  ASSERT_EQ(run.code, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  ASSERT_TRUE(doc.contains("hardware"));
  ASSERT_EQ(doc["hardware"].size(), 2u);  // default --threads 1,2
  for (const auto& h : doc["hardware"]) {
    EXPECT_GT(h["bandwidth_bytes_per_s"].get<double>(), 0);
    EXPECT_GT(h["gemm_flops_per_s"].get<double>(), 0);
    EXPECT_GT(h["bandwidth_gbps"].get<double>(), 0);
    EXPECT_GT(h["gemm_gflops"].get<double>(), 0);
  }
  EXPECT_EQ(doc["iters"], 2);
  ASSERT_EQ(doc["nets"].size(), 1u);
  EXPECT_EQ(doc["nets"][0]["name"], "chain");
  // 16 floats in, the 16-float step weight, 16 floats out.
  EXPECT_DOUBLE_EQ(doc["nets"][0]["bytes"].get<double>(), 3 * 16 * 4);
  ASSERT_EQ(doc["cells"].size(), 2u);
  for (const auto& cell : doc["cells"]) {
    EXPECT_EQ(cell["net"], "chain");
    EXPECT_EQ(cell["fusion"], 0);
    EXPECT_EQ(cell["jit"], "O0");
    EXPECT_EQ(cell["iters"], 2);
    for (const char* field : {"median_ms", "min_ms", "max_ms", "bound_ms", "roofline_fraction"}) {
      EXPECT_GT(cell[field].get<double>(), 0) << field;
    }
    EXPECT_LE(cell["min_ms"].get<double>(), cell["median_ms"].get<double>());
    EXPECT_LE(cell["median_ms"].get<double>(), cell["max_ms"].get<double>());
    EXPECT_EQ(cell["bound_kind"], "memory");
    EXPECT_DOUBLE_EQ(cell["vs_fusion0"].get<double>(), 1.0);
    EXPECT_DOUBLE_EQ(cell["vs_jit_o0"].get<double>(), 1.0);
  }
  EXPECT_EQ(doc["cells"][0]["threads"], 1);
  EXPECT_EQ(doc["cells"][1]["threads"], 2);
  // Progress goes to stderr, one line per cell.
  EXPECT_NE(run.err.find("[1/2] chain fusion=0 jit=O0 threads=1"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("[2/2] chain fusion=0 jit=O0 threads=2"), std::string::npos) << run.err;
}

TEST(BenchCliTest, SvgHasOneBarPerCellAndIsWellFormed) {
  const auto svg = scratch_dir() / "bench.svg";
  const MfRun run = run_mf(
      "bench --nets chain,mlp --fusion 0,1 --jit O0,O1 --threads 1 --iters 1"
      " --format csv --svg " +
      svg.string() + kQuickProbe);
  ASSERT_EQ(run.code, 0) << run.err;
  // CSV: a header and one row per cell; mlp is bound by compute (its GEMM FLOPs).
  EXPECT_EQ(run.out.rfind("net,fusion,jit,threads,iters,median_ms", 0), 0u) << run.out;
  EXPECT_EQ(count_of(run.out, "\n"), 1u + 8u);
  EXPECT_NE(run.out.find(",compute,"), std::string::npos);
  const std::string text = slurp(svg);
  std::map<std::string, int> counts;
  EXPECT_EQ(check_xml(text, counts), "");
  EXPECT_EQ(counts["svg"], 1);
  EXPECT_EQ(count_of(text, "class=\"bar\""), 8u);     // 2 nets x 4 configurations
  EXPECT_EQ(count_of(text, "class=\"legend\""), 4u);  // one per configuration
  EXPECT_NE(text.find("fraction of roofline"), std::string::npos);
  EXPECT_NE(text.find(">fusion=1 jit=O1 threads=1<"), std::string::npos);
}

TEST(BenchCliTest, TableReadsAsFractionOfRoofline) {
  const MfRun run =
      run_mf("bench --nets chain --fusion 0,1 --jit O0,O2 --threads 1 --iters 1" + kQuickProbe);
  ASSERT_EQ(run.code, 0) << run.err;
  for (const char* text : {"memory bandwidth", "GB/s", "GFLOP/s", "median_ms", "roofline", "vs_f0",
                           "vs_O0", "minimal cost chain"}) {
    EXPECT_NE(run.out.find(text), std::string::npos) << text << "\n" << run.out;
  }
  EXPECT_EQ(count_of(run.out, "\nchain "), 4u) << run.out;
}

TEST(BenchCliTest, BadArgumentsExitOneWithAClearError) {
  const std::pair<const char*, const char*> cases[] = {
      {"--nets nope", "error: --nets: no sample network named 'nope'"},
      {"--fusion 5", "error: --fusion: opt_level 5 is out of range"},
      {"--jit O3", "error: --jit: 'O3' is not a jit_level"},
      {"--threads 0", "error: --threads: 0 is not a thread count"},
      {"--format xml", "error: --format: 'xml' is not a format"},
      {"--iters 0", "error: --iters must be at least 1"},
      {"--fusion 1,,2", "error: --fusion '1,,2' has an empty item"},
  };
  for (const auto& [args, message] : cases) {
    const std::string nets = std::string(args).starts_with("--nets") ? "" : "--nets chain ";
    const MfRun run = run_mf("bench " + nets + args);
    EXPECT_EQ(run.code, 1) << args;
    EXPECT_NE(run.err.find(message), std::string::npos) << args << ": " << run.err;
    EXPECT_EQ(run.err.find("measuring"), std::string::npos) << "validated before measuring";
  }
}

}  // namespace
