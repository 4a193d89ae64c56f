// Control-flow nodes (call/cond/while) in the IR: they print and parse back with their declared
// output types, and the verifier checks those types against the subgraphs the nodes name.

#include <gtest/gtest.h>

#include "base/error.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace mf::ir {
namespace {

TensorType f32(Shape shape) {
  return {DType::kFloat32, std::move(shape)};
}

// @double(x) = x + x; @pos(x) = x > 0 reduced to a scalar; main runs call, cond and while on them.
std::unique_ptr<Graph> control_flow_graph() {
  auto g = std::make_unique<Graph>("main");
  Parameter* x = g->add_parameter("x", f32({4}));
  Parameter* p = g->add_parameter("p", {DType::kBool, {}});

  Graph* twice = g->add_subgraph("twice");
  Parameter* tx = twice->add_parameter("x", f32({4}));
  twice->add_output(twice->add_node("add", {tx, tx}));

  Graph* neg = g->add_subgraph("negate");
  Parameter* nx = neg->add_parameter("x", f32({4}));
  neg->add_output(neg->add_node("neg", {nx}));

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

std::string message_of(const Graph& g) {
  try {
    verify(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "<verified>";
}

TEST(ControlFlowIr, VerifiesAndRoundTrips) {
  auto g = control_flow_graph();
  EXPECT_NO_THROW(verify(*g));
  const std::string text = print_graph(*g);
  auto parsed = parse_graph(text);
  EXPECT_NO_THROW(verify(*parsed));
  EXPECT_EQ(print_graph(*parsed), text);
  EXPECT_NE(text.find("while("), std::string::npos);
}

TEST(ControlFlowIr, AddNodeRefusesControlFlow) {
  Graph g("main");
  Parameter* x = g.add_parameter("x", f32({4}));
  try {
    g.add_node("call", {x}, {{"graph", std::string("f")}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("create_node"), std::string::npos) << e.what();
  }
}

TEST(ControlFlowIr, CallOutputTypeMismatch) {
  auto g = control_flow_graph();
  Node* call = &g->nodes().front();
  // A node that claims the call returns (2, 2): the subgraph returns (4).
  g->create_node(call, "call", {g->parameter(0)}, {{"graph", std::string("twice")}}, {f32({2, 2})});
  const std::string msg = message_of(*g);
  EXPECT_NE(msg.find("subgraph @twice's output types"), std::string::npos) << msg;
}

TEST(ControlFlowIr, CallParameterTypeMismatch) {
  Graph g("main");
  Parameter* x = g.add_parameter("x", f32({3}));
  Graph* f = g.add_subgraph("f");
  Parameter* fx = f->add_parameter("x", f32({4}));
  f->add_output(fx);
  g.add_output(g.create_node(nullptr, "call", {x}, {{"graph", std::string("f")}}, {f32({4})}));
  const std::string msg = message_of(g);
  EXPECT_NE(msg.find("parameter types"), std::string::npos) << msg;
}

TEST(ControlFlowIr, MissingSubgraph) {
  Graph g("main");
  Parameter* x = g.add_parameter("x", f32({4}));
  g.add_output(
      g.create_node(nullptr, "call", {x}, {{"graph", std::string("nowhere")}}, {f32({4})}));
  const std::string msg = message_of(g);
  EXPECT_NE(msg.find("@nowhere, which does not exist"), std::string::npos) << msg;
}

TEST(ControlFlowIr, CondBranchesMustAgree) {
  Graph g("main");
  Parameter* p = g.add_parameter("p", {DType::kBool, {}});
  Parameter* x = g.add_parameter("x", f32({4}));
  Graph* a = g.add_subgraph("a");
  a->add_output(a->add_node("neg", {a->add_parameter("x", f32({4}))}));
  Graph* b = g.add_subgraph("b");
  b->add_output(b->add_node("reduce_sum", {b->add_parameter("x", f32({4}))},
                            {{"axes", std::vector<int64_t>{0}}}));
  g.add_output(g.create_node(nullptr, "cond", {p, x},
                             {{"then_branch", std::string("a")}, {"else_branch", std::string("b")}},
                             {f32({4})}));
  const std::string msg = message_of(g);
  EXPECT_NE(msg.find("subgraph @b's output types"), std::string::npos) << msg;
}

TEST(ControlFlowIr, CondPredicateMustBeScalar) {
  Graph g("main");
  Parameter* p = g.add_parameter("p", f32({2}));
  Parameter* x = g.add_parameter("x", f32({4}));
  Graph* a = g.add_subgraph("a");
  a->add_output(a->add_parameter("x", f32({4})));
  g.add_output(g.create_node(nullptr, "cond", {p, x},
                             {{"then_branch", std::string("a")}, {"else_branch", std::string("a")}},
                             {f32({4})}));
  const std::string msg = message_of(g);
  EXPECT_NE(msg.find("predicate (input 0) must be a scalar"), std::string::npos) << msg;
}

TEST(ControlFlowIr, WhileCondMustReturnOneScalar) {
  Graph g("main");
  Parameter* x = g.add_parameter("x", f32({4}));
  Graph* c = g.add_subgraph("c");
  c->add_output(c->add_parameter("x", f32({4})));  // a vector, not a scalar
  Graph* b = g.add_subgraph("b");
  b->add_output(b->add_parameter("x", f32({4})));
  g.add_output(g.create_node(nullptr, "while", {x},
                             {{"cond_graph", std::string("c")}, {"body_graph", std::string("b")}},
                             {f32({4})}));
  const std::string msg = message_of(g);
  EXPECT_NE(msg.find("must return one scalar predicate"), std::string::npos) << msg;
}

TEST(ControlFlowIr, WhileBodyMustKeepTypes) {
  Graph g("main");
  Parameter* x = g.add_parameter("x", f32({4}));
  Graph* c = g.add_subgraph("c");
  c->add_parameter("x", f32({4}));
  c->add_output(c->add_constant<bool>({}, {true}));
  Graph* b = g.add_subgraph("b");
  b->add_output(b->add_node("reduce_sum", {b->add_parameter("x", f32({4}))},
                            {{"axes", std::vector<int64_t>{0}}}));
  g.add_output(g.create_node(nullptr, "while", {x},
                             {{"cond_graph", std::string("c")}, {"body_graph", std::string("b")}},
                             {f32({4})}));
  const std::string msg = message_of(g);
  EXPECT_NE(msg.find("subgraph @b's output types"), std::string::npos) << msg;
}

// Replaces the call's declared result type (4) by (2, 2) in `text`.
std::string with_call_declared_2x2(std::string text) {
  const size_t line = text.find("= call(");
  const std::string declared = "-> (<Tensor[Float32], (4)>)";
  const size_t arrow = line == std::string::npos ? line : text.find(declared, line);
  if (arrow == std::string::npos) {
    ADD_FAILURE() << "no call declaring (4) in:\n" << text;
    return text;
  }
  return text.replace(arrow, declared.size(), "-> (<Tensor[Float32], (2, 2)>)");
}

TEST(ControlFlowIr, ParsedMismatchIsCaughtByTheParserWhereTheResultIsUsed) {
  // The cond that consumes the call declares its input as (4): the parser names both types.
  const std::string text = with_call_declared_2x2(print_graph(*control_flow_graph()));
  try {
    parse_graph(text);
    FAIL() << "the edited text parsed";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("declared type <Tensor[Float32], (4)> of input 1 does not match the type "
                       "<Tensor[Float32], (2, 2)>"),
              std::string::npos)
        << msg;
  }
}

TEST(ControlFlowIr, ParsedMismatchIsCaughtByTheVerifierWhenNothingUsesTheResult) {
  // The call is the graph's output: nothing downstream declares its type, so the text parses and
  // the verifier must compare the declaration with the subgraph.
  Graph g("main");
  Parameter* x = g.add_parameter("x", f32({4}));
  Graph* twice = g.add_subgraph("twice");
  Parameter* tx = twice->add_parameter("x", f32({4}));
  twice->add_output(twice->add_node("add", {tx, tx}));
  g.add_output(g.create_node(nullptr, "call", {x}, {{"graph", std::string("twice")}}, {f32({4})}));
  const std::string text = with_call_declared_2x2(print_graph(g));
  std::unique_ptr<Graph> parsed;
  try {
    parsed = parse_graph(text);
  } catch (const Error& e) {
    FAIL() << "the parser rejected the edited text: " << e.what();
  }
  const std::string msg = message_of(*parsed);
  EXPECT_NE(msg.find("subgraph @twice's output types"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mf::ir
