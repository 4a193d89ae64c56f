// `mf train` as a user meets it, on a small learnable data set in Fashion-MNIST's files written
// here (the suite does not depend on the system's copy): progress, per-epoch accuracy, the loss
// curve and a checkpoint; the same checkpoint bytes from GRAPH and PYNATIVE with --deterministic;
// clear errors for bad options, a network that does not take the images, and a missing data set.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "engine/data/idx.h"
#include "engine/io/checkpoint.h"
#include "mf_cli.h"

namespace mf {
namespace {

using testing::run_mf;
namespace fs = std::filesystem;

void write_bytes(const fs::path& file, const std::vector<uint8_t>& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// Class k: a bright 6x6 block at one of ten places, over faint noise.
void write_set(const fs::path& dir, const std::string& prefix, int64_t n, uint32_t seed) {
  std::vector<uint8_t> images(static_cast<size_t>(n) * 784), labels(static_cast<size_t>(n));
  uint32_t state = seed;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int64_t i = 0; i < n; ++i) {
    const int k = int(next() >> 28) % 10;
    labels[size_t(i)] = uint8_t(k);
    uint8_t* img = images.data() + i * 784;
    for (int p = 0; p < 784; ++p) img[p] = uint8_t(next() >> 27);
    const int top = 2 + (k / 5) * 12, left = 2 + (k % 5) * 5;
    for (int r = 0; r < 6; ++r) {
      for (int c = 0; c < 4; ++c) img[(top + r) * 28 + left + c] = 230;
    }
  }
  write_bytes(dir / (prefix + "-images-idx3-ubyte"),
              data::encode_idx(data::IdxType::kUInt8, {n, 28, 28}, images.data()));
  write_bytes(dir / (prefix + "-labels-idx1-ubyte"),
              data::encode_idx(data::IdxType::kUInt8, {n}, labels.data()));
}

class TrainCliTest : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("mf_train_cli_" + std::to_string(::getpid()));
  void SetUp() override {
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    write_set(dir_ / "data", "train", 1536, 1);
    write_set(dir_ / "data", "t10k", 256, 2);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string data() const { return " --data-dir " + (dir_ / "data").string(); }
};

double last_accuracy(const std::string& out) {
  const std::regex accuracy(R"(test accuracy ([0-9.]+)%)");
  double last = -1;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), accuracy);
       it != std::sregex_iterator(); ++it) {
    last = std::stod((*it)[1]);
  }
  return last;
}

TEST_F(TrainCliTest, LeNet5LearnsAndLeavesACurveAndACheckpoint) {
  const fs::path ckpt = dir_ / "lenet5.ckpt";
  const auto run = run_mf("train lenet5 --mode graph --epochs 2 --batch 32 --lr 0.05" + data() +
                          " --checkpoint " + ckpt.string());
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_NE(run.out.find("in GRAPH_MODE, momentum lr 0.05, batch 32, 2 epoch(s) of 48 steps"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("epoch 2/2 step 48/48 loss"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("steps/s"), std::string::npos);
  EXPECT_NE(run.out.find("step peak memory"), std::string::npos);
  EXPECT_GT(last_accuracy(run.out), 80.0) << run.out;
  const std::string svg = testing::slurp(dir_ / "lenet5.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 80);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  const auto params = checkpoint::load(ckpt);
  ASSERT_EQ(params.size(), 10u);
  EXPECT_EQ(params.front().first, "conv1.weight");
}

TEST_F(TrainCliTest, GraphAndPynativeTrainToTheSameCheckpointBytes) {
  const std::string common =
      "train lenet5 --epochs 1 --steps 12 --optimizer adam --lr 0.001 "
      "--deterministic" +
      data();
  const auto graph = run_mf(common + " --mode graph --checkpoint " + (dir_ / "g.ckpt").string());
  ASSERT_EQ(graph.code, 0) << graph.err;
  const auto eager = run_mf(common + " --mode pynative --checkpoint " + (dir_ / "p.ckpt").string());
  ASSERT_EQ(eager.code, 0) << eager.err;
  EXPECT_NE(eager.out.find("PYNATIVE_MODE"), std::string::npos);
  const std::string a = testing::slurp(dir_ / "g.ckpt"), b = testing::slurp(dir_ / "p.ckpt");
  EXPECT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the trained weights differ between GRAPH and PYNATIVE";
}

// Two workers started by mf launch train on their shards with averaged gradients; worker 0
// writes the checkpoint, and the network learns.
TEST_F(TrainCliTest, TwoWorkersUnderMfLaunchTrainDataParallel) {
  const fs::path ckpt = dir_ / "dp.ckpt", logs = dir_ / "logs";
  const auto run =
      run_mf("launch --worker_num=2 --master_port=" + std::to_string(20000 + ::getpid() % 20000) +
             " --log_dir=" + logs.string() + " -- env OMP_NUM_THREADS=1 " + MF_BINARY +
             " train lenet5 --mode graph --epochs 2 --batch 16 --lr 0.05" + data() +
             " --checkpoint " + ckpt.string());
  ASSERT_EQ(run.code, 0) << run.err << testing::slurp(logs / "worker_0.log")
                         << testing::slurp(logs / "worker_1.log");
  const std::string log0 = testing::slurp(logs / "worker_0.log");
  const std::string log1 = testing::slurp(logs / "worker_1.log");
  EXPECT_NE(log0.find("data parallel: 2 workers, each on its shard of 768 images"),
            std::string::npos)
      << log0;
  EXPECT_NE(log0.find("2 epoch(s) of 48 steps"), std::string::npos) << log0;
  EXPECT_GT(last_accuracy(log0), 80.0) << log0;
  // The same weights on both workers: the same test accuracy, to the digit.
  EXPECT_EQ(last_accuracy(log0), last_accuracy(log1)) << log1;
  EXPECT_EQ(checkpoint::load(ckpt).size(), 10u);
}

TEST_F(TrainCliTest, BadOptionsAndDataAreClearErrors) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"train mlp --batch 0" + data(), "--batch must be in [1, 65536]"},
      {"train mlp --epochs 0" + data(), "--epochs must be at least 1"},
      {"train mlp --optimizer rmsprop" + data(), "is not one of sgd, momentum, adam, adamw"},
      {"train mlp --data cifar10" + data(), "the dataset mf train reads is fashion-mnist"},
      {"train cnn" + data(), "takes inputs of shape (32, 3, 32, 32)"},
      {"train mlp --batch 4096" + data(), "is larger than the 1536 training images"},
      {"train mlp --data-dir " + (dir_ / "absent").string(), "dataset-fashion-mnist"},
      {"train mlp --lr 1e9 --steps 30" + data(), "lower --lr"},
  };
  for (const Case& c : cases) {
    const auto run = run_mf(c.args);
    EXPECT_EQ(run.code, 1) << c.args << "\n" << run.out;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << c.args << "\n" << run.err;
  }
}

}  // namespace
}  // namespace mf
