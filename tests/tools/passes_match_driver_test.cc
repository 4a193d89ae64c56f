// `mf passes` prints exactly the pipeline the driver runs for the same settings: for every flag
// that adds or removes a pass, the passes a real compile of a sample network ran (in order of their
// first run) are the rows `mf passes` prints under the same --set flags.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>
#include <vector>

#include "context/context.h"
#include "context/fingerprint.h"
#include "engine/graph/driver.h"
#include "engine/graph/trace.h"
#include "engine/models/registry.h"
#include "tests/tools/mf_cli.h"

namespace mf::testing {
namespace {

// The pass names `mf passes` printed, in order.
std::vector<std::string> printed_pipeline(const std::string& sets) {
  const MfRun run = run_mf("passes " + sets);
  EXPECT_EQ(run.code, 0) << run.err;
  std::vector<std::string> names;
  std::istringstream lines(run.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string index, name;
    words >> index >> name;
    // Each pass once, in order of its first row, as driver_pipeline counts runs.
    if (!index.empty() && std::isdigit(static_cast<unsigned char>(index[0])) &&
        std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(name);
    }
  }
  return names;
}

// The passes a compile of `net` ran under the same settings, each once, in order of first run.
std::vector<std::string> driver_pipeline(const std::string& net, const context::Json& settings) {
  context::reset();
  context::set(settings);
  const models::NetSpec& spec = models::find_net(net);
  auto cell = spec.make(0);
  const Tensor x = spec.make_input(0);
  const context::Snapshot snapshot = context::snapshot();
  const context::Policy policy =
      context::derive_policy(snapshot, context::DeriveOptions{.jit_region = true});
  engine::TraceResult trace = engine::Tracer::trace(*cell, x, policy.max_call_depth.value,
                                                    policy.reserve_class_name_in_scope.value);
  engine::DriverOptions options = engine::driver_options(policy, "test");
  options.compile_cache = false;
  const auto network = engine::compile(std::move(trace.graph), x.type(), policy,
                                       context::fingerprint(snapshot, policy), options);
  std::vector<std::string> names;
  for (const auto& record : network->compiled.passes) {
    if (std::find(names.begin(), names.end(), record.name) == names.end()) {
      names.push_back(record.name);
    }
  }
  context::reset();
  return names;
}

struct FlagCase {
  std::string label;
  std::string jit_level;
  std::string kernel_flags;  // graph_kernel_flags
};

class PassesMatchDriverTest : public ::testing::TestWithParam<FlagCase> {};

TEST_P(PassesMatchDriverTest, MfPassesPrintsWhatTheDriverRuns) {
  const FlagCase& c = GetParam();
  context::Json settings = {{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", c.jit_level}}}};
  std::string sets = "--mode graph --set jit_config.jit_level=" + c.jit_level;
  if (!c.kernel_flags.empty()) {
    settings["graph_kernel_flags"] = c.kernel_flags;
    sets += " --set \"graph_kernel_flags=" + c.kernel_flags + "\"";
  }
  // softmax_ops has something for every fusion pass to do (elementwise chains, reduce tails,
  // rows to stitch), so a pass that runs is a pass that shows.
  const std::vector<std::string> ran = driver_pipeline("softmax_ops", settings);
  ASSERT_FALSE(ran.empty());
  EXPECT_EQ(printed_pipeline(sets), ran) << c.label;
}

INSTANTIATE_TEST_SUITE_P(
    EveryPassFlag, PassesMatchDriverTest,
    ::testing::Values(FlagCase{"O0", "O0", ""}, FlagCase{"O1", "O1", ""}, FlagCase{"O2", "O2", ""},
                      FlagCase{"O1_fusion0", "O1", "--opt_level=0"},
                      FlagCase{"O0_fusion1", "O0", "--opt_level=1"},
                      FlagCase{"O1_fusion3", "O1", "--opt_level=3"},
                      FlagCase{"stitch", "O1", "--opt_level=1 --enable_stitch_fusion=true"},
                      FlagCase{"parallel", "O1", "--opt_level=2 --enable_parallel_fusion=true"},
                      FlagCase{"recompute", "O1", "--opt_level=2 --enable_recompute_fusion=true"},
                      FlagCase{"disable_pass", "O1", "--opt_level=3 --disable_pass=stitch-fusion"},
                      FlagCase{"enable_pass", "O1", "--opt_level=1 --enable_pass=parallel-fusion"}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace mf::testing
