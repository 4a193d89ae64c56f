// check_plan: every plan the planner makes passes, at both memory levels, with and without reuse,
// with subplans (shared and recursive); each kind of damage to a plan is refused with a message
// naming it.

#include "passes/plan_check.h"

#include <gtest/gtest.h>

#include <functional>

#include "base/error.h"
#include "ir/graph.h"
#include "passes/plan_memory.h"
#include "plan_test_util.h"

namespace mf::passes {
namespace {

using ir::Graph;
using runtime::Plan;
using runtime::SlotKind;

using testing::f32;
using testing::plan;

// x -> matmul -> relu -> tanh -> neg, and matmuls two steps apart: in-place chains and reuse.
std::unique_ptr<Graph> mixed_graph() {
  auto g = std::make_unique<Graph>("mixed");
  auto* x = g->add_parameter("x", f32({64, 64}));
  ir::Value v = g->add_node("matmul", {x, x});
  for (const char* op : {"relu", "tanh", "neg"}) v = g->add_node(op, {v});
  for (int i = 0; i < 4; ++i) v = g->add_node("matmul", {v, x});
  g->add_output(g->add_node("add", {v, g->add_constant<float>({}, {1.0f})}));
  return g;
}

// @count(n) = cond(n < 10, n) then @step(n) = @count(n + 1), else n; main calls @count twice.
std::unique_ptr<Graph> recursive_graph() {
  auto g = std::make_unique<Graph>("main");
  auto* n = g->add_parameter("n", f32({}));
  Graph* count = g->add_subgraph("count");
  auto* cn = count->add_parameter("n", f32({}));
  auto* pred = count->add_node("less", {cn, count->add_constant<float>({}, {10.0f})});
  count->add_output(count->create_node(
      nullptr, "cond", {pred, cn},
      {{"then_branch", std::string("step")}, {"else_branch", std::string("done")}}, {f32({})}));
  Graph* step = g->add_subgraph("step");
  auto* sn = step->add_parameter("n", f32({}));
  auto* next = step->add_node("add", {sn, step->add_constant<float>({}, {1.0f})});
  step->add_output(
      step->create_node(nullptr, "call", {next}, {{"graph", std::string("count")}}, {f32({})}));
  Graph* done = g->add_subgraph("done");
  done->add_output(done->add_parameter("n", f32({})));
  auto* first = g->create_node(nullptr, "call", {n}, {{"graph", std::string("count")}}, {f32({})});
  g->add_output(
      g->create_node(nullptr, "call", {first}, {{"graph", std::string("count")}}, {f32({})}));
  return g;
}

std::string refusal(const Plan& p) {
  try {
    check_plan(p);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << e.what();
    return e.what();
  }
  return {};
}

TEST(PlanCheck, EveryPlanThePlannerMakesPasses) {
  for (const auto& make : {std::function<std::unique_ptr<Graph>()>(mixed_graph),
                           std::function<std::unique_ptr<Graph>()>(recursive_graph)}) {
    auto g = make();
    for (MemoryLevel level : {MemoryLevel::kO0, MemoryLevel::kO1}) {
      for (bool reuse : {true, false}) {
        const Plan p = plan(*g, level, reuse);
        EXPECT_EQ(refusal(p), "") << g->name() << " " << p.describe();
      }
    }
  }
}

// Applies `damage` to a fresh O1 plan of the mixed graph and returns check_plan's message.
std::string damaged(const std::function<void(Plan&)>& damage) {
  auto g = mixed_graph();
  Plan p = plan(*g, MemoryLevel::kO1);
  EXPECT_EQ(refusal(p), "");
  damage(p);
  return refusal(p);
}

int first_arena_slot(const Plan& p, int skip = 0) {
  for (size_t id = 0; id < p.slots.size(); ++id) {
    if (p.slots[id].kind == SlotKind::kArena && skip-- == 0) return static_cast<int>(id);
  }
  return -1;
}

TEST(PlanCheck, LiveTensorsSharingBytesAreRefused) {
  const std::string msg = damaged([](Plan& p) {
    for (runtime::Slot& slot : p.slots) {
      if (slot.kind == SlotKind::kArena) slot.offset = 0;
    }
  });
  EXPECT_NE(msg.find("share bytes while both are alive"), std::string::npos) << msg;
}

TEST(PlanCheck, ArenaSlotsOutsideTheArenaAreRefused) {
  const std::string msg = damaged([](Plan& p) { p.arena_bytes = 64; });
  EXPECT_NE(msg.find("lies outside the arena"), std::string::npos) << msg;
}

TEST(PlanCheck, SlotsTooSmallForTheirTypeAreRefused) {
  const std::string msg = damaged([](Plan& p) { p.slots[first_arena_slot(p)].bytes = 64; });
  EXPECT_NE(msg.find("needs 16384"), std::string::npos) << msg;
}

TEST(PlanCheck, AMissingDependencyIsRefused) {
  const std::string msg = damaged([](Plan& p) { p.steps[2].depends_on.clear(); });
  EXPECT_NE(msg.find("step 2 does not wait for step 1"), std::string::npos) << msg;
}

TEST(PlanCheck, StepsOutOfOrderAreRefused) {
  const std::string msg = damaged([](Plan& p) { std::swap(p.steps[1], p.steps[2]); });
  EXPECT_NE(msg.find("before it is written"), std::string::npos) << msg;
}

TEST(PlanCheck, AStepReadingTheWrongSlotIsRefused) {
  const std::string msg = damaged([](Plan& p) { p.steps[3].inputs[0] = p.steps[1].outputs[0]; });
  EXPECT_NE(msg.find("which is not the slot of that value"), std::string::npos) << msg;
}

TEST(PlanCheck, ADroppedStepIsRefused) {
  const std::string msg = damaged([](Plan& p) { p.steps.pop_back(); });
  EXPECT_NE(msg.find("steps, the graph"), std::string::npos) << msg;
}

TEST(PlanCheck, AFalseInPlaceClaimIsRefused) {
  const std::string msg = damaged([](Plan& p) {
    for (runtime::Step& step : p.steps) {
      if (!step.in_place && step.node->op() == "matmul" && &step != &p.steps.front()) {
        step.in_place = true;
        return;
      }
    }
  });
  // The op is asked first: a matmul never runs in place, whatever the offsets say.
  EXPECT_NE(msg.find("runs matmul in place, which that op does not allow"), std::string::npos)
      << msg;
}

// A forged entry whose bytes do agree: a matmul marked in place with its output placed on its
// input. The offsets are consistent, but a matmul reads its input while it writes: never in place.
TEST(PlanCheck, AnInPlaceStepOfAnOpThatMayNotWriteOverItsInputIsRefused) {
  // x -> neg -> matmul(., x) -> relu: the matmul's input dies at the matmul.
  auto g = std::make_unique<Graph>("forged");
  auto* x = g->add_parameter("x", f32({16, 16}));
  ir::Value v = g->add_node("matmul", {g->add_node("neg", {x}), x});
  g->add_output(g->add_node("relu", {v}));
  Plan p = plan(*g, MemoryLevel::kO1);
  ASSERT_EQ(refusal(p), "");
  bool forged = false;
  for (runtime::Step& step : p.steps) {
    if (step.node->op() != "matmul") continue;
    ASSERT_FALSE(step.in_place);
    const int in = step.inputs[0], out = step.outputs[0];
    ASSERT_EQ(p.slots[in].kind, SlotKind::kArena);
    ASSERT_EQ(p.slots[out].kind, SlotKind::kArena);
    step.in_place = true;
    p.slots[out].offset = p.slots[in].offset;
    forged = true;
  }
  ASSERT_TRUE(forged);
  const std::string msg = refusal(p);
  EXPECT_NE(msg.find("runs matmul in place, which that op does not allow"), std::string::npos)
      << msg;
}

// An in-place step whose input is read again later: its bytes would be gone.
TEST(PlanCheck, AnInPlaceStepOverAnInputReadLaterIsRefused) {
  auto g = std::make_unique<Graph>("reread");
  auto* x = g->add_parameter("x", f32({8, 8}));
  ir::Value a = g->add_node("neg", {x});
  ir::Value b = g->add_node("relu", {a});
  g->add_output(g->add_node("add", {b, a}));
  Plan p = plan(*g, MemoryLevel::kO1);
  ASSERT_EQ(refusal(p), "");
  for (runtime::Step& step : p.steps) {
    if (step.node->op() != "relu") continue;
    ASSERT_FALSE(step.in_place);
    step.in_place = true;
    p.slots[step.outputs[0]].offset = p.slots[step.inputs[0]].offset;
  }
  const std::string msg = refusal(p);
  EXPECT_FALSE(msg.empty());
}

TEST(PlanCheck, AnEarlyReleaseIsRefused) {
  auto g = mixed_graph();
  Plan p = plan(*g, MemoryLevel::kO0);
  ASSERT_EQ(refusal(p), "");
  // Move every release to the first step: slots still read later would be freed.
  for (runtime::Step& step : p.steps) {
    if (&step == &p.steps.front()) continue;
    p.steps.front().release_after.insert(p.steps.front().release_after.end(),
                                         step.release_after.begin(), step.release_after.end());
    step.release_after.clear();
  }
  const std::string msg = refusal(p);
  EXPECT_NE(msg.find("releases slot"), std::string::npos) << msg;
}

// A pooled in-place step hands input 0's buffer to output 0: input 0 must die there.
TEST(PlanCheck, APooledInPlaceStepWhoseInputLivesOnIsRefused) {
  auto g = mixed_graph();
  Plan p = plan(*g, MemoryLevel::kO0);
  ASSERT_EQ(refusal(p), "");
  runtime::Step* relu = nullptr;
  for (runtime::Step& step : p.steps) {
    if (step.node->op() == "relu") relu = &step;
  }
  ASSERT_NE(relu, nullptr);
  ASSERT_TRUE(relu->in_place);
  // Keep relu's input alive one step longer: it may no longer be written over.
  runtime::Step& next = *(relu + 1);
  next.release_after.insert(next.release_after.end(), relu->release_after.begin(),
                            relu->release_after.end());
  relu->release_after.clear();
  const std::string msg = refusal(p);
  EXPECT_NE(msg.find("runs in place but its input 0 and output 0 differ"), std::string::npos)
      << msg;
}

TEST(PlanCheck, OutOfRangeIdsAreRefused) {
  const std::string msg = damaged([](Plan& p) { p.steps[1].inputs[0] = 1000; });
  EXPECT_NE(msg.find("input slot 1000 is out of range"), std::string::npos) << msg;
}

TEST(PlanCheck, ASubplanOfAnotherSubgraphIsRefusedAndNamed) {
  auto g = recursive_graph();
  Plan p = plan(*g, MemoryLevel::kO1);
  ASSERT_EQ(refusal(p), "");
  // @count's cond names @step then @done: swap them.
  auto count = std::make_shared<Plan>(*p.steps[0].subplans[0]);
  std::swap(count->steps.back().subplans[0], count->steps.back().subplans[1]);
  p.steps[0].subplans[0] = count;
  const std::string msg = refusal(p);
  EXPECT_NE(msg.find("is not the plan of subgraph @step"), std::string::npos) << msg;
  EXPECT_NE(msg.find("in the plan of graph @count"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mf::passes
