#include "passes/passes.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes {
namespace {

using testing::expand;

// Inline, then drop the subgraphs nobody calls any more.
testing::PassResult inline_and_clean(std::string_view text) {
  auto graph = testing::parse(text);
  testing::PassResult result;
  result.changed = make_inline_calls()->run(*graph);
  ir::verify(*graph);
  make_dead_code_elimination()->run(*graph);
  ir::verify(*graph);
  result.text = testing::body(*graph);
  return result;
}

TEST(InlineCallsTest, InlinesNestedCallsKeepingScopes) {
  auto r = inline_and_clean(R"(
subgraph @main(%para1_x: f32(2), %para2_y: f32(2)) {
  %0 = call(%para1_x, %para2_y) {graph: "outer"} : (f32(2), f32(2)) -> (f32(2), f32(2))
      # scope: Default/net
  %1 = add(%0.0, %0.1) : (f32(2), f32(2)) -> (f32(2))
  Return(%1)
}

subgraph @outer(%para1_a: f32(2), %para2_b: f32(2)) {
  %const1 = Constant f32() [2]
  %0 = mul(%para1_a, %const1) : (f32(2), f32()) -> (f32(2))
      # scope: Default/net/outer-Scale
  %1 = call(%0) {graph: "inner"} : (f32(2)) -> (f32(2))
  Return(%1, %para2_b)
}

subgraph @inner(%para1_z: f32(2)) {
  %0 = exp(%para1_z) : (f32(2)) -> (f32(2))
      # scope: Default/net/inner-Exp
  Return(%0)
}
)");
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(2), %para2_y: f32(2)) {
  %const1 = Constant f32() [2]
  %0 = mul(%para1_x, %const1) : (f32(2), f32()) -> (f32(2))
      # scope: Default/net/outer-Scale
  %1 = exp(%0) : (f32(2)) -> (f32(2))
      # scope: Default/net/inner-Exp
  %2 = add(%1, %para2_y) : (f32(2), f32(2)) -> (f32(2))
  Return(%2)
}
)"));
}

TEST(InlineCallsTest, RecursiveCallsStay) {
  auto graph = testing::parse(R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = call(%para1_x) {graph: "f"} : (f32(2)) -> (f32(2))
  Return(%0)
}

subgraph @f(%para1_x: f32(2)) {
  %0 = call(%para1_x) {graph: "f"} : (f32(2)) -> (f32(2))
  Return(%0)
}
)");
  EXPECT_FALSE(make_inline_calls()->run(*graph));
}

// Inlining is top-down: a chain of nested calls (main -> level0 -> level1 -> ...) lands in main
// once, and the callees are not flattened on their own. Flattening each callee first copied every
// suffix of the chain (n^2 / 2 nodes for n calls); here the nodes created are exactly the n in
// main.
TEST(InlineCallsTest, NestedCallChainCopiesEachBodyOnce) {
  constexpr int kDepth = 64;
  std::string text = R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = call(%para1_x) {graph: "level0"} : (f32(2)) -> (f32(2))
  Return(%0)
}
)";
  for (int i = 0; i < kDepth; ++i) {
    text += "\nsubgraph @level" + std::to_string(i) + "(%para1_x: f32(2)) {\n" +
            "  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))\n";
    if (i + 1 < kDepth) {
      text += "  %1 = call(%0) {graph: \"level" + std::to_string(i + 1) +
              "\"} : (f32(2)) -> (f32(2))\n  Return(%1)\n}\n";
    } else {
      text += "  Return(%0)\n}\n";
    }
  }
  auto graph = testing::parse(text);
  ASSERT_TRUE(make_inline_calls()->run(*graph));
  ir::verify(*graph);
  EXPECT_EQ(graph->num_nodes(), size_t{kDepth});  // one neg per level, no call left
  for (const ir::Graph* sub : graph->subgraphs()) {
    EXPECT_LE(sub->num_nodes(), 2u) << "@" << sub->name() << " was flattened on its own";
  }
}

TEST(InlineCallsTest, NoCallsNoChange) {
  const char* text = R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  Return(%0)
}
)";
  auto r = testing::run_pass(*make_inline_calls(), text);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.text, expand(text));
}

}  // namespace
}  // namespace mf::passes
