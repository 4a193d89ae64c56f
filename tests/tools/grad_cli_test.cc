// `mf grad NET` as a user meets it: every parameter's statistics in either mode, the gradients
// written as .npy (the same bits in GRAPH and PYNATIVE with --deterministic), and clear errors.

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "engine/io/onnx/writer.h"
#include "engine/tensor.h"
#include "mf_cli.h"

namespace mf {
namespace {

using testing::run_mf;
namespace fs = std::filesystem;

class GradCliTest : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("mf_grad_cli_" + std::to_string(::getpid()));
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
};

TEST_F(GradCliTest, BothModesPrintEveryParameterAndWriteTheSameBits) {
  const auto graph =
      run_mf("grad mlp --mode graph --deterministic --output-dir " + (dir_ / "graph").string());
  ASSERT_EQ(graph.code, 0) << graph.err;
  EXPECT_NE(graph.out.find("GRAPH_MODE (forward and backward compiled as one graph)"),
            std::string::npos)
      << graph.out;
  const auto eager =
      run_mf("grad mlp --mode pynative --deterministic --output-dir " + (dir_ / "eager").string());
  ASSERT_EQ(eager.code, 0) << eager.err;
  for (const char* name : {"x", "fc1.weight", "fc1.bias", "fc2.weight", "fc3.bias"}) {
    EXPECT_NE(graph.out.find(std::string("  ") + name + " "), std::string::npos) << name;
    const std::string file = std::string("grad_") + name + ".npy";
    const Tensor a = Tensor::load_npy(dir_ / "graph" / file);
    const Tensor b = Tensor::load_npy(dir_ / "eager" / file);
    ASSERT_EQ(a.shape(), b.shape()) << file;
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << file;
  }
}

// A model file: its initializers are the parameters differentiated, named as the file names them.
TEST_F(GradCliTest, AModelFilesWeightsGetGradientsWithTheSameBitsInBothModes) {
  onnx::ModelWriter m;
  m.add_input("input.1", DType::kFloat32, {4, 6});
  m.add_initializer("fc.weight", Tensor::randn({3, 6}, 1, 0.5));
  m.add_initializer("fc.bias", Tensor::randn({3}, 2, 0.5));
  m.add_node("Gemm", {"input.1", "fc.weight", "fc.bias"}, {"h"}, {{"transB", int64_t{1}}});
  m.add_node("Tanh", {"h"}, {"y"});
  m.add_output("y");
  const fs::path model = dir_ / "fc.onnx";
  m.save(model);
  for (const char* mode : {"graph", "pynative"}) {
    const auto run = run_mf("grad " + model.string() + " --mode " + mode +
                            " --deterministic --output-dir " + (dir_ / mode).string());
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_NE(run.out.find("  fc.weight "), std::string::npos) << run.out;
  }
  for (const char* file : {"grad_fc.weight.npy", "grad_fc.bias.npy", "grad_input.1.npy"}) {
    const Tensor a = Tensor::load_npy(dir_ / "graph" / file);
    const Tensor b = Tensor::load_npy(dir_ / "pynative" / file);
    ASSERT_EQ(a.shape(), b.shape()) << file;
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << file;
  }
  // d sum(tanh(h)) / d bias: one minus tanh squared, summed over the batch; never all zeros.
  const std::vector<double> db = Tensor::load_npy(dir_ / "graph" / "grad_fc.bias.npy").to_doubles();
  for (double v : db) EXPECT_GT(v, 0.0);
}

TEST_F(GradCliTest, AnUnknownNetworkIsAClearError) {
  const auto run = run_mf("grad no_such_net");
  EXPECT_EQ(run.code, 1);
  EXPECT_NE(run.err.find("no_such_net"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace mf
