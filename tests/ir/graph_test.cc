#include "ir/graph.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "ir/call_graph.h"
#include "tests/ir/test_ops.h"

namespace mf::ir {
namespace {

using testing::f32;

class GraphTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::register_test_ops(); }
};

std::vector<std::string> ops_in_order(Graph& g) {
  std::vector<std::string> out;
  for (Node& n : g.nodes()) out.push_back(n.op());
  return out;
}

TEST_F(GraphTest, BuildInfersTypesAndRecordsUses) {
  Graph g("net");
  Parameter* x = g.add_parameter("x", f32({4, 3}));
  Parameter* w = g.add_parameter("fc.weight", f32({5, 3}), /*is_weight=*/true);
  Node* mm = g.add_node("test_matmul", {x, w}, {{"transpose_b", true}}, {"Default/fc", "a.cc:3"});
  Node* r = g.add_node("test_relu", {mm});
  g.add_output(r);

  EXPECT_EQ(mm->output_type(), f32({4, 5}));
  EXPECT_EQ(mm->def(), find_op("test_matmul"));
  EXPECT_EQ(std::get<bool>(mm->attrs().at("transpose_a")), false);  // default filled in
  EXPECT_EQ(mm->scope(), "Default/fc");
  EXPECT_EQ(mm->location(), "a.cc:3");
  EXPECT_TRUE(w->is_weight());
  EXPECT_EQ(g.find_parameter("fc.weight"), w);
  ASSERT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(x->uses()[0], (Use{mm, 0}));
  EXPECT_EQ(w->uses()[0], (Use{mm, 1}));
  EXPECT_EQ(mm->uses(), (UseList{{r, 0}}));
  EXPECT_EQ(r->uses(), (UseList{{nullptr, 0}}));
  EXPECT_EQ(g.uses(r), r->uses());
  EXPECT_NE(mm->id(), r->id());
  EXPECT_EQ(g.num_nodes(), 2u);
}

TEST_F(GraphTest, AddNodeErrors) {
  Graph g;
  Parameter* x = g.add_parameter("x", f32({2}));
  Parameter* y = g.add_parameter("y", f32({3}));
  EXPECT_THROW(g.add_node("test_nope", {x}), Error);
  try {
    g.add_node("test_add", {x, y});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("shapes (2) and (3) cannot be broadcast"), std::string::npos);
  }
  EXPECT_THROW(g.add_parameter("x", f32({1})), Error);      // duplicate
  EXPECT_THROW(g.add_parameter("a b", f32({1})), Error);    // not printable bare
  EXPECT_THROW(g.add_node("test_relu", {Value()}), Error);  // null operand
  Graph other;
  Parameter* foreign = other.add_parameter("z", f32({2}));
  EXPECT_THROW(g.add_node("test_relu", {foreign}), Error);
  EXPECT_THROW(g.add_node("test_relu", {x}, {}, {"a\nb", ""}), Error);
  EXPECT_EQ(g.num_nodes(), 0u);
}

TEST_F(GraphTest, ReplaceAllUsesMovesOperandsAndOutputs) {
  Graph g;
  Parameter* x = g.add_parameter("x", f32({3}));
  Node* a = g.add_node("test_relu", {x});
  Node* b = g.add_node("test_add", {a, a});
  g.add_output(a);
  g.add_output(b);

  Node* c = g.add_node("test_relu", {x});
  g.replace_all_uses(a, c);
  EXPECT_EQ(b->input(0), Value(c));
  EXPECT_EQ(b->input(1), Value(c));
  EXPECT_EQ(g.outputs()[0], Value(c));
  EXPECT_TRUE(a->uses().empty());
  EXPECT_EQ(c->uses().size(), 3u);

  // y = f(x); replace x by y everywhere except in y itself.
  Node* y = g.add_node("test_relu", {c});
  g.replace_all_uses(c, y, /*except=*/y);
  EXPECT_EQ(y->input(0), Value(c));
  EXPECT_EQ(c->uses(), (UseList{{y, 0}}));
  EXPECT_EQ(b->input(0), Value(y));

  Parameter* other = g.add_parameter("i", {DType::kInt32, {3}});
  EXPECT_THROW(g.replace_all_uses(y, other), Error);  // types differ
}

TEST_F(GraphTest, EraseOnlyWhenUnused) {
  Graph g;
  Parameter* x = g.add_parameter("x", f32({3}));
  Node* a = g.add_node("test_relu", {x});
  Node* b = g.add_node("test_relu", {a});
  g.add_output(b);
  try {
    g.erase_node(a);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(e.message().find("cannot erase op 'test_relu'"), std::string::npos);
  }
  g.set_output(0, a);
  EXPECT_TRUE(b->uses().empty());
  g.erase_node(b);
  EXPECT_EQ(a->uses(), (UseList{{nullptr, 0}}));
  EXPECT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(x->uses().size(), 1u);
}

TEST_F(GraphTest, InsertMoveAndTopologicalOrder) {
  Graph g;
  Parameter* x = g.add_parameter("x", f32({3}));
  Node* a = g.add_node("test_relu", {x});
  Node* c = g.add_node("test_add", {a, a});
  Node* b = g.insert_node(c, "test_cast", {a}, {{"to", DType::kInt32}});
  EXPECT_EQ(ops_in_order(g), (std::vector<std::string>{"test_relu", "test_cast", "test_add"}));
  EXPECT_EQ(b->output_type().dtype, DType::kInt32);

  g.move_node(a, nullptr);  // now a is after its users: the list is out of order
  EXPECT_EQ(ops_in_order(g), (std::vector<std::string>{"test_cast", "test_add", "test_relu"}));
  std::vector<Node*> order = g.topological_order();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], a);
  g.sort_nodes();
  EXPECT_EQ(ops_in_order(g), (std::vector<std::string>{"test_relu", "test_cast", "test_add"}));
}

TEST_F(GraphTest, SetInputAndCycles) {
  Graph g;
  Parameter* x = g.add_parameter("x", f32({3}));
  Node* a = g.add_node("test_relu", {x});
  Node* b = g.add_node("test_relu", {a});
  g.set_input(a, 0, b);  // a <-> b
  EXPECT_TRUE(x->uses().empty());
  EXPECT_EQ(b->uses(), (UseList{{a, 0}}));
  try {
    g.topological_order();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(e.message().find("has a cycle through op 'test_relu'"), std::string::npos);
  }
  EXPECT_THROW(g.set_input(a, 1, x), Error);
}

TEST_F(GraphTest, MultipleOutputsHaveSeparateUseLists) {
  Graph g;
  Parameter* x = g.add_parameter("x", f32({4, 2}));
  Node* s = g.add_node("test_split", {x}, {{"num", int64_t{2}}});
  ASSERT_EQ(s->num_outputs(), 2u);
  Node* r = g.add_node("test_relu", {s->output(1)});
  EXPECT_TRUE(s->uses(0).empty());
  EXPECT_EQ(s->uses(1), (UseList{{r, 0}}));
  EXPECT_EQ(r->output_type(), f32({2, 2}));
  EXPECT_THROW(g.add_node("test_relu", {Value(s, 2)}), Error);
}

// Kernels read constants in place, so their bytes start on a cache line whatever their size (glibc
// puts a large block 16 bytes past a page; a small one on 16 bytes).
TEST_F(GraphTest, ConstantBytesStartOnA64ByteBoundary) {
  Graph g("main");
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{1} << 18}) {
    const Constant* c = g.add_constant(f32({n}), std::vector<uint8_t>(n * 4, 7));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c->bytes().data()) % 64, 0u) << n << " floats";
    EXPECT_EQ(c->bytes().size(), static_cast<size_t>(n * 4));
    EXPECT_EQ(c->bytes()[n * 4 - 1], 7);
  }
}

TEST_F(GraphTest, ConstantsAndSubgraphs) {
  Graph g("main");
  Constant* c = g.add_constant<float>({2}, {1.0f, 2.5f});
  EXPECT_EQ(c->type(), f32({2}));
  EXPECT_EQ(c->data<float>()[1], 2.5f);
  EXPECT_THROW(g.add_constant(f32({3}), std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(g.add_constant({DType::kBool, {1}}, std::vector<uint8_t>{2}), Error);

  Graph* body = g.add_subgraph("body");
  Graph* inner = body->add_subgraph("inner");
  EXPECT_EQ(body->parent(), &g);
  EXPECT_EQ(g.find_subgraph("body"), body);
  EXPECT_EQ(g.find_subgraph("inner"), nullptr);
  EXPECT_EQ(inner->resolve_subgraph("body"), body);  // found through the parent
  EXPECT_EQ(g.subgraphs(), (std::vector<Graph*>{body}));
  EXPECT_THROW(g.add_subgraph("body"), Error);
  EXPECT_THROW(g.add_subgraph("a/b"), Error);
}

// Lookup by name is indexed: erasing a subgraph (one or many) removes it from the index, and the
// name can be used again.
TEST_F(GraphTest, SubgraphLookupFollowsErasure) {
  Graph g;
  Graph* a = g.add_subgraph("a");
  Graph* b = g.add_subgraph("b");
  g.add_subgraph("c");
  g.erase_subgraph(a);
  EXPECT_EQ(g.find_subgraph("a"), nullptr);
  EXPECT_EQ(g.find_subgraph("b"), b);
  EXPECT_EQ(g.erase_subgraphs_if([](const Graph& sub) { return sub.name() != "b"; }), 1u);
  EXPECT_EQ(g.find_subgraph("c"), nullptr);
  EXPECT_EQ(g.subgraphs(), (std::vector<Graph*>{b}));
  Graph* again = g.add_subgraph("a");
  EXPECT_EQ(g.find_subgraph("a"), again);
}

TEST_F(GraphTest, ReinferAfterAttributeChange) {
  Graph g;
  Parameter* x = g.add_parameter("x", f32({2, 3}));
  Node* c = g.add_node("test_cast", {x}, {{"to", DType::kInt32}});
  c->set_attr("to", DType::kFloat64);
  g.reinfer(c);
  EXPECT_EQ(c->output_type().dtype, DType::kFloat64);
}

}  // namespace
}  // namespace mf::ir

namespace mf::ir {
namespace {

// main -> a -> b -> c, and main -> c directly: the depth is the longest chain (4), counted without
// recursion over 100,000 nested calls; a call back to a graph on the path is recursion.
TEST(CallDepthTest, CountsTheLongestChainOfNestedCalls) {
  const TensorType type{DType::kFloat32, {2}};
  auto call = [&](Graph* g, Value x, const std::string& callee) {
    return Value(g->create_node(nullptr, "call", {x}, {{"graph", callee}}, {type}));
  };
  Graph main("main");
  Value x = main.add_parameter("x", type);
  main.add_output(call(&main, call(&main, x, "a"), "c"));
  for (const char* name : {"a", "b", "c"}) main.add_subgraph(name);
  Graph* a = main.find_subgraph("a");
  a->add_output(call(a, a->add_parameter("x", type), "b"));
  Graph* b = main.find_subgraph("b");
  b->add_output(call(b, b->add_parameter("x", type), "c"));
  Graph* c = main.find_subgraph("c");
  c->add_output(c->add_parameter("x", type));
  CallDepth depth = call_depth(main);
  EXPECT_EQ(depth.depth, 4);
  EXPECT_EQ(depth.deepest, "c");
  EXPECT_FALSE(depth.recursive);
  Graph chain("chain");
  Value y = chain.add_parameter("x", type);
  constexpr int kLevels = 100000;
  for (int i = 0; i < kLevels; ++i) chain.add_subgraph("f" + std::to_string(i));
  chain.add_output(call(&chain, y, "f0"));
  for (int i = 0; i < kLevels; ++i) {
    Graph* f = chain.find_subgraph("f" + std::to_string(i));
    Value p = f->add_parameter("x", type);
    f->add_output(i + 1 < kLevels ? call(f, p, "f" + std::to_string(i + 1)) : p);
  }
  depth = call_depth(chain);
  EXPECT_EQ(depth.depth, kLevels + 1);
  EXPECT_FALSE(depth.recursive);
  Graph* last = chain.find_subgraph("f" + std::to_string(kLevels - 1));
  last->add_output(call(last, last->parameter(0), "f0"));
  EXPECT_TRUE(call_depth(chain).recursive);
}

}  // namespace
}  // namespace mf::ir
