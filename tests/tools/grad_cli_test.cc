// `mf grad NET` as a user meets it: every parameter's statistics in either mode, the gradients
// written as .npy (the same bits in GRAPH and PYNATIVE with --deterministic), and clear errors.

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

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

TEST_F(GradCliTest, AnUnknownNetworkIsAClearError) {
  const auto run = run_mf("grad no_such_net");
  EXPECT_EQ(run.code, 1);
  EXPECT_NE(run.err.find("no_such_net"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace mf
