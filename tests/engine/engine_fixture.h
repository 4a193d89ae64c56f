#pragma once
// Engine tests start from the default context and leave no pending asynchronous error behind.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "context/context.h"
#include "context/parallel_context.h"
#include "engine/eager/dispatch.h"
#include "engine/graph/graph_mode.h"
#include "engine/models/registry.h"
#include "tests/unique_temp_path.h"

namespace mf::testing {

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_all(); }
  // An asynchronous error still pending at the end belongs to this test: it fails the test (a
  // test that expects one must sync and check it itself).
  void TearDown() override {
    try {
      engine::sync();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "an asynchronous error was left pending at the end of the test: "
                    << e.what();
    } catch (...) {
      ADD_FAILURE()
          << "an asynchronous non-standard exception was left pending at the end of the test";
    }
    reset_all();
  }
  static void reset_all() {
    context::reset();
    context::reset_auto_parallel_context();
  }
};

// An EngineTest with a fresh scratch directory, dir_, removed afterwards.
class EngineTestWithDir : public EngineTest {
 protected:
  std::filesystem::path dir_ = unique_temp_path("mf_engine_test");
  void SetUp() override {
    EngineTest::SetUp();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    EngineTest::TearDown();  // syncs first: no queued op may still write into dir_
    std::filesystem::remove_all(dir_);
  }
};

// What one run of a sample network gave, and what its cell says it ran (executor, levels, dumps;
// all empty in PYNATIVE mode, where nothing is compiled).
struct NetRun {
  std::vector<double> outputs;
  engine::GraphRunReport report;
};

// Sample network `name` (seed 0) run on its own input under `settings` (applied on top of the
// current context), synchronized: the outputs and the cell's report.
inline NetRun run_net_reported(const std::string& name, const context::Json& settings) {
  context::set(settings);
  const models::NetSpec& spec = models::find_net(name);
  auto net = spec.make(0);
  NetRun run;
  run.outputs = (*net)(spec.make_input(0)).to_doubles();
  engine::sync();
  run.report = net->graph_report();
  return run;
}

// The same, outputs only.
inline std::vector<double> run_net(const std::string& name, const context::Json& settings) {
  return run_net_reported(name, settings).outputs;
}

// "" when `got` and `want` hold the same bytes, else the first differing element. Compares bytes,
// not values: +0 and -0 differ, and so do two NaNs with different bits.
inline std::string first_byte_difference(const std::vector<double>& got,
                                         const std::vector<double>& want) {
  if (got.size() != want.size()) {
    return std::to_string(got.size()) + " elements, expected " + std::to_string(want.size());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(double)) != 0) {
      return "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " +
             std::to_string(want[i]);
    }
  }
  return "";
}

}  // namespace mf::testing
