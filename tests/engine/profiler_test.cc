// The profiler: one kernel event per kernel run in both modes, kernels inside their iteration on
// the thread that ran them, FLOPs and bytes as computed by hand, a bounded event count, and files
// written whole or an error.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "context/context.h"
#include "engine/eager/ir_runner.h"
#include "engine/io/onnx/importer.h"
#include "engine/io/onnx/writer.h"
#include "engine/ops.h"
#include "runtime/memory_pool.h"
#include "runtime/profile_report.h"
#include "runtime/profiler.h"
#include "tests/engine/engine_fixture.h"

namespace mf {
namespace {

namespace fs = std::filesystem;
using context::Json;
using runtime::Profile;
using runtime::ProfileEvent;
using runtime::ProfileEventKind;
using runtime::Profiler;

class ProfilerTest : public testing::EngineTest {
 protected:
  void TearDown() override {
    if (Profiler::active()) Profiler::stop();
    EngineTest::TearDown();
  }

  // x (2, 3) -> MatMul w (3, 4) -> Relu -> Add b: three kernels, none fusable at opt_level 0.
  static onnx::ImportedModel model() {
    onnx::ModelWriter m(17);
    m.add_input("x", ir::DType::kFloat32, {2, 3});
    m.add_initializer("w",
                      Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}));
    m.add_initializer("b", Tensor::from_vector<float>({1, 1, 1, 1}, {4}));
    m.add_node("MatMul", {"x", "w"}, {"mm"});
    m.add_node("Relu", {"mm"}, {"r"});
    m.add_node("Add", {"r", "b"}, {"y"});
    m.add_output("y");
    return onnx::import_onnx_model_from_bytes(m.serialize(), "profiled.onnx");
  }

  // Runs the model `iterations` times in `mode`, each run an iteration span, under a profile.
  static Profile profile(const char* mode, int iterations) {
    context::set({{"mode", mode}, {"graph_kernel_flags", "--opt_level=0"}});
    onnx::ImportedModel m = model();
    std::map<std::string, Tensor> feed = m.weights;
    feed[m.inputs[0]] = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
    engine::IrRunner runner(std::move(m.graph));
    runner.run(feed, 0);  // compiled (GRAPH) or prepared (PYNATIVE) outside the profile
    engine::sync();
    Profiler::start();
    for (int i = 0; i < iterations; ++i) {
      const runtime::SpanTimer span(ProfileEventKind::kIteration, "iteration " + std::to_string(i));
      for (auto& [name, t] : runner.run(feed, 0)) t.sync();
      engine::sync();
    }
    Profile p = Profiler::stop();
    context::reset();
    return p;
  }

  static runtime::HardwareRates machine() {
    runtime::HardwareRates m;
    m.threads = 1;
    m.gemm_flops_per_s = 100e9;
    m.bandwidth_bytes_per_s = 10e9;
    return m;
  }
};

TEST_F(ProfilerTest, OneKernelEventPerKernelRunInBothModesInsideItsIteration) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    SCOPED_TRACE(mode);
    const Profile p = profile(mode, 3);
    std::map<std::string, int> kernels;
    std::vector<const ProfileEvent*> iterations;
    for (const ProfileEvent& e : p.events) {
      if (e.kind == ProfileEventKind::kKernel) ++kernels[e.name];
      if (e.kind == ProfileEventKind::kIteration) iterations.push_back(&e);
    }
    EXPECT_EQ(kernels, (std::map<std::string, int>{{"matmul", 3}, {"relu", 3}, {"add", 3}}));
    ASSERT_EQ(iterations.size(), 3u);
    EXPECT_EQ(p.dropped, 0u);
    // Every kernel lies inside one iteration's span; in GRAPH mode on the iteration's thread.
    for (const ProfileEvent& e : p.events) {
      if (e.kind != ProfileEventKind::kKernel) continue;
      EXPECT_EQ(e.mode, std::string(mode) == "GRAPH_MODE" ? "GRAPH" : "PYNATIVE");
      int inside = 0;
      for (const ProfileEvent* it : iterations) {
        inside += e.start_ns >= it->start_ns &&
                  e.start_ns + e.duration_ns <= it->start_ns + it->duration_ns;
        if (std::string(mode) == "GRAPH_MODE") {
          EXPECT_EQ(e.thread, it->thread);
        }
      }
      EXPECT_EQ(inside, 1) << e.name << " at " << e.start_ns;
    }
    // The trace is JSON with the same events, per thread, and the thread names.
    const Json trace = Json::parse(runtime::profile_trace_json(p, machine()));
    int kernel_events = 0;
    for (const Json& e : trace["traceEvents"]) {
      if (e["ph"] == "X" && e["cat"] == "kernel") {
        ++kernel_events;
        EXPECT_TRUE(e["args"].contains("flops") && e["args"].contains("inputs"));
      }
    }
    EXPECT_EQ(kernel_events, 9);
  }
}

TEST_F(ProfilerTest, FlopsAndBytesAreTheHandComputedOnes) {
  const Profile p = profile("GRAPH_MODE", 1);
  for (const ProfileEvent& e : p.events) {
    if (e.name == "matmul") {
      EXPECT_EQ(e.flops, 2.0 * 2 * 4 * 3);     // 2 M N K
      EXPECT_EQ(e.bytes, (6.0 + 12 + 8) * 4);  // x, w, out
      EXPECT_EQ(e.shapes, "f32(2, 3), f32(3, 4)");
    }
    if (e.name == "relu") {
      EXPECT_EQ(e.flops, 8.0);  // one per output element
    }
  }
  // conv2d: x (1, 2, 5, 5), w (3, 2, 3, 3), y (1, 3, 3, 3): 2 * 27 outputs * 18 taps.
  std::vector<float> x(50, 1.0f), w(54, 1.0f), y(27, 0.0f);
  const std::vector<ir::TensorView> in = {{x.data(), {ir::DType::kFloat32, {1, 2, 5, 5}}},
                                          {w.data(), {ir::DType::kFloat32, {3, 2, 3, 3}}}};
  const std::vector<ir::TensorView> out = {{y.data(), {ir::DType::kFloat32, {1, 3, 3, 3}}}};
  const ir::Attrs attrs;
  const runtime::KernelCost cost = runtime::kernel_cost({in, out, attrs, "conv2d"});
  EXPECT_EQ(cost.flops, 2.0 * 27 * 18);
  EXPECT_EQ(cost.bytes, (50.0 + 54 + 27) * 4);
  // Its gradients take the same products: conv2d_grad_input(dy, w) -> dx and
  // conv2d_grad_weight(x, dy) -> dw.
  const std::vector<ir::TensorView> grad_input_in = {out[0], in[1]};
  const std::vector<ir::TensorView> grad_input_out = {in[0]};
  EXPECT_EQ(runtime::kernel_cost({grad_input_in, grad_input_out, attrs, "conv2d_grad_input"}).flops,
            2.0 * 27 * 18);
  const std::vector<ir::TensorView> grad_weight_in = {in[0], out[0]};
  const std::vector<ir::TensorView> grad_weight_out = {in[1]};
  EXPECT_EQ(
      runtime::kernel_cost({grad_weight_in, grad_weight_out, attrs, "conv2d_grad_weight"}).flops,
      2.0 * 27 * 18);
  // matmul_bias (a matmul and its bias row fused): 2 M N K for the product, M N for the adds.
  std::vector<float> a(6), b(12), bias(4), c(8);
  const std::vector<ir::TensorView> mb_in = {{a.data(), {ir::DType::kFloat32, {2, 3}}},
                                             {b.data(), {ir::DType::kFloat32, {3, 4}}},
                                             {bias.data(), {ir::DType::kFloat32, {4}}}};
  const std::vector<ir::TensorView> mb_out = {{c.data(), {ir::DType::kFloat32, {2, 4}}}};
  const runtime::KernelCost mb = runtime::kernel_cost({mb_in, mb_out, attrs, "matmul_bias"});
  EXPECT_EQ(mb.flops, 2.0 * 2 * 4 * 3 + 2 * 4);
  EXPECT_EQ(mb.bytes, (6.0 + 12 + 4 + 8) * 4);
  // The summary judges the matmul against the given machine: 96 FLOP over 104 bytes is
  // bandwidth-bound (10 GB/s x 0.92 FLOP/byte < 100 GFLOP/s).
  const std::string summary = runtime::profile_summary(p, machine());
  EXPECT_NE(summary.find("| matmul | f32(2, 3), f32(3, 4) | 1 |"), std::string::npos) << summary;
  EXPECT_NE(summary.find("memory"), std::string::npos);
}

// Compiling inside a profile shows its passes and its phases on the compile track; the pool
// reserving memory from the system is a counter event.
TEST_F(ProfilerTest, CompilePhasesAndPoolGrowthAreEvents) {
  context::set({{"mode", "GRAPH_MODE"}});
  onnx::ImportedModel m = model();
  std::map<std::string, Tensor> feed = m.weights;
  feed[m.inputs[0]] = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
  engine::IrRunner runner(std::move(m.graph));
  Profiler::start();
  for (auto& [name, t] : runner.run(feed, 0)) t.sync();  // compiles here
  // A pool of 1 MiB blocks asked for 3 MiB must reserve a block from the system.
  const std::unique_ptr<runtime::MemoryPool> pool =
      runtime::make_memory_pool({.max_bytes = size_t{1} << 30, .block_bytes = size_t{1} << 20});
  const auto buffer = pool->allocate(size_t{3} << 20, "test");
  const Profile p = Profiler::stop();
  int passes = 0, prepare = 0, memory = 0;
  for (const ProfileEvent& e : p.events) {
    passes += e.kind == ProfileEventKind::kPass;
    prepare += e.kind == ProfileEventKind::kPhase && e.name == "prepare kernels";
    memory += e.kind == ProfileEventKind::kMemory && e.bytes >= double(3 << 20);
  }
  EXPECT_GT(passes, 0);
  EXPECT_EQ(prepare, 1);
  EXPECT_GE(memory, 1);
  const Json trace = Json::parse(runtime::profile_trace_json(p, machine()));
  int counters = 0;
  for (const Json& e : trace["traceEvents"]) counters += e["ph"] == "C";
  EXPECT_EQ(counters, memory > 0 ? int(std::count_if(p.events.begin(), p.events.end(),
                                                     [](const ProfileEvent& e) {
                                                       return e.kind == ProfileEventKind::kMemory;
                                                     }))
                                 : 0);
}

TEST_F(ProfilerTest, ALongRunKeepsAtMostTheLimitAndSaysSo) {
  context::set({{"mode", "PYNATIVE_MODE"}, {"pynative_synchronize", true}});
  const Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3});
  ops::call("relu", {x})[0].sync();  // the pool's first block, reserved before the profile
  Profiler::start(4);
  for (int i = 0; i < 10; ++i) ops::call("relu", {x})[0].sync();
  const Profile p = Profiler::stop();
  EXPECT_EQ(p.events.size(), 4u);
  EXPECT_EQ(p.dropped, 6u);
  EXPECT_NE(runtime::profile_summary(p, machine()).find("6 events were dropped"),
            std::string::npos);
  EXPECT_THROW(Profiler::stop(), Error);  // none on
  Profiler::start();
  EXPECT_THROW(Profiler::start(), Error);  // one at a time
}

TEST_F(ProfilerTest, AnUnwritableFolderIsAnErrorAndLeavesNoPartialFile) {
  const fs::path dir = fs::temp_directory_path() / ("mf_profile_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  const Profile p = profile("GRAPH_MODE", 1);
  try {
    runtime::write_profile(dir / "file" / "prof", p, machine());
    ADD_FAILURE() << "wrote under a regular file";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
  }
  runtime::write_profile(dir / "prof", p, machine());
  for (const char* name : {"trace.json", "summary.md", "roofline.svg"}) {
    EXPECT_TRUE(fs::is_regular_file(dir / "prof" / name)) << name;
  }
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir / "prof")) entries += e.is_regular_file();
  EXPECT_EQ(entries, 3) << "a temporary file was left behind";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mf

namespace mf {
namespace {

// With two intra-op threads, a kernel split into chunks shows its worker's share on a track of its
// own ("intra-op worker 1"), named after the kernel and inside that kernel's event in time. (Each
// profile of four kernels stands alone: the one checked is the first in which the worker ran.)
TEST_F(ProfilerTest, IntraOpWorkersHaveTracksOfTheirOwn) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two cores";
  context::set(
      {{"mode", "PYNATIVE_MODE"}, {"pynative_synchronize", true}, {"runtime_num_threads", 2}});
  const Tensor a = Tensor::uniform({1 << 22}, -1, 1, 1);
  ops::exp(a).sync();  // warm: the team exists before the profile
  // Whether the worker takes a chunk is up to the scheduler (under a loaded machine, the caller
  // may take them all): kernels run until one did, for up to five seconds.
  Profiler::start();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto restart = [] {
    const Profile seen = Profiler::stop();
    Profiler::start();
    return seen;
  };
  Profile p;
  do {
    for (int i = 0; i < 4; ++i) ops::exp(a).sync();
    p = restart();
  } while (
      std::none_of(p.events.begin(), p.events.end(),
                   [](const ProfileEvent& e) { return e.kind == ProfileEventKind::kWorker; }) &&
      std::chrono::steady_clock::now() < give_up);
  Profiler::stop();
  int workers = 0;
  for (const ProfileEvent& w : p.events) {
    if (w.kind != ProfileEventKind::kWorker) continue;
    ++workers;
    EXPECT_EQ(w.name, "exp");
    EXPECT_GT(w.chunks, 0);
    EXPECT_EQ(p.thread_names.at(w.thread).rfind("intra-op worker", 0), 0u)
        << p.thread_names.at(w.thread);
    int inside = 0;
    for (const ProfileEvent& k : p.events) {
      inside += k.kind == ProfileEventKind::kKernel && k.name == "exp" && k.thread != w.thread &&
                w.start_ns >= k.start_ns &&
                w.start_ns + w.duration_ns <= k.start_ns + k.duration_ns;
    }
    EXPECT_EQ(inside, 1);
  }
  EXPECT_GT(workers, 0) << "128 chunks of exp, for five seconds: the worker took none";
  const Json trace = Json::parse(runtime::profile_trace_json(p, machine()));
  int worker_events = 0;
  for (const Json& e : trace["traceEvents"]) {
    if (e.value("cat", "") == "worker") {
      ++worker_events;
      EXPECT_GT(e["args"]["chunks"].get<int>(), 0);
    }
  }
  EXPECT_EQ(worker_events, workers);
}

}  // namespace
}  // namespace mf
