// ONNX's own backend node tests (Debian package libonnx-testdata: one directory per case with
// model.onnx and test_data_set_0/{input,output}_N.pb) as the importer's conformance suite. Every
// case the importer accepts runs in PYNATIVE and GRAPH mode and must give ONNX's answers.
//
// The suite is counted, so it cannot pass by losing cases: the cases expected to pass are listed in
// tests/data/onnx_conformance_passing.txt, and a listed case that is rejected, fails or is missing
// fails the test, as does a case that passes without being listed (add it: the list only grows). A
// rejection must be Unsupported; any other error (a valid model called damaged or invalid) fails
// the test with the case's name. Without the package the test skips, except under CI (CI=true),
// where tools/install-deps.sh installs it and its absence is a failure.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "context/context.h"
#include "engine/eager/ir_runner.h"
#include "engine/io/onnx/importer.h"
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

// The committed list of cases expected to pass, one name a line ('#' starts a comment).
std::set<std::string> expected_passing() {
  const fs::path file = fs::path(MF_TEST_DATA_DIR) / "onnx_conformance_passing.txt";
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "cannot read " << file;
  std::set<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line);
  }
  return names;
}

bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

class OnnxConformance : public testing::EngineTest {};

TEST_F(OnnxConformance, BackendNodeTests) {
  const fs::path root = node_test_dir();
  if (!fs::is_directory(root)) {
    const std::string why = "ONNX backend test data not found at " + root.string() +
                            "; install the Debian package libonnx-testdata "
                            "(tools/install-deps.sh) or set MF_ONNX_TEST_DATA";
    if (under_ci()) FAIL() << why << " (CI=true: the conformance suite must run)";
    GTEST_SKIP() << why;
  }
  const std::set<std::string> expected = expected_passing();
  // Pinned to the list: a truncated list, or a case that stops being attempted, fails here.
  ASSERT_EQ(expected.size(), 746u)
      << "the expected-passing list changed: update this count with it";
  std::vector<fs::path> cases;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (fs::exists(entry.path() / "model.onnx")) cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());

  int attempted = 0, passed = 0, unsupported = 0;
  std::set<std::string> passed_names;
  std::vector<std::string> failures;
  for (const fs::path& dir : cases) {
    const std::string name = dir.filename().string();
    onnx::ImportedModel model;
    std::map<std::string, Tensor> feed;
    std::vector<Tensor> expected_outputs;
    try {
      const fs::path data = dir / "test_data_set_0";
      // Read every input that is a TensorProto; a case whose inputs are sequences or optionals
      // has files that are not, and its model must then be rejected as Unsupported on import.
      std::vector<std::pair<std::string, Tensor>> inputs;
      std::string unreadable_input;
      for (const fs::path& f : numbered(data, "input")) {
        try {
          std::string tensor_name;
          Tensor t = onnx::read_tensor_proto(f, &tensor_name);
          inputs.emplace_back(tensor_name, t);
        } catch (const Error& e) {
          if (unreadable_input.empty()) unreadable_input = f.filename().string() + ": " + e.what();
        }
      }
      // Integer inputs of the backend tests are shapes, axes and indices that exporters write as
      // constants: freeze them, so the cases test the ops rather than data-dependent shapes.
      onnx::ImportOptions options;
      // Any other input an op needs as a constant (Resize's scales, CumSum's axis) is read from
      // the case's value, as an export would have written it, and still fed as an input.
      for (const auto& [input_name, t] : inputs) {
        if (!input_name.empty() && t.dtype() == DType::kInt64) {
          options.frozen_inputs[input_name] = t;
        } else if (!input_name.empty()) {
          options.input_values[input_name] = t;
        }
        // Inputs declared with dynamic dimensions are imported for the case's shapes.
        if (!input_name.empty()) options.input_shapes[input_name] = t.shape();
      }
      model = onnx::import_onnx_model(dir / "model.onnx", options);
      if (!unreadable_input.empty()) {
        failures.push_back(
            name + ": the model imports but a test input does not read: " + unreadable_input);
        continue;
      }
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
        expected_outputs.push_back(onnx::read_tensor_proto(f));
      }
    } catch (const Error& e) {
      if (std::getenv("MF_ONNX_VERBOSE")) {
        std::printf("  rejected %s (%s): %s\n", name.c_str(),
                    std::string(error_kind_name(e.kind())).c_str(), e.what());
      }
      if (e.kind() != ErrorKind::kUnsupported) {
        // Valid ONNX beyond the importer is Unsupported; anything else calls a valid model
        // damaged or invalid.
        failures.push_back(name + ": rejected as " + std::string(error_kind_name(e.kind())) +
                           " (only Unsupported may reject a backend case): " + e.what());
      } else {
        ++unsupported;
        if (expected.count(name)) failures.push_back(name + ": listed as passing, now " + e.what());
      }
      continue;
    }
    ++attempted;
    std::string failure;
    for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
      context::set({{"mode", mode}});
      try {
        engine::IrRunner runner(model.graph->clone());
        const auto outputs = runner.run(feed, 0);
        if (outputs.size() != expected_outputs.size()) {
          failure = std::string(mode) + ": " + std::to_string(outputs.size()) +
                    " outputs, expected " + std::to_string(expected_outputs.size());
        }
        for (size_t k = 0; failure.empty() && k < outputs.size(); ++k) {
          const std::string diff = compare(outputs[k].second, expected_outputs[k]);
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
      passed_names.insert(name);
      if (!expected.count(name)) {
        failures.push_back(name +
                           ": passes but is not in tests/data/onnx_conformance_passing.txt;"
                           " add it (the list only grows)");
      }
    } else {
      failures.push_back(name + ": " + failure);
    }
  }
  for (const std::string& name : expected) {
    if (!std::count_if(cases.begin(), cases.end(),
                       [&](const fs::path& dir) { return dir.filename() == name; })) {
      failures.push_back(name + ": listed as passing but not in the test data at " + root.string());
    }
  }
  std::printf(
      "onnx backend node tests: %d passed of %d attempted, %d rejected as Unsupported, "
      "%zu expected to pass\n",
      passed, attempted, unsupported, expected.size());
  for (const std::string& f : failures) std::printf("  FAILED %s\n", f.c_str());
  EXPECT_TRUE(failures.empty()) << failures.size() << " cases failed (listed above)";
  EXPECT_EQ(size_t(passed), expected.size());
}

}  // namespace
}  // namespace mf
