// Every sample network's dumps, at every save_graphs level and fusion level, parse back; and the
// graph each stage dumps, fed the network's own weights and input, computes the network's output
// bit for bit (every stage is the same function; fusion is bit-exact).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/eager/ir_runner.h"
#include "engine/models/registry.h"
#include "engine_fixture.h"
#include "ir/parser.h"
#include "tests/unique_temp_path.h"

namespace mf {
namespace {

namespace fs = std::filesystem;

struct DumpCase {
  std::string net;
  int fusion_level;
};

class DumpsRunTest : public testing::EngineTest, public ::testing::WithParamInterface<DumpCase> {
 protected:
  fs::path dir_ = testing::unique_temp_path("mf_dumps_run");
  void TearDown() override {
    testing::EngineTest::TearDown();
    fs::remove_all(dir_);
  }
};

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_P(DumpsRunTest, EveryDumpParsesBackAndEveryStageComputesTheNetworksOutput) {
  const DumpCase& c = GetParam();
  const models::NetSpec& spec = models::find_net(c.net);
  auto net = spec.make(0);
  const Tensor input = spec.make_input(0);
  std::map<std::string, Tensor> feed = {{"x", input}};
  for (const auto& [name, value] : net->named_parameters()) feed[name] = value;
  const std::vector<double> eager =
      testing::run_net(c.net, {{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});

  for (int level = 1; level <= 3; ++level) {
    SCOPED_TRACE("save_graphs " + std::to_string(level));
    const fs::path dir = dir_ / std::to_string(level);
    context::reset();
    context::set({{"mode", "GRAPH_MODE"},
                  {"deterministic", "ON"},
                  {"jit_config", {{"jit_level", "O1"}}},
                  {"graph_kernel_flags", "--opt_level=" + std::to_string(c.fusion_level)},
                  {"save_graphs", level},
                  {"save_graphs_path", dir.string()}});
    auto cell = spec.make(0);
    (*cell)(input);
    engine::sync();
    const std::vector<fs::path> files = cell->graph_report().dump_files;
    int ir_files = 0;
    for (const fs::path& file : files) {
      if (file.extension() != ".ir") continue;
      ++ir_files;
      SCOPED_TRACE(file.filename().string());
      std::unique_ptr<ir::Graph> graph;
      try {
        graph = ir::parse_graph(read_text(file), file.string());
      } catch (const Error& e) {
        ADD_FAILURE() << "does not parse back: " << e.what();
        continue;
      }
      // Running every pass's dump is slow at level 2 and 3; level 1's key stages run.
      if (level != 1) continue;
      context::reset();
      context::set({{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}});
      engine::IrRunner runner(std::move(graph));
      const auto outputs = runner.run(feed, 0);
      EXPECT_TRUE(runner.generated_parameters().empty())
          << "a parameter was not fed: " << runner.generated_parameters().front();
      ASSERT_EQ(outputs.size(), 1u);
      EXPECT_EQ(testing::first_byte_difference(outputs[0].second.to_doubles(), eager), "");
    }
    EXPECT_GE(ir_files, 3) << "save_graphs=" << level << " wrote too few .ir files";
  }
}

std::vector<DumpCase> dump_cases() {
  std::vector<DumpCase> cases;
  for (const models::NetSpec& spec : models::all_nets()) {
    for (int level = 0; level <= 3; ++level) cases.push_back({spec.name, level});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllNetsFusionLevels, DumpsRunTest, ::testing::ValuesIn(dump_cases()),
                         [](const auto& info) {
                           return info.param.net + "_opt" + std::to_string(info.param.fusion_level);
                         });

}  // namespace
}  // namespace mf
