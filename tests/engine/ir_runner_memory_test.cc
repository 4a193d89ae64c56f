// Op by op (PYNATIVE), an .ir or .onnx graph releases each value after its last reader, as eager
// frameworks do, so a long chain peaks at its live set, not at the sum of its intermediates; the
// outputs the caller asked for are kept. Both synchronously and through the asynchronous queue.

#include <gtest/gtest.h>

#include "engine/eager/ir_runner.h"
#include "engine_fixture.h"
#include "ir/graph.h"
#include "runtime/memory_pool.h"

namespace mf {
namespace {

using IrRunnerMemoryTest = testing::EngineTest;

constexpr int64_t kElements = 256 * 1024;  // 1 MiB of float32
constexpr int kSteps = 40;                 // 40 MiB of intermediates in all

// x -> tanh -> neg -> tanh -> ... (kSteps ops), returning the last value and the first one.
std::unique_ptr<ir::Graph> long_chain() {
  auto g = std::make_unique<ir::Graph>("main");
  ir::Value v = g->add_parameter("x", {DType::kFloat32, {kElements}});
  ir::Value first;
  for (int i = 0; i < kSteps; ++i) {
    v = g->add_node(i % 2 ? "neg" : "tanh", {v})->output();
    if (i == 0) first = v;
  }
  g->add_output(v);
  g->add_output(first);  // asked for: kept to the end
  return g;
}

TEST_F(IrRunnerMemoryTest, ALongChainPeaksAtItsLiveSetBothWays) {
  for (bool synchronous : {true, false}) {
    SCOPED_TRACE(synchronous ? "synchronous" : "asynchronous");
    context::set({{"pynative_synchronize", synchronous}});
    engine::IrRunner runner(long_chain());
    const Tensor x = Tensor::randn({kElements}, 3);
    engine::sync();
    runtime::MemoryPool& pool = runtime::default_pool();
    const size_t before = pool.stats().in_use_bytes;
    pool.reset_peak();
    auto outputs = runner.run({{"x", x}}, 0);
    for (auto& [name, t] : outputs) t.sync();
    const size_t peak = pool.stats().peak_in_use_bytes - before;
    // The live set: an op's input and output, plus the first value kept as an output.
    EXPECT_LT(peak, size_t(8) << 20) << "peak " << peak << " bytes: intermediates are kept";
    EXPECT_EQ(outputs.size(), 2u);
    EXPECT_EQ(outputs[1].second.to_vector<float>().size(), size_t(kElements));
  }
}

}  // namespace
}  // namespace mf
