// The CLI paths a user takes that other tests do not: `mf run` on an ONNX file with a given input
// (values checked), `mf dump` on an ONNX file (every dump parses back), the log level from
// --log-level and MF_LOG_LEVEL (which wins, and a bad name), and `mf print-parse`.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "context/context.h"
#include "engine/eager/dispatch.h"
#include "engine/io/onnx/writer.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "ir/parser.h"
#include "mf_cli.h"
#include "tests/unique_temp_path.h"

namespace mf {
namespace {

namespace fs = std::filesystem;
using testing::run_mf;
using testing::run_mf_with_env;
using testing::slurp;

class CliCoverageTest : public ::testing::Test {
 protected:
  fs::path dir_ = testing::unique_temp_path("mf_cli_coverage");
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }

  // relu(x) and -x of a (2, 3) input, as an ONNX file.
  fs::path two_output_model() {
    onnx::ModelWriter writer;
    writer.add_input("x", DType::kFloat32, {2, 3});
    writer.add_node("Relu", {"x"}, {"r"});
    writer.add_node("Neg", {"x"}, {"n"});
    writer.add_output("r");
    writer.add_output("n");
    const fs::path model = dir_ / "two.onnx";
    writer.save(model);
    return model;
  }
};

TEST_F(CliCoverageTest, RunOnnxModelOnAGivenInputWritesTheRightValues) {
  const fs::path model = two_output_model();
  const std::vector<float> x = {-2.f, -0.5f, 0.f, 0.5f, 1.f, 3.f};
  Tensor::from_vector(x, {2, 3}).save_npy(dir_ / "x.npy");
  for (const char* mode : {"pynative", "graph"}) {
    SCOPED_TRACE(mode);
    const fs::path out = dir_ / mode;
    const auto run = run_mf("run " + model.string() + " --mode " + mode + " --input x=" +
                            (dir_ / "x.npy").string() + " --output-dir " + out.string());
    ASSERT_EQ(run.code, 0) << run.err;
    // Op by op, the kernels made before the first op are reported apart (relu and neg have no
    // oneDNN primitive: none here).
    EXPECT_EQ(run.out.find("op by op: 0 kernels prepared in ") != std::string::npos,
              std::string(mode) == "pynative")
        << run.out;
    const std::vector<double> r = Tensor::load_npy(out / "r.npy").to_doubles();
    const std::vector<double> n = Tensor::load_npy(out / "n.npy").to_doubles();
    ASSERT_EQ(r.size(), x.size());
    ASSERT_EQ(n.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(r[i], std::max(0.0, double(x[i]))) << i;
      EXPECT_EQ(n[i], -double(x[i])) << i;
    }
  }
}

TEST_F(CliCoverageTest, DumpOnnxModelWritesIrThatParsesBack) {
  const fs::path model = two_output_model();
  for (int level : {1, 2}) {
    SCOPED_TRACE("level " + std::to_string(level));
    const fs::path out = dir_ / ("dump" + std::to_string(level));
    const auto dump = run_mf("dump " + model.string() + " --level " + std::to_string(level) +
                             " --out " + out.string());
    ASSERT_EQ(dump.code, 0) << dump.err;
    int parsed = 0;
    for (const auto& entry : fs::directory_iterator(out)) {
      if (entry.path().extension() != ".ir") continue;
      EXPECT_NO_THROW(ir::parse_graph(slurp(entry.path()), entry.path().string())) << entry.path();
      ++parsed;
    }
    EXPECT_GE(parsed, 3) << dump.out;
    // The summary counts every file written (plans and summaries too), at least the .ir ones.
    EXPECT_NE(dump.out.find(" files for " + model.string()), std::string::npos) << dump.out;
  }
}

// Without --out / --level, `mf dump` takes save_graphs_path and save_graphs from the context
// (they were overridden by the command's defaults: the files went to ./ir at level 2); the options
// still win when given.
TEST_F(CliCoverageTest, DumpTakesSaveGraphsPathAndLevelFromTheContextUnlessGiven) {
  const fs::path model = two_output_model();
  const auto ir_files = [](const fs::path& dir) {
    int n = 0;
    if (!fs::is_directory(dir)) return n;
    for (const auto& entry : fs::directory_iterator(dir)) n += entry.path().extension() == ".ir";
    return n;
  };
  const fs::path level1 = dir_ / "by_option_level1";
  ASSERT_EQ(run_mf("dump " + model.string() + " --level 1 --out " + level1.string()).code, 0);
  const fs::path level2 = dir_ / "by_option_level2";
  ASSERT_EQ(run_mf("dump " + model.string() + " --level 2 --out " + level2.string()).code, 0);
  ASSERT_LT(ir_files(level1), ir_files(level2)) << "level 2 dumps every pass, level 1 key stages";

  const fs::path by_context = dir_ / "by_context";
  const auto from_context =
      run_mf("dump " + model.string() + " --set save_graphs_path=" + by_context.string() +
             " --set save_graphs=1");
  ASSERT_EQ(from_context.code, 0) << from_context.err;
  EXPECT_EQ(ir_files(by_context), ir_files(level1)) << from_context.out;

  const fs::path by_option = dir_ / "by_option";
  const auto option_wins =
      run_mf("dump " + model.string() + " --set save_graphs_path=" + by_context.string() +
             "_unused --set save_graphs=1 --level 2 --out " + by_option.string());
  ASSERT_EQ(option_wins.code, 0) << option_wins.err;
  EXPECT_EQ(ir_files(by_option), ir_files(level2));
  EXPECT_FALSE(fs::exists(by_context.string() + "_unused"));
}

TEST_F(CliCoverageTest, LogLevelComesFromTheOptionOrMfLogLevelAndTheOptionWins) {
  const std::string compile = "run mlp --mode graph";
  const std::string info_line = "[info] compiled Mlp at jit_level";
  // Default (warn): no info lines.
  EXPECT_EQ(run_mf(compile).err.find(info_line), std::string::npos);
  const auto option = run_mf("--log-level info " + compile);
  ASSERT_EQ(option.code, 0) << option.err;
  EXPECT_NE(option.err.find(info_line), std::string::npos) << option.err;
  const auto env = run_mf_with_env("MF_LOG_LEVEL=info", compile);
  ASSERT_EQ(env.code, 0) << env.err;
  EXPECT_NE(env.err.find(info_line), std::string::npos) << env.err;
  // The option beats the environment, both ways.
  EXPECT_EQ(
      run_mf_with_env("MF_LOG_LEVEL=info", "--log-level error " + compile).err.find(info_line),
      std::string::npos);
  EXPECT_NE(run_mf_with_env("MF_LOG_LEVEL=off", "--log-level debug " + compile).err.find(info_line),
            std::string::npos);
  // Warnings go at error and off.
  const std::string warns = "run mlp --set enable_sparse=true";
  EXPECT_NE(run_mf(warns).err.find("'enable_sparse' is deprecated"), std::string::npos);
  EXPECT_EQ(run_mf("--log-level error " + warns).err.find("deprecated"), std::string::npos);
  EXPECT_EQ(run_mf_with_env("MF_LOG_LEVEL=off", warns).err.find("deprecated"), std::string::npos);
  // An unknown level is a user error, from either source.
  for (const auto& bad :
       {run_mf("--log-level loud run chain"), run_mf_with_env("MF_LOG_LEVEL=loud", "run chain")}) {
    EXPECT_EQ(bad.code, 1);
    EXPECT_NE(bad.err.find("error: log level 'loud' is not recognized; use one of trace, debug, "
                           "info, warn, error, critical, off"),
              std::string::npos)
        << bad.err;
  }
}

TEST_F(CliCoverageTest, PrintParseShowsWhatPrintRecorded) {
  const fs::path file = dir_ / "prints.pb";
  context::set({{"print_file_path", file.string()}});
  ops::print({Tensor::from_vector(std::vector<float>{1.5f, -2.f, 3.25f}, {3})});
  engine::sync();
  context::reset();
  const auto run = run_mf("print-parse " + file.string());
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("1.5"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("-2"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("3.25"), std::string::npos) << run.out;
  const auto missing = run_mf("print-parse " + (dir_ / "none.pb").string());
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("error: "), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace mf
