// The memory planner: slot kinds per memory level, lifetimes and releases, arena reuse lowering the
// planned peak, no overlap without reuse, in-place marking, dependencies and subplans.

#include "passes/plan_memory.h"
#include "plan_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "ir/graph.h"

namespace mf::passes {
namespace {

using ir::Graph;
using runtime::Plan;
using runtime::SlotKind;

using testing::f32;
using testing::plan;

constexpr size_t kTensorBytes = 64 * 64 * 4;

// x -> matmul -> relu -> tanh -> sigmoid -> neg -> reduce_sum: a chain that ends small.
std::unique_ptr<Graph> chain_graph() {
  auto g = std::make_unique<Graph>("chain");
  auto* x = g->add_parameter("x", f32({64, 64}));
  ir::Value v = g->add_node("matmul", {x, x});
  for (const char* op : {"relu", "tanh", "sigmoid", "neg"}) v = g->add_node(op, {v});
  g->add_output(g->add_node("reduce_sum", {v}, {{"axes", std::vector<int64_t>{}}}));
  return g;
}

// Five matmuls in a row: nothing in place, but tensors two steps apart can share bytes.
std::unique_ptr<Graph> matmul_chain() {
  auto g = std::make_unique<Graph>("matmuls");
  auto* x = g->add_parameter("x", f32({64, 64}));
  ir::Value v = x;
  for (int i = 0; i < 5; ++i) v = g->add_node("matmul", {v, x});
  g->add_output(v);
  return g;
}

bool overlaps(const runtime::Slot& a, const runtime::Slot& b) {
  return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

TEST(PlanMemory, O0GivesEveryIntermediateItsOwnPooledBufferFreedAfterItsLastReader) {
  auto g = chain_graph();
  const Plan p = plan(*g, MemoryLevel::kO0);
  ASSERT_EQ(p.steps.size(), 6u);
  EXPECT_EQ(p.arena_bytes, 0u);
  for (const auto& slot : p.slots) EXPECT_NE(slot.kind, SlotKind::kArena);
  // Each intermediate goes back to the pool right after the step that reads it last.
  EXPECT_TRUE(p.steps[0].release_after.empty());
  for (size_t s = 1; s < p.steps.size(); ++s) {
    EXPECT_EQ(p.steps[s].release_after, std::vector<int>{p.steps[s - 1].outputs[0]}) << s;
  }
  const auto& out = p.slots[p.outputs[0]];
  EXPECT_EQ(out.kind, SlotKind::kPooled);
  EXPECT_TRUE(out.is_output);
  EXPECT_EQ(p.slots[p.parameters[0]].kind, SlotKind::kParameter);
  // The live set: a step's input and output, never the sum of all five 16 KiB intermediates.
  EXPECT_EQ(p.planned_peak_bytes, 2 * kTensorBytes);
  EXPECT_NE(p.describe().find("pooled, freed after last use"), std::string::npos);
}

TEST(PlanMemory, O0ReleasesAValueNothingReadsRightAfterItsProducer) {
  auto g = std::make_unique<Graph>("dead");
  auto* x = g->add_parameter("x", f32({64, 64}));
  g->add_node("relu", {x});  // read by nobody
  g->add_output(g->add_node("tanh", {x}));
  const Plan p = plan(*g, MemoryLevel::kO0);
  ASSERT_EQ(p.steps.size(), 2u);
  const int dead = p.steps[0].node->op() == "relu" ? 0 : 1;
  EXPECT_EQ(p.steps[dead].release_after, std::vector<int>{p.steps[dead].outputs[0]});
}

TEST(PlanMemory, O1PeakIsLowerThanO0OnAChain) {
  auto g = chain_graph();
  const Plan o0 = plan(*g, MemoryLevel::kO0);
  const Plan o1 = plan(*g, MemoryLevel::kO1);
  EXPECT_LT(o1.planned_peak_bytes, o0.planned_peak_bytes);
  // In place all the way: one tensor's bytes hold all five intermediates.
  EXPECT_EQ(o1.arena_bytes, kTensorBytes);
  EXPECT_EQ(o1.planned_peak_bytes, kTensorBytes + 64);  // + the pooled scalar output
  EXPECT_NE(o1.describe().find("arena_bytes: 16384"), std::string::npos);
}

TEST(PlanMemory, O1ReusesBytesOfDeadTensors) {
  auto g = matmul_chain();
  const Plan reuse = plan(*g, MemoryLevel::kO1);
  const Plan no_reuse = plan(*g, MemoryLevel::kO1, /*reuse=*/false);
  // Four intermediates, at most two alive at once.
  EXPECT_EQ(reuse.arena_bytes, 2 * kTensorBytes);
  EXPECT_EQ(no_reuse.arena_bytes, 4 * kTensorBytes);
  EXPECT_LT(reuse.planned_peak_bytes, no_reuse.planned_peak_bytes);
  for (const auto& slot : reuse.slots) {
    if (slot.kind == SlotKind::kArena) {
      EXPECT_LE(slot.offset + slot.bytes, reuse.arena_bytes);
    }
  }
  // Step 2 overwrites step 0's bytes: it waits for step 1, their reader.
  const auto& deps = reuse.steps[2].depends_on;
  EXPECT_NE(std::find(deps.begin(), deps.end(), 1), deps.end());
}

TEST(PlanMemory, InPlaceWhereElementwiseInputDies) {
  auto g = chain_graph();
  const Plan p = plan(*g, MemoryLevel::kO1);
  // relu, tanh, sigmoid and neg take their input's bytes; matmul and reduce_sum cannot.
  std::vector<std::string> in_place;
  for (const auto& step : p.steps) {
    if (!step.in_place) continue;
    in_place.push_back(step.node->op());
    EXPECT_EQ(p.slots[step.outputs[0]].offset, p.slots[step.inputs[0]].offset);
  }
  EXPECT_EQ(in_place, (std::vector<std::string>{"relu", "tanh", "sigmoid", "neg"}));
}

// Memory O0 too (each tensor its own pooled buffer): the same steps hand their dying input's
// buffer to their output, which the executor does in a serial run.
TEST(PlanMemory, O0PooledStepsRunInPlaceWhereElementwiseInputDies) {
  auto g = chain_graph();
  const Plan p = plan(*g, MemoryLevel::kO0);
  std::vector<std::string> in_place;
  for (const auto& step : p.steps) {
    if (!step.in_place) continue;
    in_place.push_back(step.node->op());
    EXPECT_EQ(p.slots[step.inputs[0]].kind, SlotKind::kPooled);
    EXPECT_EQ(p.slots[step.outputs[0]].kind, SlotKind::kPooled);
    EXPECT_NE(std::find(step.release_after.begin(), step.release_after.end(), step.inputs[0]),
              step.release_after.end());
  }
  EXPECT_EQ(in_place, (std::vector<std::string>{"relu", "tanh", "sigmoid", "neg"}));
}

TEST(PlanMemory, NoInPlaceWhenInputLivesOnOrIsAParameter) {
  Graph g("g");
  auto* x = g.add_parameter("x", f32({16}));
  auto* a = g.add_node("relu", {x});  // x is a parameter: never overwritten
  auto* b = g.add_node("exp", {a});   // a is read again below
  auto* c = g.add_node("add", {a, b});
  g.add_output(c);
  for (const MemoryLevel level : {MemoryLevel::kO0, MemoryLevel::kO1}) {
    const Plan p = plan(g, level);
    for (const auto& step : p.steps) EXPECT_FALSE(step.in_place) << step.node->op();
  }
}

TEST(PlanMemory, WithoutReuseOffsetsNeverOverlap) {
  auto g = chain_graph();
  const Plan p = plan(*g, MemoryLevel::kO1, /*reuse=*/false);
  std::vector<const runtime::Slot*> arena;
  for (const auto& slot : p.slots) {
    if (slot.kind == SlotKind::kArena) arena.push_back(&slot);
  }
  ASSERT_EQ(arena.size(), 5u);
  for (size_t i = 0; i < arena.size(); ++i) {
    for (size_t j = i + 1; j < arena.size(); ++j) EXPECT_FALSE(overlaps(*arena[i], *arena[j]));
  }
  for (const auto& step : p.steps) EXPECT_FALSE(step.in_place);
  EXPECT_EQ(p.arena_bytes, 5 * kTensorBytes);
}

TEST(PlanMemory, ReusedSlotsNeverOverlapWhileBothAlive) {
  auto g = matmul_chain();
  const Plan p = plan(*g, MemoryLevel::kO1);
  // Lifetimes from the steps: [producer, last reader].
  std::vector<std::pair<int, int>> life(p.slots.size(), {-1, -1});
  for (size_t s = 0; s < p.steps.size(); ++s) {
    for (int o : p.steps[s].outputs) life[o] = {int(s), int(s)};
    for (int i : p.steps[s].inputs) life[i].second = int(s);
  }
  for (size_t a = 0; a < p.slots.size(); ++a) {
    for (size_t b = a + 1; b < p.slots.size(); ++b) {
      if (p.slots[a].kind != SlotKind::kArena || p.slots[b].kind != SlotKind::kArena) continue;
      const bool alive_together =
          life[a].first <= life[b].second && life[b].first <= life[a].second;
      if (alive_together) {
        EXPECT_FALSE(overlaps(p.slots[a], p.slots[b])) << a << " " << b;
      }
    }
  }
}

TEST(PlanMemory, DependenciesCoverDataSideEffectsAndReuse) {
  Graph g("g");
  auto* x = g.add_parameter("x", f32({16}));
  auto* h = g.add_node("exp", {x});      // 0
  auto* p1 = g.add_node("print", {x});   // 1
  auto* r = g.add_node("relu", {h});     // 2 reads h
  auto* s = g.add_node("sigmoid", {h});  // 3: last reader of h, in place
  auto* p2 = g.add_node("print", {x});   // 4: after print 1
  auto* t = g.add_node("add", {r, s});   // 5
  g.add_output(t);
  g.add_output(p1);
  g.add_output(p2);
  const Plan p = plan(g, MemoryLevel::kO1);
  auto deps = [&](int step) { return p.steps[step].depends_on; };
  EXPECT_EQ(deps(2), std::vector<int>{0});
  EXPECT_TRUE(p.steps[3].in_place);
  // sigmoid overwrites h: it waits for relu, the other reader.
  EXPECT_EQ(deps(3), (std::vector<int>{0, 2}));
  EXPECT_EQ(deps(4), std::vector<int>{1});
  EXPECT_EQ(deps(5), (std::vector<int>{2, 3}));
}

TEST(PlanMemory, ControlFlowStepsGetSubplans) {
  Graph g("main");
  auto* x = g.add_parameter("x", f32({4}));
  Graph* f = g.add_subgraph("f");
  f->add_output(f->add_node("neg", {f->add_parameter("x", f32({4}))}));
  auto* a = g.create_node(nullptr, "call", {x}, {{"graph", std::string("f")}}, {f32({4})});
  auto* b = g.create_node(nullptr, "call", {a}, {{"graph", std::string("f")}}, {f32({4})});
  g.add_output(b);
  const Plan p = plan(g, MemoryLevel::kO1);
  ASSERT_EQ(p.steps[0].subplans.size(), 1u);
  EXPECT_EQ(p.steps[0].subplans[0]->graph, f);
  EXPECT_EQ(p.steps[0].subplans[0], p.steps[1].subplans[0]);  // planned once
  EXPECT_EQ(p.steps[1].depends_on, std::vector<int>{0});
  const std::string text = p.describe();
  EXPECT_NE(text.find("@f"), std::string::npos);
  size_t pos = 0;
  while ((pos = text.find('\n', pos)) != std::string::npos && pos + 1 < text.size()) {
    EXPECT_EQ(text.compare(pos + 1, 2, "# "), 0) << text;
    ++pos;
  }
}

TEST(PlanMemory, MissingSubgraphIsNotFound) {
  Graph g("main");
  auto* x = g.add_parameter("x", f32({4}));
  g.add_output(g.create_node(nullptr, "call", {x}, {{"graph", std::string("nope")}}, {f32({4})}));
  try {
    plan(g, MemoryLevel::kO0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("@nope"), std::string::npos);
  }
}

}  // namespace
}  // namespace mf::passes
