// Data parallelism across processes: two workers (comm_worker, started here with the variables
// `mf launch` sets, on 127.0.0.1) run the collectives, train, lose a worker, and disagree; one
// process checks what they wrote against a single-process run.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "context/context.h"
#include "context/parallel_context.h"
#include "engine/models/registry.h"
#include "engine/train/grad_reducer.h"
#include "engine/train/train_cells.h"
#include "engine_fixture.h"
#include "runtime/comm/communicator.h"

namespace mf {
namespace {

namespace fs = std::filesystem;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t size = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct Worker {
  int status = -1;  // exit code, or -signal
  std::string output;
};

class DataParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mf_dp_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Starts `n` workers (n = 0: one process outside any job) and waits at most `limit` for all.
  std::vector<Worker> run(std::vector<std::string> args, int n,
                          std::vector<std::string> extra_env = {},
                          std::chrono::seconds limit = std::chrono::seconds(60)) {
    const int port = free_port();
    const int count = std::max(n, 1);
    std::vector<pid_t> pids;
    std::vector<std::string> logs;
    for (int r = 0; r < count; ++r) {
      std::vector<std::string> env{"OMP_NUM_THREADS=1", "MF_LOG_LEVEL=error"};
      if (n > 0) {
        env.push_back("MS_WORKER_NUM=" + std::to_string(n));
        env.push_back("MS_NODE_ID=" + std::to_string(r));
        env.push_back("MS_SCHED_HOST=127.0.0.1");
        env.push_back("MS_SCHED_PORT=" + std::to_string(port));
        env.push_back("MS_ROLE=MS_WORKER");
      }
      for (const auto& e : extra_env) env.push_back(e);
      if (const char* path = std::getenv("PATH")) env.push_back(std::string("PATH=") + path);
      std::vector<std::string> argv{MF_COMM_WORKER};
      for (const auto& a : args) argv.push_back(a);
      std::vector<char*> argv_c, env_c;
      for (auto& a : argv) argv_c.push_back(a.data());
      argv_c.push_back(nullptr);
      for (auto& e : env) env_c.push_back(e.data());
      env_c.push_back(nullptr);
      logs.push_back((dir_ / ("worker_" + std::to_string(r) + ".log")).string());
      const char* log_path = logs.back().c_str();
      const pid_t pid = ::fork();
      if (pid == 0) {
        // Only async-signal-safe calls between fork and exec: other threads may hold locks.
        const int log = ::open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (log >= 0) {
          ::dup2(log, 1);
          ::dup2(log, 2);
        }
        ::execve(argv_c[0], argv_c.data(), env_c.data());
        ::_exit(127);
      }
      pids.push_back(pid);
    }
    std::vector<Worker> workers(static_cast<size_t>(count));
    const auto deadline = std::chrono::steady_clock::now() + limit;
    size_t done = 0;
    std::vector<bool> finished(static_cast<size_t>(count), false);
    while (done < pids.size()) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (finished[i]) continue;
        int status = 0;
        if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
          finished[i] = true;
          ++done;
          workers[i].status = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        }
      }
      if (std::chrono::steady_clock::now() > deadline) {
        for (size_t i = 0; i < pids.size(); ++i) {
          if (!finished[i]) ::kill(pids[i], SIGKILL);
        }
        ADD_FAILURE() << "workers still running after " << limit.count() << " s";
        limit = std::chrono::seconds(3600);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      std::ifstream in(logs[i]);
      std::stringstream text;
      text << in.rdbuf();
      workers[i].output = text.str();
    }
    return workers;
  }

  struct Result {
    std::vector<double> losses;
    std::map<std::string, std::vector<double>> weights;
  };
  Result read(const fs::path& file) {
    Result r;
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string kind, name;
      fields >> kind;
      if (kind == "loss") {
        double v;
        fields >> v;
        r.losses.push_back(v);
        continue;
      }
      fields >> name;
      double v;
      while (fields >> v) r.weights[name].push_back(v);
    }
    EXPECT_FALSE(r.weights.empty()) << file;
    return r;
  }

  fs::path dir_;
};

TEST_F(DataParallelTest, CollectivesAgreeAcrossTwoWorkers) {
  for (const Worker& w : run({"collectives"}, 2)) {
    EXPECT_EQ(w.status, 0) << w.output;
  }
}

TEST_F(DataParallelTest, CollectivesOutsideAJobActOnAGroupOfOne) {
  const auto workers = run({"collectives"}, 0);
  EXPECT_EQ(workers[0].status, 0) << workers[0].output;
}

// Two workers, each with half of every batch, end with the same bits as one process that sums the
// gradients of the two halves (a two-way sum and a halving are exact), in both modes, summed or
// averaged, with one bucket (reduced after a compiled step) and with two (started inside it);
// every worker holds the same weights although each seeded its network differently.
TEST_F(DataParallelTest, TwoWorkersMatchOneProcessSummingTheHalvesBitForBit) {
  for (const char* mode : {"GRAPH_MODE", "PYNATIVE_MODE"}) {
    for (const char* mean : {"sum", "mean"}) {
      for (const char* split : {"0", "2"}) {
        const std::string tag = std::string(mode) + "_" + mean + "_split" + split;
        const fs::path out = dir_ / tag;
        for (const Worker& w : run({"train", mode, mean, "5", out.string(), split}, 2)) {
          ASSERT_EQ(w.status, 0) << w.output;
        }
        const fs::path ref = dir_ / (tag + ".ref");
        ASSERT_EQ(run({"reference", mode, mean, "5", ref.string()}, 0)[0].status, 0);
        const Result r0 = read(out.string() + ".0"), r1 = read(out.string() + ".1");
        const Result one = read(ref);
        EXPECT_EQ(r0.weights, r1.weights) << tag;
        EXPECT_EQ(r0.weights, one.weights) << tag;
        EXPECT_EQ(r0.losses, one.losses) << tag;
      }
    }
  }
}

// Averaged gradients of two half-batches are the gradient of the whole batch's mean loss: the
// same weights as one process on the global batch within 1e-5 after one step, and loss curves
// that agree over 100 steps (rounding differs, so they drift apart slowly, never by much).
TEST_F(DataParallelTest, AveragedGradientsMatchTheGlobalBatch) {
  for (const char* steps : {"1", "100"}) {
    const fs::path out = dir_ / ("dp" + std::string(steps)),
                   global = dir_ / ("global" + std::string(steps));
    for (const Worker& w : run({"train", "GRAPH_MODE", "mean", steps, out.string()}, 2)) {
      ASSERT_EQ(w.status, 0) << w.output;
    }
    ASSERT_EQ(run({"global", "GRAPH_MODE", steps, global.string()}, 0)[0].status, 0);
    const Result dp0 = read(out.string() + ".0"), dp1 = read(out.string() + ".1"),
                 one = read(global);
    if (std::string(steps) == "1") {
      for (const auto& [name, w] : one.weights) {
        const auto& d = dp0.weights.at(name);
        ASSERT_EQ(d.size(), w.size());
        double scale = 0, diff = 0;
        for (size_t i = 0; i < w.size(); ++i) {
          scale = std::max(scale, std::abs(w[i]));
          diff = std::max(diff, std::abs(w[i] - d[i]));
        }
        EXPECT_LE(diff, 1e-5 * std::max(scale, 1.0)) << name;
      }
      continue;
    }
    // Worker r reports the loss of its half; the global batch's mean loss is their mean.
    ASSERT_EQ(one.losses.size(), 100u);
    ASSERT_EQ(dp0.losses.size(), 100u);
    for (size_t s = 0; s < one.losses.size(); ++s) {
      const double mean = 0.5 * (dp0.losses[s] + dp1.losses[s]);
      EXPECT_NEAR(mean, one.losses[s], 1e-3 * std::max(1.0, one.losses[s])) << "step " << s;
    }
    EXPECT_LT(one.losses.back(), 0.7 * one.losses.front());  // it learned
  }
}

// The launcher and init() meet: mf launch starts two workers that train, and a job whose worker
// is killed makes the launcher exit 3 naming it.
TEST_F(DataParallelTest, MfLaunchStartsAJobThatTrainsAndReportsALostWorker) {
  const fs::path out = dir_ / "launched";
  const std::string launch = std::string(MF_BINARY) +
                             " launch --worker_num=2 --master_port=" + std::to_string(free_port()) +
                             " --log_dir=" + (dir_ / "logs").string() + " -- " + MF_COMM_WORKER;
  ASSERT_EQ(
      std::system((launch + " train PYNATIVE_MODE sum 3 " + out.string() + " 2>/dev/null").c_str()),
      0);
  EXPECT_EQ(read(out.string() + ".0").weights, read(out.string() + ".1").weights);
  const std::string err = (dir_ / "err.txt").string();
  const int status = std::system((launch + " die 2>" + err).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 3);
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("worker 1"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("SIGKILL"), std::string::npos) << text.str();
}

TEST_F(DataParallelTest, AKilledWorkerIsNamedBySurvivorsWithinSeconds) {
  const auto start = std::chrono::steady_clock::now();
  const auto workers = run({"die"}, 2, {"MF_COMM_TIMEOUT=20"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  EXPECT_EQ(workers[1].status, -SIGKILL);
  EXPECT_EQ(workers[0].status, 3) << workers[0].output;
  EXPECT_NE(workers[0].output.find("worker 1 is gone"), std::string::npos) << workers[0].output;
  // It failed in a bucket that a compiled step had started.
  EXPECT_NE(workers[0].output.find("AllReduce 'gradients bucket"), std::string::npos)
      << workers[0].output;
  EXPECT_NE(workers[0].output.find("the group is broken"), std::string::npos) << workers[0].output;
}

TEST_F(DataParallelTest, AHungWorkerIsNamedAfterTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  auto workers = run({"hang"}, 2, {"MF_COMM_TIMEOUT=2"}, std::chrono::seconds(12));
  (void)start;
  EXPECT_EQ(workers[0].status, 3) << workers[0].output;
  EXPECT_NE(workers[0].output.find("worker 1 did not answer within 2 s"), std::string::npos)
      << workers[0].output;
}

TEST_F(DataParallelTest, WorkersWithDifferentNetworksStopWithAClearError) {
  for (const Worker& w : run({"mismatch"}, 2)) {
    EXPECT_EQ(w.status, 3) << w.output;
    EXPECT_NE(w.output.find("worker 1 trains"), std::string::npos) << w.output;
  }
}

TEST_F(DataParallelTest, ADeviceNumThatIsNotTheGroupsIsAnErrorOnEveryWorker) {
  for (const Worker& w : run({"device_num"}, 2)) {
    EXPECT_EQ(w.status, 3) << w.output;
    EXPECT_NE(w.output.find("worker 1 has device_num=4 but the group has 2"), std::string::npos)
        << w.output;
  }
}

TEST_F(DataParallelTest, AMissingOrMalformedVariableIsNamed) {
  auto workers = run({"collectives"}, 0, {"MS_WORKER_NUM=2", "MS_NODE_ID=5", "MS_SCHED_PORT=1"});
  EXPECT_EQ(workers[0].status, 1);
  EXPECT_NE(workers[0].output.find("MS_NODE_ID='5'"), std::string::npos) << workers[0].output;
  workers = run({"collectives"}, 0, {"MS_WORKER_NUM=2", "MS_NODE_ID=0"});
  EXPECT_NE(workers[0].output.find("MS_SCHED_PORT is not set"), std::string::npos)
      << workers[0].output;
  workers = run({"collectives"}, 0, {"MS_WORKER_NUM=1", "MS_NODE_ID=0", "MS_ROLE=MS_SCHED"});
  EXPECT_NE(workers[0].output.find("no separate scheduler"), std::string::npos)
      << workers[0].output;
}

// Buckets, without a second process: split points as all_reduce_fusion_config gives them, in
// backward order; sizes otherwise.
TEST(GradReducerBuckets, FollowSplitPointsOrSizesInBackwardOrder) {
  runtime::comm::init_world(runtime::comm::solo_communicator());
  std::vector<Tensor> params;
  std::vector<std::string> names;
  for (int i = 0; i < 5; ++i) {
    params.push_back(Tensor::zeros({256}));  // 1 KiB each
    names.push_back("p" + std::to_string(i));
  }
  nn::DistributedGradReducer split(names, params, {.mean = false, .split_indices = {2, 4}});
  EXPECT_EQ(split.buckets(), (std::vector<std::vector<size_t>>{{4}, {3, 2}, {1, 0}}));
  nn::DistributedGradReducer sized(names, params,
                                   {.mean = false, .split_indices = {}, .bucket_bytes = 2048});
  EXPECT_EQ(sized.buckets(), (std::vector<std::vector<size_t>>{{4, 3}, {2, 1}, {0}}));
  try {
    nn::DistributedGradReducer(names, params, {.mean = false, .split_indices = {7}});
    ADD_FAILURE() << "a split point past the gradients was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("split index 7 is outside the 5 gradients"),
              std::string::npos)
        << e.what();
  }
  // A group of one: the sum is the gradient itself.
  const Tensor g = Tensor::full({256}, 2.5);
  const auto reduced = split(std::vector<Tensor>(5, g));
  EXPECT_EQ(reduced[3].to_doubles(), g.to_doubles());
  runtime::comm::release_world();
}

// GRAPH mode: the all-reduces are nodes of the compiled step. Each bucket starts right after the
// node computing its last gradient, so the buckets of the last layers start before the backward
// of the first layer has run, and every gradient output is a wait; in a group of one the step
// trains as without data parallelism, bit for bit.
class CompiledStepReductionTest : public testing::EngineTestWithDir {};

TEST_F(CompiledStepReductionTest, BucketsStartInsideTheBackwardAndWaitAtTheOutputs) {
  auto train = [&](bool data_parallel, bool dump) {
    context::set({{"mode", "GRAPH_MODE"}, {"deterministic", "ON"}});
    if (dump) context::set({{"save_graphs", 1}, {"save_graphs_path", dir_.string()}});
    context::reset_auto_parallel_context();
    if (data_parallel) {
      context::set_auto_parallel_context({{"parallel_mode", "data_parallel"},
                                          {"gradients_mean", true},
                                          {"all_reduce_fusion_config", std::vector<int>{2, 4}}});
    }
    auto net = std::make_shared<models::Mlp>(std::vector<int64_t>{8, 16, 16, 4}, 5);
    auto with_loss = std::make_shared<nn::WithLossCell>(
        net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, nn::Reduction::kMean));
    auto optimizer = std::make_shared<nn::Momentum>(
        nn::trainable_group(*net), nn::MomentumOptions{.learning_rate = 0.1, .momentum = 0.9});
    nn::TrainOneStepCell step(with_loss, optimizer);
    std::vector<double> values;
    std::vector<fs::path> dumps;
    for (int s = 0; s < 3; ++s) {
      const Tensor x = Tensor::from_vector(std::vector<float>(6 * 8, 0.25f * float(s + 1)), {6, 8});
      const Tensor y = Tensor::from_vector(std::vector<int32_t>{0, 1, 2, 3, 0, 1}, {6});
      values.push_back(step(x, y).to_doubles()[0]);
      for (const fs::path& file : step.graph_report().dump_files) dumps.push_back(file);
    }
    for (const auto& [name, w] : net->named_parameters()) {
      for (double v : w.to_doubles()) values.push_back(v);
    }
    std::string ir;
    for (const fs::path& file : dumps) {
      std::ifstream in(file);
      std::stringstream text;
      text << in.rdbuf();
      // The last dump of the step is the graph as it runs.
      if (text.str().find("all_reduce_start") != std::string::npos) ir = text.str();
    }
    if (data_parallel) {
      EXPECT_NE(step.grad_reducer(), nullptr);
      EXPECT_GE(step.grad_reducer()->last_overlap_seconds(), 0.0);
      EXPECT_LE(step.grad_reducer()->last_overlap_seconds(),
                step.grad_reducer()->last_reduce_seconds());
    }
    return std::make_pair(values, ir);
  };
  runtime::comm::init_world(runtime::comm::solo_communicator());
  const auto [reduced, ir] = train(true, true);
  runtime::comm::release_world();
  const auto [alone, unused] = train(false, false);
  EXPECT_EQ(reduced, alone) << "a group of one must train as one process does";

  ASSERT_FALSE(ir.empty()) << "no dump of the training step shows all_reduce_start";
  auto count = [&](std::string_view what) {
    size_t n = 0;
    for (size_t at = ir.find(what); at != std::string::npos; at = ir.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("all_reduce_start("), 3u) << ir;  // split points {2, 4}: three buckets
  EXPECT_EQ(count("all_reduce_wait("), 6u) << ir;   // one per parameter
  // The first layer's weight gradient is the last matmul of the backward: the first bucket (the
  // last layer's) started before it.
  const size_t first_start = ir.find("all_reduce_start(");
  const size_t last_matmul = ir.rfind("matmul");
  ASSERT_NE(last_matmul, std::string::npos) << ir;
  EXPECT_LT(first_start, last_matmul) << ir;
  EXPECT_GT(ir.find("all_reduce_wait("), last_matmul) << ir;
  EXPECT_NE(ir.find("Gradients/Default/grad_reducer-DistributedGradReducer"), std::string::npos)
      << ir;
}

}  // namespace
}  // namespace mf
