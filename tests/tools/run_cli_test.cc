// `mf run`, `mf nets` and `mf dump` as a user meets them: the report's format, outputs written as
// .npy, inputs read from .npy, .ir files, GRAPH mode, precompile_only, and clear errors with exit
// status 1.

#include <gtest/gtest.h>

#include <filesystem>

#include "engine/io/onnx/writer.h"
#include "engine/tensor.h"
#include "mf_cli.h"

namespace mf {
namespace {

using testing::run_mf;
namespace fs = std::filesystem;

class RunCliTest : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("mf_run_cli_" + std::to_string(::getpid()));
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
};

TEST_F(RunCliTest, NetsListsTheSampleNetworks) {
  const auto run = run_mf("nets");
  ASSERT_EQ(run.code, 0) << run.err;
  for (const char* net :
       {"mlp", "cnn", "transformer", "elementwise", "layernorm", "softmax", "chain"}) {
    EXPECT_NE(run.out.find(net), std::string::npos) << net;
  }
}

TEST_F(RunCliTest, RunReportsOutputsTimeAndMemoryAndWritesNpy) {
  const auto run = run_mf("run mlp --iters 3 --output-dir " + dir_.string());
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("run: mlp in PYNATIVE_MODE"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("output output: shape (64, 10) dtype Float32 sum "), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("over 2 iterations after the first"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("memory: peak "), std::string::npos) << run.out;
  EXPECT_EQ(Tensor::load_npy(dir_ / "output.npy").shape(), (Shape{64, 10}));
}

TEST_F(RunCliTest, GraphModeGivesTheSameSumsAndReportsTheCompile) {
  const auto eager = run_mf("run cnn");
  const auto graph =
      run_mf("run cnn --mode graph --set jit_config.jit_level=O2 --set memory_optimize_level=O1");
  ASSERT_EQ(graph.code, 0) << graph.err;
  EXPECT_NE(graph.out.find("graph: compiled in"), std::string::npos) << graph.out;
  EXPECT_NE(graph.out.find("SinkExecutor"), std::string::npos) << graph.out;
  auto sums = [](const std::string& out) { return out.substr(out.find("output output:"), 120); };
  EXPECT_EQ(sums(graph.out), sums(eager.out));
}

TEST_F(RunCliTest, PrecompileOnlySaysSoAndRunsNothing) {
  const auto run = run_mf("run mlp --mode graph --set precompile_only=true");
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("precompile_only: compiled, not run"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("output output:"), std::string::npos) << run.out;
}

TEST_F(RunCliTest, InputsComeFromNpyFilesAndAreChecked) {
  const fs::path x = dir_ / "x.npy";
  Tensor::ones({64, 784}).save_npy(x);
  const auto run = run_mf("run mlp --input x=" + x.string());
  ASSERT_EQ(run.code, 0) << run.err;
  const auto wrong_name = run_mf("run mlp --input y=" + x.string());
  EXPECT_EQ(wrong_name.code, 1);
  EXPECT_NE(wrong_name.err.find("error: network 'mlp' has one input named 'x', not 'y'"),
            std::string::npos)
      << wrong_name.err;
  const auto malformed = run_mf("run mlp --input " + x.string());
  EXPECT_EQ(malformed.code, 1);
  EXPECT_NE(malformed.err.find("expected NAME=FILE.npy"), std::string::npos) << malformed.err;
  Tensor::ones({3, 3}).save_npy(x);
  const auto wrong_shape = run_mf("run mlp --input x=" + x.string());
  EXPECT_EQ(wrong_shape.code, 1);
  EXPECT_NE(wrong_shape.err.find("Dense(784 -> 512) expects input (..., 784), got (3, 3)"),
            std::string::npos)
      << wrong_shape.err;
}

TEST_F(RunCliTest, DumpedIrFilesRunInBothModes) {
  const auto dump = run_mf("dump mlp --level 1 --out " + dir_.string());
  ASSERT_EQ(dump.code, 0) << dump.err;
  EXPECT_NE(dump.out.find("dump: 3 files"), std::string::npos) << dump.out;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().extension() != ".ir") continue;
    for (const char* mode : {"pynative", "graph"}) {
      const auto run = run_mf("run " + entry.path().string() + " --mode " + mode);
      EXPECT_EQ(run.code, 0) << entry.path() << " " << mode << ": " << run.err;
      EXPECT_NE(run.out.find("output output0: shape (64, 10)"), std::string::npos) << run.out;
    }
  }
}

// --jit in PYNATIVE: the named child cells compile (and say so), the rest runs op by op, and the
// outputs are those of the fully op-by-op run.
TEST_F(RunCliTest, JitCellsCompileInsidePynative) {
  const std::string same = " --set deterministic=ON";
  const auto eager = run_mf("run transformer" + same);
  const auto jit = run_mf("run transformer --jit encoder --iters 2" + same);
  ASSERT_EQ(jit.code, 0) << jit.err;
  EXPECT_NE(jit.out.find("jit encoder: compiled in"), std::string::npos) << jit.out;
  EXPECT_NE(jit.out.find("jit_level O0, fusion 0, KernelExecutor"), std::string::npos) << jit.out;
  auto sums = [](const std::string& out) { return out.substr(out.find("output output:"), 120); };
  EXPECT_EQ(sums(jit.out), sums(eager.out));
  const auto scoped = run_mf(
      "run transformer --jit Default/net-Transformer/encoder-TransformerEncoderLayer --set "
      "jit_config.jit_level=O1" +
      same);
  ASSERT_EQ(scoped.code, 0) << scoped.err;
  EXPECT_NE(scoped.out.find("jit_level O1, fusion 2, KernelExecutor"), std::string::npos)
      << scoped.out;
  // O2 asked for a jit region of a PYNATIVE run: O0, as MindSpore does, with its warning.
  const auto sunk = run_mf("run transformer --jit encoder --set jit_config.jit_level=O2" + same);
  ASSERT_EQ(sunk.code, 0) << sunk.err;
  EXPECT_NE(sunk.out.find("jit_level O0, fusion 0, KernelExecutor"), std::string::npos) << sunk.out;
  EXPECT_NE(sunk.err.find("Pynative mode can not set jit_level to O2, use O0 instead"),
            std::string::npos)
      << sunk.err;
  EXPECT_EQ(sums(scoped.out), sums(eager.out));

  const auto unknown = run_mf("run transformer --jit decoder");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.err.find("error: --jit: network 'transformer' has no cell 'decoder'; its "
                             "cells are: encoder (TransformerEncoderLayer)"),
            std::string::npos)
      << unknown.err;
  const auto on_file = run_mf("run model.onnx --jit encoder");
  EXPECT_EQ(on_file.code, 1);
  EXPECT_NE(on_file.err.find("--jit names cells of a sample network"), std::string::npos)
      << on_file.err;
}

TEST_F(RunCliTest, JitCellsUseTheCompileCacheAndPrecompileOnly) {
  const std::string cache =
      " --set enable_compile_cache=true --set compile_cache_path=" + (dir_ / "cache").string();
  const auto first = run_mf("run transformer --jit encoder" + cache);
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_NE(first.out.find("compile cache: miss"), std::string::npos) << first.out;
  const auto second = run_mf("run transformer --jit encoder" + cache);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.out.find("compile cache: hit"), std::string::npos) << second.out;

  const auto precompile = run_mf("run transformer --jit encoder --set precompile_only=true");
  ASSERT_EQ(precompile.code, 0) << precompile.err;
  EXPECT_NE(precompile.out.find("precompile_only: jit-compiled cells compiled, not run"),
            std::string::npos)
      << precompile.out;
  EXPECT_EQ(precompile.out.find("output output:"), std::string::npos) << precompile.out;
}

// Outputs are written under the names the network gives them.
TEST_F(RunCliTest, OnnxOutputsKeepTheirNames) {
  onnx::ModelWriter writer;
  writer.add_input("x", DType::kFloat32, {2, 3});
  writer.add_node("Relu", {"x"}, {"probabilities"});
  writer.add_node("Neg", {"x"}, {"y"});
  writer.add_output("probabilities");
  writer.add_output("y");
  const fs::path model = dir_ / "two.onnx";
  writer.save(model);
  for (const char* mode : {"pynative", "graph"}) {
    const fs::path out = dir_ / mode;
    const auto run =
        run_mf("run " + model.string() + " --mode " + mode + " --output-dir " + out.string());
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_NE(run.out.find("output probabilities: shape (2, 3)"), std::string::npos) << run.out;
    EXPECT_TRUE(fs::exists(out / "probabilities.npy")) << mode;
    EXPECT_TRUE(fs::exists(out / "y.npy")) << mode;
  }
}

TEST_F(RunCliTest, UserErrorsExitOneWithOneClearLine) {
  const auto unknown = run_mf("run resnet");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_EQ(unknown.err.rfind("error: no sample network named 'resnet'", 0), 0u) << unknown.err;
  const fs::path bad = dir_ / "bad.ir";
  std::ofstream(bad) << "subgraph @g( {\n";
  const auto malformed = run_mf("run " + bad.string());
  EXPECT_EQ(malformed.code, 1);
  EXPECT_NE(malformed.err.find("bad.ir:1:"), std::string::npos) << malformed.err;
  const auto usage = run_mf("run");
  EXPECT_EQ(usage.code, 2);
}

}  // namespace
}  // namespace mf
