// Runs the `mf` binary and checks exit codes and output of `mf context ...`.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "mf_cli.h"
#include "tests/unique_temp_path.h"

#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using mf::testing::MfRun;
using mf::testing::run_mf;

TEST(ContextCliTest, ListPrintsEveryKey) {
  const MfRun run = run_mf("context list");
  ASSERT_EQ(run.code, 0) << run.err;
  for (const char* key : {"KEY", "DEFAULT", "CURRENT", "mode", "save_graphs_path", "jit_config",
                          "  .jit_level", "runtime_num_threads", "\nauto_parallel_context\n",
                          "device_num", "\nps_context\n", "enable_ps"}) {
    EXPECT_NE(run.out.find(key), std::string::npos) << key;
  }
  EXPECT_NE(run.out.find("CPU kernels run on the calling threads and have no device-side "
                         "watchdog to time out"),
            std::string::npos)
      << run.out;
}

TEST(ContextCliTest, ListJsonParsesAndShowsCurrentValues) {
  const MfRun run = run_mf("context list --json --set save_graphs=3");
  ASSERT_EQ(run.code, 0) << run.err;
  const auto keys = nlohmann::json::parse(run.out);
  ASSERT_TRUE(keys.is_array());
  bool found = false;
  for (const auto& key : keys) {
    EXPECT_TRUE(key.contains("type") && key.contains("default") && key.contains("allowed") &&
                key.contains("devices") && key.contains("doc"))
        << key.dump();
    if (key["name"] == "save_graphs") {
      found = true;
      EXPECT_EQ(key["current"], 3);
      EXPECT_EQ(key["default"], 0);
    }
  }
  EXPECT_TRUE(found);
}

TEST(ContextCliTest, GetAppliesGlobalOptions) {
  EXPECT_EQ(run_mf("context get mode").out, "1\n");
  EXPECT_EQ(run_mf("context get mode --set mode=GRAPH_MODE").out, "0\n");
  EXPECT_EQ(run_mf("context get mode --mode graph").out, "0\n");
  EXPECT_EQ(run_mf("--set jit_config.jit_level=O2 context get jit_config.jit_level").out, "O2\n");
}

TEST(ContextCliTest, GetReadsContextFile) {
  const auto file = mf::testing::unique_temp_path("mf_cli_context").replace_extension(".json");
  std::ofstream(file) << R"({"save_graphs": true, "jit_config": {"infer_boost": "on"}})";
  const MfRun run = run_mf("context get save_graphs --context " + file.string());
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.out, "2\n");
}

TEST(ContextCliTest, ExplainShowsDecisionsWithReasons) {
  const MfRun run = run_mf("context explain --set jit_config.jit_level=O1 --set mode=GRAPH_MODE");
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("jit_config.jit_level='O1'"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("fusion opt_level=2 because jit_level=O1"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("fingerprint "), std::string::npos);
}

TEST(ContextCliTest, ExplainReportsKeysWithoutEffectOnCpu) {
  const MfRun run = run_mf("context explain --set op_timeout=5");
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("ignored.op_timeout"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("CPU kernels run on the calling threads and have no device-side "
                         "watchdog to time out"),
            std::string::npos)
      << run.out;
}

TEST(ContextCliTest, DeprecatedAndDeviceOnlyKeysWarn) {
  const MfRun run =
      run_mf("context get max_device_memory --set variable_memory_max_size=6GB --set op_timeout=5");
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.out, "6GB\n");
  EXPECT_NE(
      run.err.find("'variable_memory_max_size' is deprecated and will be removed; it now sets "
                   "'max_device_memory'"),
      std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("'op_timeout' (Maximum execution time of one operator in seconds; 0 "
                         "means the device default) has no effect here: CPU kernels run on the "
                         "calling threads"),
            std::string::npos)
      << run.err;
}

TEST(ContextCliTest, BadKeyIsAUserError) {
  const MfRun run = run_mf("context get mode --set save_graph=1");
  EXPECT_EQ(run.code, 1);
  EXPECT_EQ(run.err.rfind("error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find("did you mean 'save_graphs'"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST(ContextCliTest, BadValueAndBadFileAreUserErrors) {
  EXPECT_EQ(run_mf("context get mode --set device_target=GPU").code, 1);
  EXPECT_EQ(run_mf("context get mode --set nonsense").code, 1);
  const MfRun missing = run_mf("context get mode --context /nonexistent/ctx.json");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/ctx.json"), std::string::npos);
}

TEST(ContextCliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(run_mf("context frobnicate").code, 2);
  EXPECT_EQ(run_mf("context get").code, 2);
  EXPECT_EQ(run_mf("context list --mode sideways").code, 2);
}

}  // namespace
