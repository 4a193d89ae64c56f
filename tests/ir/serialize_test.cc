// ir/serialize: the protobuf form rebuilds a graph exactly (printed with locations, every attribute
// kind, constants of every dtype, control-flow subgraphs, nodes stored out of topological order),
// damaged bytes fail with DataLoss and never crash, and the canonical form ignores node ids and
// locations but not ops, attributes, constants or structure.

#include "ir/serialize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace mf::ir {
namespace {

TensorType f32(Shape shape) {
  return {DType::kFloat32, std::move(shape)};
}

std::string print_full(const Graph& g) {
  return print_graph(g, PrintOptions{Detail::kFull});
}

// Parameters (one a weight), constants of every dtype, nodes with scopes and locations, and a
// node with attributes of every kind (created without inference: the serializer must not care).
std::unique_ptr<Graph> rich_graph() {
  auto g = std::make_unique<Graph>("rich");
  Parameter* x = g->add_parameter("x", f32({2, 3}));
  Parameter* w = g->add_parameter("fc.weight", f32({3, 3}), /*is_weight=*/true);
  g->add_constant<float>({2}, {1.5f, -0.0f});
  g->add_constant<double>({}, {std::numeric_limits<double>::denorm_min()});
  g->add_constant<int32_t>({3}, {1, -2, 3});
  g->add_constant<int64_t>({1}, {std::numeric_limits<int64_t>::min()});
  g->add_constant<bool>({2}, {true, false});
  Node* mm = g->add_node("matmul", {x, w}, {}, {"Default/net-Net/fc-Dense", "net.cc:12"});
  Node* r = g->add_node("relu", {mm}, {}, {"Default/net-Net", "net.cc:13"});
  Node* odd = g->create_node(nullptr, "custom_attrs", {r},
                             {{"b", true},
                              {"i", int64_t{-7}},
                              {"f", std::nan("")},
                              {"inf", -std::numeric_limits<double>::infinity()},
                              {"s", std::string("quote \" and \\n")},
                              {"ints", std::vector<int64_t>{1, -2, 3}},
                              {"floats", std::vector<double>{0.1, -2.5e-300}},
                              {"empty", std::vector<int64_t>{}},
                              {"dt", DType::kInt64}},
                             {f32({2, 3}), {DType::kBool, {}}}, {"", "x.cc:1"});
  g->add_output(Value(odd, 0));
  g->add_output(Value(odd, 1));
  g->add_output(r);
  return g;
}

std::unique_ptr<Graph> control_flow_graph() {
  auto g = std::make_unique<Graph>("main");
  Parameter* x = g->add_parameter("x", f32({4}));
  Parameter* p = g->add_parameter("p", {DType::kBool, {}});
  Graph* twice = g->add_subgraph("twice");
  Parameter* tx = twice->add_parameter("x", f32({4}));
  twice->add_output(twice->add_node("add", {tx, tx}));
  Graph* neg = g->add_subgraph("negate");
  Parameter* nx = neg->add_parameter("x", f32({4}));
  Graph* inner = neg->add_subgraph("inner");
  Parameter* ix = inner->add_parameter("x", f32({4}));
  inner->add_output(inner->add_node("neg", {ix}));
  neg->add_output(
      neg->create_node(nullptr, "call", {nx}, {{"graph", std::string("inner")}}, {f32({4})}));
  Graph* small = g->add_subgraph("small");
  Parameter* sx = small->add_parameter("x", f32({4}));
  Node* sum = small->add_node("reduce_sum", {sx}, {{"axes", std::vector<int64_t>{0}}});
  Constant* limit = small->add_constant<float>({}, {100.0f});
  small->add_output(small->add_node("less", {sum, limit}));
  Node* call = g->create_node(nullptr, "call", {x}, {{"graph", std::string("twice")}}, {f32({4})});
  Node* cond = g->create_node(
      nullptr, "cond", {p, call},
      {{"then_branch", std::string("twice")}, {"else_branch", std::string("negate")}}, {f32({4})});
  Node* loop = g->create_node(
      nullptr, "while", {cond},
      {{"cond_graph", std::string("small")}, {"body_graph", std::string("twice")}}, {f32({4})});
  g->add_output(loop);
  return g;
}

TEST(IrSerialize, RoundTripIsExact) {
  auto g = rich_graph();
  const std::string bytes = serialize_graph(*g);
  auto back = deserialize_graph(bytes);
  EXPECT_EQ(print_full(*back), print_full(*g));
  EXPECT_EQ(serialize_graph(*back), bytes);  // deterministic and stable
  EXPECT_TRUE(back->parameter(1)->is_weight());
  EXPECT_TRUE(std::ranges::equal(back->constant(0)->bytes(),
                                 g->constant(0)->bytes()));  // -0.0f keeps its sign bit
  EXPECT_TRUE(std::isnan(std::get<double>(back->nodes().back().attrs().at("f"))));
}

TEST(IrSerialize, ControlFlowRoundTripVerifies) {
  auto g = control_flow_graph();
  ASSERT_NO_THROW(verify(*g));
  auto back = deserialize_graph(serialize_graph(*g));
  EXPECT_NO_THROW(verify(*back));
  EXPECT_EQ(print_full(*back), print_full(*g));
  ASSERT_NE(back->find_subgraph("negate"), nullptr);
  EXPECT_NE(back->find_subgraph("negate")->find_subgraph("inner"), nullptr);
}

TEST(IrSerialize, ProgramOrderThatIsNotTopologicalIsKept) {
  auto g = std::make_unique<Graph>("order");
  Parameter* x = g->add_parameter("x", f32({2}));
  Node* a = g->add_node("neg", {x});
  Node* b = g->add_node("relu", {x});
  Node* c = g->add_node("add", {a, b});
  g->add_output(c);
  g->move_node(b, a);  // b now first: still topological, but not creation order
  auto back = deserialize_graph(serialize_graph(*g));
  EXPECT_EQ(print_full(*back), print_full(*g));
}

TEST(IrSerialize, ParsedFileRoundTrips) {
  const std::string text = print_graph(*control_flow_graph());
  auto parsed = parse_graph(text);
  EXPECT_EQ(print_graph(*deserialize_graph(serialize_graph(*parsed))), text);
}

TEST(IrSerialize, DamagedBytesAreDataLossNeverACrash) {
  const std::string bytes = serialize_graph(*control_flow_graph());
  // Every truncation and every single-byte corruption either still parses into some graph or
  // fails with DataLoss; nothing else may escape.
  auto check = [](const std::string& damaged) {
    try {
      deserialize_graph(damaged);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << e.what();
    }
  };
  for (size_t n = 0; n < bytes.size(); ++n) check(bytes.substr(0, n));
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char flip : {0x01, 0x80, 0xff}) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ flip);
      check(damaged);
    }
  }
  EXPECT_THROW(deserialize_graph("not a protobuf at all \xff\xff\xff"), Error);
}

TEST(IrSerialize, ImpossibleGraphsAreRefused) {
  auto g = std::make_unique<Graph>("g");
  Parameter* x = g->add_parameter("x", f32({2}));
  g->add_output(g->add_node("neg", {x}));
  std::string bytes = serialize_graph(*g);
  // A cycle: make the node its own operand by editing the stored reference.
  auto cyclic = std::make_unique<Graph>("g");
  Parameter* cx = cyclic->add_parameter("x", f32({2}));
  Node* n1 = cyclic->add_node("neg", {cx});
  Node* n2 = cyclic->add_node("neg", {n1});
  cyclic->add_output(n2);
  cyclic->set_input(n1, 0, n2);  // a cycle the Graph API allows to build, never to serialize back
  try {
    deserialize_graph(serialize_graph(*cyclic));
    ADD_FAILURE() << "a cyclic graph deserialized";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDataLoss);
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
}

TEST(IrSerialize, CanonicalFormIgnoresIdsAndLocations) {
  auto a = rich_graph();
  auto b = rich_graph();
  for (Node& node : b->nodes()) node.set_info({node.scope(), "elsewhere.cc:99"});
  // Different node ids: a graph built with a node created and erased first.
  auto c = std::make_unique<Graph>("rich");
  {
    Parameter* x = c->add_parameter("tmp", f32({1}));
    c->erase_node(c->add_node("neg", {x}));
  }
  EXPECT_EQ(canonical_form(*a), canonical_form(*b));
  EXPECT_NE(print_full(*a), print_full(*b));

  auto g1 = std::make_unique<Graph>("g");
  auto g2 = std::make_unique<Graph>("g");
  for (Graph* g : {g1.get(), g2.get()}) {
    Parameter* x = g->add_parameter("x", f32({2}));
    if (g == g2.get()) g->erase_node(g->add_node("relu", {x}));  // burns a node id
    g->add_output(g->add_node("neg", {x}));
  }
  EXPECT_NE(g1->nodes().front().id(), g2->nodes().front().id());
  EXPECT_EQ(canonical_form(*g1), canonical_form(*g2));
}

TEST(IrSerialize, CanonicalFormSeesOpsAttributesConstantsAndTypes) {
  auto make = [](float constant, int64_t axis, Shape shape, std::string op) {
    auto g = std::make_unique<Graph>("g");
    Parameter* x = g->add_parameter("x", f32(shape));
    Constant* c = g->add_constant<float>({}, {constant});
    Node* y = g->add_node(op, {x, c});
    g->add_output(g->add_node("reduce_sum", {y}, {{"axes", std::vector<int64_t>{axis}}}));
    return canonical_form(*g);
  };
  const std::string base = make(1.0f, 0, {2, 3}, "add");
  EXPECT_EQ(make(1.0f, 0, {2, 3}, "add"), base);
  EXPECT_NE(make(1.0000001f, 0, {2, 3}, "add"), base);
  EXPECT_NE(make(1.0f, 1, {2, 3}, "add"), base);
  EXPECT_NE(make(1.0f, 0, {2, 4}, "add"), base);
  EXPECT_NE(make(1.0f, 0, {2, 3}, "mul"), base);
}

}  // namespace
}  // namespace mf::ir
