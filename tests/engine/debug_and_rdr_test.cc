// debug_level=DEBUG (source locations in every dump, the failing graph written as .ir beside the
// error) and the Running Data Recorder beyond cells: .ir runs and PYNATIVE failures.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "context/context.h"
#include "context/parallel_context.h"
#include "engine/engine_state.h"
#include "engine/graph/driver.h"
#include "engine/graph/trace.h"
#include "engine/models/registry.h"
#include "engine/ops.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "tests/tools/mf_cli.h"

namespace mf::engine {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string slurp(const fs::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<fs::path> files_in(const fs::path& dir, std::string_view prefix) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().starts_with(prefix)) out.push_back(entry.path());
  }
  return out;
}

class DebugAndRdrTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context::reset();
    dir_ = fs::temp_directory_path() / ("mf_debug_rdr_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    context::reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // An env_config_path file turning the recorder on, reports to dir_/rdr.
  std::string rdr_config() {
    const fs::path file = dir_ / "env.json";
    std::ofstream(file) << R"({"rdr": {"enable": true, "mode": 1, "path": ")"
                        << (dir_ / "rdr").string() << R"("}})";
    return file.string();
  }
  fs::path dir_;
};

// A pass that fails, as a broken rewrite would.
class Throws final : public passes::Pass {
 public:
  std::string_view name() const override { return "test-throws"; }
  bool run(ir::Graph&) override { MF_FAIL(Internal, "deliberate failure"); }
};

std::string compile_error(const std::string& debug_level, const fs::path& dir) {
  context::set({{"debug_level", debug_level}, {"save_graphs_path", dir.string()}});
  const auto policy = current_policy();
  const models::NetSpec& spec = models::find_net("mlp");
  auto cell = spec.make(0);
  TraceResult trace = Tracer::trace(*cell, spec.make_input(0), 100, true);
  DriverOptions options = driver_options(*policy, "mlp");
  options.compile.extra_passes.push_back([] { return std::make_unique<Throws>(); });
  try {
    compile_graph(std::move(trace.graph), options.compile);
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST_F(DebugAndRdrTest, DebugWritesTheGraphAFailingPassLeftAndTheErrorNamesIt) {
  const std::string message = compile_error("DEBUG", dir_);
  const fs::path file = dir_ / "mlp_failed_in_test-throws.ir";
  EXPECT_THAT(message, HasSubstr("deliberate failure"));
  EXPECT_THAT(message, HasSubstr("the failing graph is in " + file.string()));
  ASSERT_TRUE(fs::exists(file));
  const std::string text = slurp(file);
  EXPECT_THAT(text, HasSubstr("# scope: Default/"));
  EXPECT_THAT(text, HasSubstr("# location: "));
  EXPECT_NE(ir::parse_graph(text, file.string()), nullptr);  // and it parses back
}

TEST_F(DebugAndRdrTest, ReleaseWritesNoFailingGraph) {
  const std::string message = compile_error("RELEASE", dir_);
  EXPECT_THAT(message, HasSubstr("deliberate failure"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("the failing graph is in")));
  EXPECT_TRUE(files_in(dir_, "mlp_failed").empty());
}

TEST_F(DebugAndRdrTest, DebugDumpsCarrySourceLocationsAtEveryLevel) {
  for (const std::string level : {"RELEASE", "DEBUG"}) {
    SCOPED_TRACE(level);
    const fs::path out = dir_ / level;
    context::set({{"debug_level", level},
                  {"mode", "GRAPH_MODE"},
                  {"save_graphs", 1},
                  {"save_graphs_path", out.string()}});
    const models::NetSpec& spec = models::find_net("mlp");
    auto cell = spec.make(0);
    (*cell)(spec.make_input(0));
    const auto dumps = files_in(out, "");
    ASSERT_FALSE(dumps.empty());
    for (const auto& file : dumps) {
      if (file.extension() != ".ir") continue;
      EXPECT_EQ(slurp(file).find("# location: ") != std::string::npos, level == "DEBUG") << file;
    }
  }
}

// A graph that verifies and plans but fails when it runs: a gather far out of range.
std::string failing_ir() {
  ir::Graph g("fails");
  auto* x = g.add_parameter("x", {ir::DType::kFloat32, {4, 3}});
  ir::Constant* index = g.add_constant<int64_t>({1}, {1000000});
  g.add_output(g.add_node("gather", {x, index}, {{"axis", int64_t{0}}}));
  return ir::print_graph(g);
}

TEST_F(DebugAndRdrTest, AnIrRunFailureWritesTheRecorderReportAndTheFailingGraphBesideIt) {
  const fs::path ir_file = dir_ / "fails.ir";
  std::ofstream(ir_file) << failing_ir();
  const testing::MfRun run = testing::run_mf(
      "run " + ir_file.string() +
      " --mode graph --set debug_level=DEBUG --set env_config_path=" + rdr_config());
  EXPECT_EQ(run.code, 1) << run.out;
  const auto reports = files_in(dir_ / "rdr", "rdr_");
  const auto graphs = files_in(dir_ / "rdr", "failed_");
  ASSERT_EQ(reports.size(), 1u) << run.err;
  ASSERT_EQ(graphs.size(), 1u) << run.err;
  EXPECT_THAT(run.err, HasSubstr("the failing graph is in " + graphs[0].string()));
  EXPECT_THAT(slurp(reports[0]), HasSubstr("last node executed: "));
}

TEST_F(DebugAndRdrTest, APynativeFailureWritesTheLastOpsQueuedAndRun) {
  for (const bool synchronous : {true, false}) {
    SCOPED_TRACE(synchronous);
    fs::remove_all(dir_ / "rdr");
    context::set({{"mode", "PYNATIVE_MODE"},
                  {"pynative_synchronize", synchronous},
                  {"env_config_path", rdr_config()}});
    const Tensor x = Tensor::ones({4, 3});
    const Tensor y = ops::relu(x);
    try {
      const Tensor bad = ops::call("gather", {y, Tensor::from_vector<int64_t>({1000000}, {1})},
                                   {{"axis", int64_t{0}}})[0];
      bad.sync();
      ADD_FAILURE() << "expected the gather to fail";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("gather"));
    }
    const auto reports = files_in(dir_ / "rdr", "rdr_pynative_");
    ASSERT_EQ(reports.size(), 1u);
    const std::string report = slurp(reports[0]);
    EXPECT_THAT(report, HasSubstr("relu"));
    EXPECT_THAT(report, HasSubstr("gather"));
    EXPECT_THAT(report, HasSubstr("debug_and_rdr_test.cc"));  // the call sites
    EXPECT_THAT(report, HasSubstr(synchronous ? "pynative_synchronize: true"
                                              : "pynative_synchronize: false"));
  }
}

// The failing op comes first and is kept however many ops were queued behind it; the ops before
// it are listed as run, those after it as dropped.
TEST_F(DebugAndRdrTest, APynativeReportListsTheFailingOpFirstThenWhatRanThenWhatWasDropped) {
  context::set({{"mode", "PYNATIVE_MODE"},
                {"pynative_synchronize", false},
                {"env_config_path", rdr_config()}});
  Tensor y = ops::relu(Tensor::ones({4, 3}));
  y.sync();
  Tensor bad = ops::call("gather", {y, Tensor::from_vector<int64_t>({1000000}, {1})},
                         {{"axis", int64_t{0}}})[0];
  // Far more ops behind the failure than the recorder's window holds.
  for (int i = 0; i < 40; ++i) bad = ops::neg(bad);
  EXPECT_THROW(bad.sync(), Error);
  const auto reports = files_in(dir_ / "rdr", "rdr_pynative_");
  ASSERT_EQ(reports.size(), 1u);
  const std::string report = slurp(reports[0]);
  const size_t failed = report.find("  failed  gather");
  const size_t dropped = report.find("  dropped  neg");
  ASSERT_NE(failed, std::string::npos) << report;
  ASSERT_NE(dropped, std::string::npos) << report;
  EXPECT_LT(failed, dropped) << report;
  EXPECT_EQ(report.find("run (or failed)"), std::string::npos) << report;
  EXPECT_EQ(report.find("  ran  neg"), std::string::npos) << report;
}

TEST_F(DebugAndRdrTest, NoRecorderNoReport) {
  context::set({{"pynative_synchronize", true}});
  EXPECT_THROW(ops::call("gather", {Tensor::ones({2, 2}), Tensor::from_vector<int64_t>({9}, {1})},
                         {{"axis", int64_t{0}}}),
               Error);
  EXPECT_TRUE(files_in(dir_ / "rdr", "").empty());
}

}  // namespace
}  // namespace mf::engine
