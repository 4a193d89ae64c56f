// ONNX's own backend node tests (Debian package libonnx-testdata: one directory per case with
// model.onnx and test_data_set_0/{input,output}_N.pb) as the importer's conformance suite. Every
// case the importer accepts runs in PYNATIVE and GRAPH mode and must give ONNX's answers; a case
// the importer rejects counts as skipped. Skips as a whole when the package is not installed.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "context/context.h"
#include "engine/ir_runner.h"
#include "engine/onnx/importer.h"
#include "tests/engine/engine_fixture.h"

namespace mf {
namespace {

namespace fs = std::filesystem;

fs::path node_test_dir() {
  if (const char* env = std::getenv("MF_ONNX_TEST_DATA")) return env;
  return "/usr/share/libonnx-testdata/data/node";
}

// The numbered .pb files of one kind ("input" / "output") in ascending index order.
std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path f = dir / (prefix + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(f)) break;
    files.push_back(f);
  }
  return files;
}

// "" when `got` matches `want` within 1e-4 relative + absolute (exactly for integers and bools).
std::string compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return "dtype " + std::string(ir::dtype_name(got.dtype())) + ", expected " +
           std::string(ir::dtype_name(want.dtype()));
  }
  if (got.shape() != want.shape()) {
    return "shape " + ir::shape_to_string(got.shape()) + ", expected " +
           ir::shape_to_string(want.shape());
  }
  const std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  const bool exact = !ir::is_floating(want.dtype());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    if (g[i] == w[i]) continue;
    const double bound = exact ? 0.0 : 1e-4 + 1e-4 * std::abs(w[i]);
    if (!(std::abs(g[i] - w[i]) <= bound)) {
      return "element " + std::to_string(i) + " is " + std::to_string(g[i]) + ", expected " +
             std::to_string(w[i]);
    }
  }
  return "";
}

class OnnxConformance : public testing::EngineTest {};

TEST_F(OnnxConformance, BackendNodeTests) {
  const fs::path root = node_test_dir();
  if (!fs::is_directory(root)) {
    GTEST_SKIP() << "ONNX backend test data not found at " << root
                 << "; install the Debian package libonnx-testdata (tools/install-deps.sh) or set "
                    "MF_ONNX_TEST_DATA";
  }
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (fs::exists(entry.path() / "model.onnx")) cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());

  int attempted = 0, passed = 0, skipped = 0;
  std::map<std::string, int> skip_kinds;
  std::vector<std::string> failures;
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    onnx::ImportedModel model;
    std::map<std::string, Tensor> feed;
    std::vector<Tensor> expected;
    try {
      const fs::path data = dir / "test_data_set_0";
      std::vector<std::pair<std::string, Tensor>> inputs;
      for (const fs::path& f : numbered(data, "input")) {
        std::string tensor_name;
        Tensor t = onnx::read_tensor_proto(f, &tensor_name);
        inputs.emplace_back(tensor_name, t);
      }
      // Integer inputs of the backend tests are shapes, axes and indices that exporters write as
      // constants: freeze them, so the cases test the ops rather than data-dependent shapes.
      onnx::ImportOptions options;
      for (const auto& [input_name, t] : inputs) {
        if (!input_name.empty() && t.dtype() == DType::kInt64) {
          options.frozen_inputs[input_name] = t;
        }
      }
      model = onnx::import_onnx_model(dir / "model.onnx", options);
      // The remaining inputs pair with the graph inputs by name when named, by position otherwise.
      size_t position = 0;
      for (const auto& [input_name, t] : inputs) {
        if (options.frozen_inputs.count(input_name)) continue;
        auto named = std::find(model.onnx_inputs.begin(), model.onnx_inputs.end(), input_name);
        const size_t k =
            named != model.onnx_inputs.end() ? size_t(named - model.onnx_inputs.begin()) : position;
        ++position;
        if (k >= model.inputs.size()) throw Error(ErrorKind::kUnsupported, "extra test input");
        feed[model.inputs[k]] = t;
      }
      // Optional inputs the case leaves out would be filled with random values: not comparable.
      if (feed.size() != model.inputs.size()) {
        throw Error(ErrorKind::kUnsupported, "fewer test inputs than graph inputs");
      }
      for (const auto& [w, t] : model.weights) feed[w] = t;
      for (const fs::path& f : numbered(data, "output")) {
        expected.push_back(onnx::read_tensor_proto(f));
      }
    } catch (const Error& e) {
      if (std::getenv("MF_ONNX_VERBOSE")) std::printf("  skipped %s: %s\n", name.c_str(), e.what());
      ++skipped;
      ++skip_kinds[std::string(error_kind_name(e.kind()))];
      continue;
    }
    ++attempted;
    std::string failure;
    for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
      context::set({{"mode", mode}});
      try {
        engine::IrRunner runner(model.graph->clone());
        const auto outputs = runner.run(feed, 0);
        if (outputs.size() != expected.size()) {
          failure = std::string(mode) + ": " + std::to_string(outputs.size()) +
                    " outputs, expected " + std::to_string(expected.size());
        }
        for (size_t k = 0; failure.empty() && k < outputs.size(); ++k) {
          const std::string diff = compare(outputs[k].second, expected[k]);
          if (!diff.empty())
            failure = std::string(mode) + ": output " + std::to_string(k) + ": " + diff;
        }
      } catch (const Error& e) {
        failure = std::string(mode) + ": " + e.what();
      }
      engine::sync();
      if (!failure.empty()) break;
    }
    context::reset();
    if (failure.empty()) {
      ++passed;
    } else {
      failures.push_back(name + ": " + failure);
    }
  }
  std::string kinds;
  for (const auto& [kind, n] : skip_kinds) kinds += " " + kind + "=" + std::to_string(n);
  std::printf("onnx backend node tests: %d passed of %d attempted (%d skipped as unsupported:%s)\n",
              passed, attempted, skipped, kinds.c_str());
  for (const std::string& f : failures) std::printf("  FAILED %s\n", f.c_str());
  EXPECT_TRUE(failures.empty()) << failures.size() << " supported cases gave wrong answers";
  EXPECT_GT(passed, 0);
}

}  // namespace
}  // namespace mf
