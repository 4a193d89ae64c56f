// jit inside PYNATIVE mode (MindSpore 2.x's everyday way to compile): a cell marked for jit, or an
// mf::jit function, is traced and compiled through the driver with the context's compile settings,
// while the code around it runs op by op; its run is one task of the eager queue.

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "engine/graph/graph_mode.h"
#include "engine/graph/jit.h"
#include "engine/nn/cell.h"
#include "engine/ops.h"
#include "runtime/dnnl/primitive_cache.h"
#include "tests/engine/engine_fixture.h"

namespace mf::testing {
namespace {

// The bytes of the output of sample network `net` under `settings`, with child cells `jit_cells`
// marked for jit (the reports of the marked cells go to `reports` when given).
std::vector<unsigned char> run_bytes(const std::string& net, const context::Json& settings,
                                     const std::vector<std::string>& jit_cells = {},
                                     std::vector<engine::GraphRunReport>* reports = nullptr) {
  context::reset();
  context::set(settings);
  const models::NetSpec& spec = models::find_net(net);
  auto cell = spec.make(0);
  std::vector<nn::Cell*> marked;
  for (const std::string& name : jit_cells) {
    nn::Cell* child = cell->find_child(name);
    EXPECT_NE(child, nullptr) << net << " has no child " << name;
    if (child == nullptr) return {};
    child->set_jit(true);
    marked.push_back(child);
  }
  const Tensor y = (*cell)(spec.make_input(0));
  y.sync();
  const auto* bytes = static_cast<const unsigned char*>(y.raw_data());
  if (reports != nullptr) {
    for (nn::Cell* child : marked) reports->push_back(child->graph_report());
  }
  return std::vector<unsigned char>(bytes, bytes + y.nbytes());
}

struct JitCase {
  std::string net;
  std::vector<std::string> cells;
};

class JitInPynativeTest : public EngineTest, public ::testing::WithParamInterface<JitCase> {};

// deterministic=ON everywhere: every side promises the same bits.
TEST_P(JitInPynativeTest, SameBitsAsPynativeAndGraphAtEveryJitLevel) {
  const JitCase& c = GetParam();
  const context::Json eager = {{"mode", "PYNATIVE_MODE"}, {"deterministic", "ON"}};
  const std::vector<unsigned char> reference = run_bytes(c.net, eager);
  ASSERT_FALSE(reference.empty());
  for (const char* level : {"O0", "O1", "O2"}) {
    for (bool sync : {false, true}) {
      context::Json settings = eager;
      settings["jit_config"] = {{"jit_level", level}};
      settings["pynative_synchronize"] = sync;
      std::vector<engine::GraphRunReport> reports;
      EXPECT_EQ(run_bytes(c.net, settings, c.cells, &reports), reference)
          << c.net << " jit " << level << (sync ? " sync" : " async");
      ASSERT_EQ(reports.size(), c.cells.size());
      for (const auto& report : reports) {
        EXPECT_TRUE(report.compiled);
        EXPECT_TRUE(report.jit_region);
        EXPECT_TRUE(report.ran);
        // MindSpore downgrades O2 in PYNATIVE mode to O0 ("Pynative mode can not set jit_level
        // to O2, use O0 instead").
        const bool o2 = std::string(level) == "O2";
        EXPECT_EQ(report.jit_level, o2 ? "O0" : level);
        EXPECT_EQ(report.executor, "KernelExecutor");
      }
      settings["mode"] = "GRAPH_MODE";
      EXPECT_EQ(run_bytes(c.net, settings), reference) << c.net << " GRAPH jit " << level;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SampleNets, JitInPynativeTest,
                         ::testing::Values(JitCase{"transformer", {"encoder"}},
                                           JitCase{"mlp", {"fc1", "fc3"}},
                                           JitCase{"cnn", {"conv2", "fc1"}},
                                           JitCase{"softmax", {"softmax"}}),
                         [](const auto& info) { return info.param.net; });

class JitTest : public EngineTestWithDir {};

TEST_F(JitTest, ChildCellsAreFoundByNameScopeSegmentOrPath) {
  auto net = models::find_net("transformer").make(0);
  nn::Cell* encoder = net->find_child("encoder");
  ASSERT_NE(encoder, nullptr);
  EXPECT_EQ(net->find_child("encoder-TransformerEncoderLayer"), encoder);
  EXPECT_EQ(net->find_child("Default/net-Transformer/encoder-TransformerEncoderLayer"), encoder);
  ASSERT_NE(net->find_child("encoder.attention"), nullptr);
  EXPECT_EQ(net->find_child("decoder"), nullptr);
  EXPECT_EQ(net->find_child(""), nullptr);
}

TEST_F(JitTest, JitFunctionCompilesInPynativeWithTheContextsSettings) {
  context::set({{"jit_config", {{"jit_level", "O1"}}}, {"pynative_synchronize", true}});
  auto chain = jit([](const Tensor& x) {
    Tensor y = x;
    for (int i = 0; i < 10; ++i) y = ops::add(y, ops::scalar(1.0));
    return y;
  });
  const Tensor y = chain(Tensor::zeros({4}));
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(4, 10.0f));
  const engine::GraphRunReport& report = chain.graph_report();
  EXPECT_TRUE(report.compiled);
  EXPECT_TRUE(report.jit_region);
  EXPECT_EQ(report.jit_level, "O1");
  EXPECT_EQ(report.fusion_level, 2);  // O1 turns fusion on
  // The second call reuses the compiled form.
  chain(Tensor::zeros({4})).sync();
  EXPECT_FALSE(chain.graph_report().compiled);
}

TEST_F(JitTest, TensorsCrossTheBoundaryInBothDirectionsAsynchronously) {
  // Eager op -> jitted cell -> eager op, all queued: the jitted run waits for its input's task and
  // the op after it for the jitted run, by queue order alone.
  context::set({{"pynative_synchronize", false}});
  auto double_it = jit([](const Tensor& x) { return ops::mul(x, ops::scalar(2.0)); });
  const Tensor a = ops::add(Tensor::ones({1024}), ops::scalar(1.0));
  const Tensor b = double_it(a);
  const Tensor c = ops::add(b, ops::scalar(1.0));
  EXPECT_EQ(c.to_vector<float>(), std::vector<float>(1024, 5.0f));
}

TEST_F(JitTest, SaveGraphsDumpsTheJittedPartInPynative) {
  context::set({{"save_graphs", 1}, {"save_graphs_path", dir_.string()}});
  auto net = models::find_net("transformer").make(0);
  net->find_child("encoder")->set_jit(true);
  (*net)(models::find_net("transformer").make_input(0)).sync();
  const auto& files = net->find_child("encoder")->graph_report().dump_files;
  ASSERT_FALSE(files.empty());
  for (const auto& file : files) EXPECT_TRUE(std::filesystem::exists(file)) << file;
}

TEST_F(JitTest, PrecompileOnlyCompilesTheJittedPartsWithoutRunningThem) {
  context::set({{"precompile_only", true}});
  auto net = models::find_net("transformer").make(0);
  nn::Cell* encoder = net->find_child("encoder");
  encoder->set_jit(true);
  const Tensor y = (*net)(models::find_net("transformer").make_input(0));
  EXPECT_FALSE(y.defined());
  EXPECT_TRUE(encoder->graph_report().compiled);
  EXPECT_FALSE(encoder->graph_report().ran);
}

TEST_F(JitTest, AnErrorInsideTheJittedPartNamesTheNodeAndTheJitCallSite) {
  for (bool sync : {true, false}) {
    context::reset();
    context::set({{"pynative_synchronize", sync}});
    auto blow_up = jit([](const Tensor& x) { return ops::add(x, x); }, {}, "BlowUp");
    const Tensor x = Tensor::zeros({512, 1024});  // 2 MiB
    context::set({{"max_device_memory", "0.003GB"}});
    std::string message;
    try {
      blow_up(x).sync();  // the jit call site: this line
    } catch (const Error& e) {
      message = e.what();
    }
    context::set({{"max_device_memory", "1024GB"}});
    ASSERT_FALSE(message.empty()) << (sync ? "sync" : "async") << ": no error";
    EXPECT_NE(message.find("add"), std::string::npos) << message;
    EXPECT_NE(message.find("jit(BlowUp)"), std::string::npos) << message;
    EXPECT_NE(message.find("jit_pynative_test.cc"), std::string::npos) << message;
    EXPECT_NE(message.find("jit-compiled BlowUp"), std::string::npos) << message;
  }
}

TEST_F(JitTest, UnmarkedCellsStayOpByOpInPynative) {
  auto net = models::find_net("mlp").make(0);
  (*net)(models::find_net("mlp").make_input(0)).sync();
  EXPECT_FALSE(net->graph_report().compiled);
  EXPECT_TRUE(net->graph_report().executor.empty());
}

}  // namespace
}  // namespace mf::testing

namespace mf::testing {
namespace {

// Compiling creates the oneDNN primitives of the graph's convolutions, matmuls and pools: the
// first run of a freshly compiled graph creates none.
TEST_F(JitTest, CompilingPreparesTheKernelsSoTheFirstRunCreatesNothing) {
  context::set({{"mode", "GRAPH_MODE"}});
  // Shapes no other test uses, so their primitives cannot already be in the cache.
  const Tensor weight = Tensor::randn({5, 3, 3, 3}, 11);
  auto net = jit([&](const Tensor& x) {
    Tensor y = ops::conv2d(x, weight);
    y = ops::avg_pool2d(y);  // (a channels-last max pool is modeflow's own kernel)
    // Two rows: a single row is gemv.cc's product, with no primitive.
    return ops::matmul(ops::reshape(y, {2, -1}), Tensor::randn({5 * 17 * 19, 7}, 12));
  });
  const Tensor x = Tensor::randn({2, 3, 37, 41}, 13);
  const context::Snapshot snapshot = context::snapshot();
  const context::Policy policy = context::derive_policy(snapshot);
  engine::TraceResult trace = engine::Tracer::trace(net, x, policy.max_call_depth.value,
                                                    policy.reserve_class_name_in_scope.value);
  const auto& cache = runtime::dnnl_rt::primitive_cache();
  const int64_t before = cache.stats().creations;
  const auto network = engine::compile(std::move(trace.graph), x.type(), policy,
                                       context::fingerprint(snapshot, policy),
                                       engine::driver_options(policy, "test"));
  EXPECT_EQ(network->prepared_kernels, 3u);  // conv2d, avg_pool2d, matmul
  const int64_t after_compile = cache.stats().creations;
  EXPECT_GE(after_compile - before, 3);
  engine::run(*network, engine::bind_inputs(net, trace.bindings, x), policy, snapshot, "test");
  EXPECT_EQ(cache.stats().creations, after_compile) << "the first run created primitives";
}

}  // namespace
}  // namespace mf::testing
