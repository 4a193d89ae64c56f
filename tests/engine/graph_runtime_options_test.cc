// Context keys that shape a GRAPH-mode run: deterministic results across thread counts,
// env_config_path's mem_Reuse and Running Data Recorder, and .ir files with control flow run op by
// op.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/eager/ir_runner.h"
#include "engine/graph/control_flow.h"
#include "engine/graph/jit.h"
#include "engine/models/registry.h"
#include "engine/ops.h"
#include "engine_fixture.h"
#include "ir/printer.h"

namespace mf {
namespace {

namespace fs = std::filesystem;

class GraphRuntimeOptionsTest : public testing::EngineTestWithDir {
 protected:
  fs::path write_env_config(const std::string& json) {
    const fs::path file = dir_ / "env_config.json";
    std::ofstream(file) << json;
    return file;
  }
};

// deterministic=ON: the same bytes on 1 and 2 threads, for every sample network, in PYNATIVE and
// at every jit level (fusion at O1/O2 included).
struct ThreadCase {
  std::string net;
  std::string mode;  // "PYNATIVE_MODE" or a jit level in GRAPH_MODE
};

class DeterministicAcrossThreadsTest : public testing::EngineTest,
                                       public ::testing::WithParamInterface<ThreadCase> {};

TEST_P(DeterministicAcrossThreadsTest, OneAndTwoThreadsGiveTheSameBytes) {
  const ThreadCase& c = GetParam();
  std::vector<double> results[2];
  for (int threads : {1, 2}) {
    context::reset();
    context::Json settings = {{"deterministic", "ON"}, {"runtime_num_threads", threads}};
    if (c.mode == "PYNATIVE_MODE") {
      settings["mode"] = "PYNATIVE_MODE";
    } else {
      settings["mode"] = "GRAPH_MODE";
      settings["jit_config"] = {{"jit_level", c.mode}};
    }
    results[threads - 1] = testing::run_net(c.net, settings);
  }
  ASSERT_FALSE(results[0].empty());
  EXPECT_EQ(testing::first_byte_difference(results[1], results[0]), "");
}

std::vector<ThreadCase> thread_cases() {
  std::vector<ThreadCase> cases;
  for (const models::NetSpec& spec : models::all_nets()) {
    for (const char* mode : {"PYNATIVE_MODE", "O0", "O1", "O2"}) cases.push_back({spec.name, mode});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllNets, DeterministicAcrossThreadsTest,
                         ::testing::ValuesIn(thread_cases()), [](const auto& info) {
                           const std::string& m = info.param.mode;
                           return info.param.net + "_" + (m == "PYNATIVE_MODE" ? "pynative" : m);
                         });

size_t planned_peak(const std::string& net) {
  auto& spec = models::find_net(net);
  auto cell = spec.make(0);
  (*cell)(spec.make_input(0));
  return cell->graph_report().planned_peak_bytes;
}

TEST_F(GraphRuntimeOptionsTest, MemReuseFalseTurnsReuseOffAtMemoryO1) {
  context::set(
      {{"mode", "GRAPH_MODE"}, {"precompile_only", true}, {"memory_optimize_level", "O1"}});
  const size_t with_reuse = planned_peak("cnn");
  context::set(
      {{"env_config_path", write_env_config(R"({"sys": {"mem_Reuse": false}})").string()}});
  const size_t without_reuse = planned_peak("cnn");
  EXPECT_GT(without_reuse, with_reuse);
}

TEST_F(GraphRuntimeOptionsTest, RecorderWritesAReportAtANormalEndInMode2) {
  const fs::path reports = dir_ / "rdr";
  const std::string config =
      R"({"rdr": {"enable": true, "mode": 2, "path": ")" + reports.string() + R"("}})";
  context::set({{"mode", "GRAPH_MODE"}, {"env_config_path", write_env_config(config).string()}});
  auto& spec = models::find_net("mlp");
  (*spec.make(0))(spec.make_input(0)).sync();
  ASSERT_TRUE(fs::exists(reports));
  ASSERT_EQ(std::distance(fs::directory_iterator(reports), fs::directory_iterator()), 1);
  std::ifstream in(fs::directory_iterator(reports)->path());
  const std::string report((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(report.find("outcome: finished normally"), std::string::npos);
  EXPECT_NE(report.find("last node executed: %"), std::string::npos) << report.substr(0, 400);
  EXPECT_NE(report.find("subgraph @Mlp"), std::string::npos);
  EXPECT_NE(report.find("\"mode\":0"), std::string::npos);
}

TEST_F(GraphRuntimeOptionsTest, RecorderWritesAReportOnFailureInMode1Only) {
  const fs::path reports = dir_ / "rdr";
  const std::string config =
      R"({"rdr": {"enable": true, "mode": 1, "path": ")" + reports.string() + R"("}})";
  context::set({{"mode", "GRAPH_MODE"}, {"env_config_path", write_env_config(config).string()}});
  auto& spec = models::find_net("mlp");
  auto net = spec.make(0);
  (*net)(spec.make_input(0)).sync();
  EXPECT_FALSE(fs::exists(reports) &&
               !fs::is_empty(reports));  // a normal end writes nothing in mode 1
  // A run that fails inside the compiled graph: the pool refuses the memory its nodes ask for.
  Tensor x = spec.make_input(0);
  context::set({{"max_device_memory", "0.001GB"}});
  EXPECT_THROW((*net)(x), Error);
  context::set({{"max_device_memory", "1024GB"}});
  ASSERT_TRUE(fs::exists(reports));
  std::ifstream in(fs::directory_iterator(reports)->path());
  const std::string report((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(report.find("outcome: failed: out of memory"), std::string::npos)
      << report.substr(0, 400);
}

TEST_F(GraphRuntimeOptionsTest, IrFilesWithControlFlowRunOpByOpAndCompiled) {
  // Dump the trace of a network with a cell call and a cond, then run the file both ways.
  context::set({{"mode", "GRAPH_MODE"},
                {"save_graphs", 1},
                {"save_graphs_path", dir_.string()},
                {"precompile_only", true}});
  auto f = jit([](const Tensor& x) {
    return ops::cond(
        ops::greater(ops::reduce_sum(x), ops::scalar(0)), [&] { return ops::mul(x, x); },
        [&] { return ops::neg(x); });
  });
  f(Tensor::ones({4}));
  fs::path trace;
  for (const auto& file : f.graph_report().dump_files) {
    if (file.string().find("trace") != std::string::npos) trace = file;
  }
  ASSERT_FALSE(trace.empty());
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    context::set({{"mode", mode}, {"precompile_only", false}, {"save_graphs", 0}});
    auto runner = engine::IrRunner::from_file(trace.string());
    const auto positive = runner.run({{"x", Tensor::from_vector<float>({1, 2, 3, 4}, {4})}}, 0);
    EXPECT_EQ(positive.at(0).second.to_vector<float>(), (std::vector<float>{1, 4, 9, 16})) << mode;
    const auto negative = runner.run({{"x", Tensor::from_vector<float>({-1, -2, -3, -4}, {4})}}, 0);
    EXPECT_EQ(negative.at(0).second.to_vector<float>(), (std::vector<float>{1, 2, 3, 4})) << mode;
  }
}

}  // namespace
}  // namespace mf
