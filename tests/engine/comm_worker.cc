// One worker of the data-parallel tests (data_parallel_test.cc starts several of these with the
// environment `mf launch` sets). Each scenario prints what it found and exits 0 when it holds, 3
// when an expected error came (its text printed), 1 otherwise.
//
//   comm_worker collectives
//   comm_worker train MODE MEAN STEPS OUT   data parallel, each worker half of every batch
//   comm_worker reference MODE MEAN STEPS OUT   one process summing the two halves' gradients
//   comm_worker global MODE STEPS OUT   one process on the whole batch, mean loss
//   comm_worker die | hang | mismatch | device_num

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

#include "context/context.h"
#include "context/parallel_context.h"
#include "engine/autodiff/grad.h"
#include "engine/distributed/communication.h"
#include "engine/models/registry.h"
#include "engine/ops.h"
#include "engine/train/train_cells.h"
#include "runtime/comm/communicator.h"

namespace mf {
namespace {

constexpr int64_t kBatch = 16;  // the global batch; each of two workers takes half

std::pair<Tensor, Tensor> batch_rows(uint64_t seed, int64_t begin, int64_t end) {
  const Tensor x = Tensor::randn({kBatch, 8}, seed);
  const auto v = x.to_vector<float>();
  std::vector<float> rows(v.begin() + begin * 8, v.begin() + end * 8);
  std::vector<int32_t> labels;
  for (int64_t i = begin; i < end; ++i) {
    labels.push_back(
        int32_t(std::max_element(v.begin() + i * 8, v.begin() + i * 8 + 4) - (v.begin() + i * 8)));
  }
  return {Tensor::from_vector(rows, {end - begin, 8}), Tensor::from_vector(labels, {end - begin})};
}

struct Job {
  std::shared_ptr<models::Mlp> net;
  std::shared_ptr<nn::WithLossCell> with_loss;
  std::shared_ptr<nn::Optimizer> optimizer;
};

// Every worker seeds its network differently: only the broadcast from worker 0 makes them equal.
Job make_job(uint64_t seed, int64_t hidden = 16) {
  Job job;
  job.net = std::make_shared<models::Mlp>(std::vector<int64_t>{8, hidden, 4}, seed);
  job.with_loss = std::make_shared<nn::WithLossCell>(
      job.net, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(true, nn::Reduction::kMean));
  job.optimizer = std::make_shared<nn::Momentum>(
      nn::trainable_group(*job.net), nn::MomentumOptions{.learning_rate = 0.1, .momentum = 0.9});
  return job;
}

void write_result(const std::string& path, const Job& job, const std::vector<double>& losses) {
  std::ofstream out(path);
  out.precision(17);
  for (double l : losses) out << "loss " << l << "\n";
  for (const auto& [name, w] : job.net->named_parameters()) {
    out << "weight " << name;
    for (double v : w.to_doubles()) out << " " << v;
    out << "\n";
  }
}

int collectives() {
  communication::init();
  const int rank = communication::get_rank(), size = communication::get_group_size();
  runtime::comm::Communicator& world = *runtime::comm::world();
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::cout << "FAILED: " << what << std::endl;
      ++failures;
    }
  };
  // Through the registry ops, op by op.
  const Tensor mine = Tensor::full({3}, rank + 1.0);
  const auto sum = ops::call("all_reduce", {mine})[0].to_doubles();
  expect(sum == std::vector<double>(3, size * (size + 1) / 2.0), "all_reduce sum");
  const auto max = ops::call("all_reduce", {mine}, {{"op", std::string("max")}})[0].to_doubles();
  expect(max == std::vector<double>(3, size), "all_reduce max");
  const auto prod = ops::call("all_reduce", {mine}, {{"op", std::string("prod")}})[0].to_doubles();
  double factorial = 1;
  for (int r = 1; r <= size; ++r) factorial *= r;
  expect(prod == std::vector<double>(3, factorial), "all_reduce prod");
  const Tensor ints = Tensor::from_vector(std::vector<int64_t>{int64_t(rank), 10}, {2});
  const auto isum = ops::call("all_reduce", {ints})[0].to_doubles();
  expect(isum[0] == size * (size - 1) / 2.0 && isum[1] == 10.0 * size, "all_reduce int64");
  const Tensor row = Tensor::full({1, 2}, rank);
  const Tensor gathered = ops::call("all_gather", {row}, {{"rank_size", int64_t(size)}})[0];
  expect(gathered.shape() == Shape{size, 2}, "all_gather shape");
  const auto g = gathered.to_doubles();
  for (int r = 0; r < size; ++r) expect(g[size_t(2 * r)] == r, "all_gather row order");
  const Tensor from_last = ops::call("broadcast", {Tensor::full({4}, 100.0 + rank)},
                                     {{"root_rank", int64_t(size - 1)}})[0];
  expect(from_last.to_doubles() == std::vector<double>(4, 100.0 + size - 1), "broadcast");
  // Directly, with sizes that are not a multiple of anything.
  std::vector<double> big(100003, 0.5 * rank);
  world.all_reduce(big.data(), big.size(), ir::DType::kFloat64, runtime::comm::ReduceOp::kSum,
                   "big");
  expect(big.front() == 0.25 * size * (size - 1) && big.back() == big.front(), "large all_reduce");
  // A peer that dies must not kill this process through SIGPIPE on Gloo's next write to it.
  struct sigaction pipe {};
  expect(::sigaction(SIGPIPE, nullptr, &pipe) == 0 && (size == 1 || pipe.sa_handler == SIG_IGN),
         "SIGPIPE ignored once connected");
  // Started all-reduces travel on the communication thread; a blocking collective called
  // meanwhile queues behind them, so every worker pairs the same collectives.
  std::vector<double> first(50001, 1.0 + rank), second(7, 2.0 * rank);
  auto started = world.start_all_reduce(first.data(), first.size(), ir::DType::kFloat64,
                                        runtime::comm::ReduceOp::kSum, "started first");
  auto also = world.start_all_reduce(second.data(), second.size(), ir::DType::kFloat64,
                                     runtime::comm::ReduceOp::kMax, "started second");
  int64_t ranks = rank;
  world.all_reduce(&ranks, 1, ir::DType::kInt64, runtime::comm::ReduceOp::kSum, "blocking");
  also->wait();
  started->wait();
  expect(started->done() && also->done(), "started all-reduces done after wait");
  expect(first.back() == size * (size + 1) / 2.0, "started all_reduce sum");
  expect(second.front() == 2.0 * (size - 1), "started all_reduce max");
  expect(ranks == size * (size - 1) / 2, "blocking all_reduce between started ones");
  // The bucket ops of a compiled training step, op by op: start, then waits taking parts out.
  const Tensor grads_a = Tensor::full({2, 3}, rank + 1.0), grads_b = Tensor::full({4}, 3.0 * rank);
  const Tensor packed = ops::call("all_reduce_start", {grads_a, grads_b})[0];
  const auto part = ops::call("all_reduce_wait", {packed},
                              {{"offset", int64_t{6}},
                               {"shape", std::vector<int64_t>{2, 2}},
                               {"mean", true},
                               {"last_part", true}})[0]
                        .to_doubles();
  expect(part == std::vector<double>(4, 3.0 * (size - 1) / 2.0), "all_reduce_wait mean");
  // A group built for another size is a clear error.
  try {
    ops::call("all_gather", {row}, {{"rank_size", int64_t(size + 1)}})[0].to_doubles();
    expect(false, "all_gather with a wrong rank_size ran");
  } catch (const Error& e) {
    expect(std::string(e.what()).find("built for a group of") != std::string::npos, e.what());
  }
  try {
    ops::call("broadcast", {row}, {{"root_rank", int64_t(size)}})[0].to_doubles();
    expect(false, "broadcast from a root outside the group ran");
  } catch (const Error& e) {
    expect(std::string(e.what()).find("is not a worker of this group") != std::string::npos,
           e.what());
  }
  communication::release();
  std::cout << "collectives rank " << rank << " failures " << failures << std::endl;
  return failures == 0 ? 0 : 1;
}

void set_mode(const std::string& mode) {
  context::set({{"mode", mode}, {"deterministic", "ON"}});
}

// `split`: all_reduce_fusion_config's one split point (0: one bucket).
int train(const std::string& mode, bool mean, int steps, const std::string& out, int split) {
  set_mode(mode);
  communication::init();
  context::set_auto_parallel_context(
      {{"parallel_mode", "data_parallel"}, {"gradients_mean", mean}});
  if (split > 0) {
    context::set_auto_parallel_context({{"all_reduce_fusion_config", std::vector<int>{split}}});
  }
  const int rank = communication::get_rank();
  Job job = make_job(3 + uint64_t(rank));
  nn::TrainOneStepCell step(job.with_loss, job.optimizer);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch_rows(100 + uint64_t(s), rank * kBatch / 2, (rank + 1) * kBatch / 2);
    losses.push_back(step(x, y).to_doubles()[0]);
  }
  write_result(out + "." + std::to_string(rank), job, losses);
  communication::release();
  return 0;
}

int reference(const std::string& mode, bool mean, int steps, const std::string& out) {
  set_mode(mode);
  Job job = make_job(3);
  GradFunction grad(*job.with_loss,
                    GradSpec{.input = false, .weights = job.optimizer->parameters()});
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    std::vector<Tensor> total;
    for (int half = 0; half < 2; ++half) {
      auto [x, y] = batch_rows(100 + uint64_t(s), half * kBatch / 2, (half + 1) * kBatch / 2);
      const std::vector<Tensor> inputs{x, y};
      Gradients g = grad(std::span<const Tensor>(inputs));
      if (half == 0) losses.push_back(g.value.to_doubles()[0]);
      for (size_t i = 0; i < g.weights.size(); ++i) {
        if (half == 0) {
          total.push_back(g.weights[i]);
        } else {
          total[i] = ops::add(total[i], g.weights[i]);
          if (mean) total[i] = ops::mul(total[i], ops::scalar(0.5, total[i].dtype()));
        }
      }
    }
    job.optimizer->step(total);
  }
  write_result(out, job, losses);
  return 0;
}

int global(const std::string& mode, int steps, const std::string& out) {
  set_mode(mode);
  Job job = make_job(3);
  nn::TrainOneStepCell step(job.with_loss, job.optimizer);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    auto [x, y] = batch_rows(100 + uint64_t(s), 0, kBatch);
    losses.push_back(step(x, y).to_doubles()[0]);
  }
  write_result(out, job, losses);
  return 0;
}

// Worker 1 dies (SIGKILL) or hangs after joining; worker 0's next collective must fail, naming it.
// One training step with the group whole (a compiled step whose two buckets start inside it),
// then worker 1 goes, mid-training: worker 0's next step fails in a started bucket.
int lose_worker(bool die) {
  set_mode("GRAPH_MODE");
  communication::init();
  context::set_auto_parallel_context(
      {{"parallel_mode", "data_parallel"}, {"all_reduce_fusion_config", std::vector<int>{2}}});
  const int rank = communication::get_rank();
  Job job = make_job(3);
  nn::TrainOneStepCell step(job.with_loss, job.optimizer);
  auto [x, y] = batch_rows(100, 0, kBatch / 2);
  step(x, y).to_doubles();
  if (rank == 1) {
    if (die) ::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(6));
    return 1;
  }
  try {
    step(x, y).to_doubles();
    std::cout << "no error" << std::endl;
    return 1;
  } catch (const Error& e) {
    std::cout << e.what() << std::endl;
    // The group stays broken: a second collective fails at once with the first error.
    try {
      ops::call("all_reduce", {Tensor::full({1}, 1.0)})[0].to_doubles();
    } catch (const Error& again) {
      std::cout << again.what() << std::endl;
      return e.kind() == ErrorKind::kUnavailable ? 3 : 1;
    }
    return 1;
  }
}

// Worker 1 builds another network, or (device_num) says the job has 4 devices.
int mismatch(bool device_num) {
  communication::init();
  context::set_auto_parallel_context({{"parallel_mode", "data_parallel"}});
  const int rank = communication::get_rank();
  if (device_num && rank == 1) {
    context::set_auto_parallel_context({{"device_num", 4}, {"global_rank", 1}});
  }
  Job job = make_job(3, rank == 1 && !device_num ? 12 : 16);
  nn::TrainOneStepCell step(job.with_loss, job.optimizer);
  auto [x, y] = batch_rows(100, 0, kBatch / 2);
  try {
    step(x, y);
    return 1;
  } catch (const Error& e) {
    std::cout << e.what() << std::endl;
    communication::release();
    return 3;
  }
}

int run(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "collectives") return collectives();
  if (scenario == "train" && (argc == 6 || argc == 7)) {
    return train(argv[2], std::string(argv[3]) == "mean", std::atoi(argv[4]), argv[5],
                 argc == 7 ? std::atoi(argv[6]) : 0);
  }
  if (scenario == "reference" && argc == 6) {
    return reference(argv[2], std::string(argv[3]) == "mean", std::atoi(argv[4]), argv[5]);
  }
  if (scenario == "global" && argc == 5) return global(argv[2], std::atoi(argv[3]), argv[4]);
  if (scenario == "die") return lose_worker(true);
  if (scenario == "hang") return lose_worker(false);
  if (scenario == "mismatch") return mismatch(false);
  if (scenario == "device_num") return mismatch(true);
  std::cerr << "comm_worker: unknown scenario or arguments" << std::endl;
  return 2;
}

}  // namespace
}  // namespace mf

int main(int argc, char** argv) {
  try {
    return mf::run(argc, argv);
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << std::endl;
    return 1;
  }
}
