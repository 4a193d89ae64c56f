// All-reduce bandwidth of the workers of a job (start it with mf launch): modeflow's
// Communicator (what the all_reduce op and the gradient reducer call) against Gloo called
// directly on its own context, same sizes, same processes, in turn. Worker 0 prints a table.
//
//   mf launch --worker_num=2 -- build/benchmarks/allreduce_bench

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "engine/distributed/communication.h"
#include "runtime/comm/communicator.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double median_seconds(F&& f, int repeats) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  mf::communication::init();
  auto& world = *mf::runtime::comm::world();
  const int rank = world.rank(), size = world.size();
  // Gloo's own context, met through a file store named after the job's port.
  const std::string store_dir =
      (std::filesystem::temp_directory_path() /
       ("mf_allreduce_bench_" + std::string(std::getenv("MS_SCHED_PORT") ?: "0")))
          .string();
  std::filesystem::create_directories(store_dir);
  gloo::rendezvous::FileStore file_store(store_dir);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto gloo_context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo_context->connectFullMesh(file_store, device);
  world.barrier("bench start");

  if (rank == 0) {
    std::printf("| bytes | modeflow ms | Gloo ms | modeflow GB/s | Gloo GB/s | ratio |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|\n");
  }
  for (size_t bytes = 4096; bytes <= (size_t{64} << 20); bytes *= 4) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    const int repeats = bytes >= (size_t{16} << 20) ? 9 : 41;
    double ours = 0, theirs = 0;
    for (int round = 0; round < 2; ++round) {  // A B A B: take the better of each
      const double a = median_seconds(
          [&] {
            world.all_reduce(data.data(), data.size(), mf::ir::DType::kFloat32,
                             mf::runtime::comm::ReduceOp::kSum, "bench");
          },
          repeats);
      const double b = median_seconds(
          [&] {
            gloo::AllreduceOptions options(gloo_context);
            options.setOutput(data.data(), data.size());
            options.setInput(data.data(), data.size());
            options.setReduceFunction(
                static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
            gloo::allreduce(options);
          },
          repeats);
      ours = round == 0 ? a : std::min(ours, a);
      theirs = round == 0 ? b : std::min(theirs, b);
      std::fill(data.begin(), data.end(), 1.0f);
    }
    if (rank == 0) {
      std::printf("| %zu | %.3f | %.3f | %.2f | %.2f | %.2fx |\n", bytes, ours * 1e3, theirs * 1e3,
                  bytes / ours / 1e9, bytes / theirs / 1e9, ours / theirs);
    }
  }
  world.barrier("bench end");
  gloo_context.reset();
  mf::communication::release();
  if (rank == 0) std::filesystem::remove_all(store_dir);
  return 0;
}
