#include "ir/verifier.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/ir/test_ops.h"

namespace mf::ir {
namespace {

using testing::f32;

class VerifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::register_test_ops();
    x_ = g_.add_parameter("x", f32({2, 3}));
  }

  // The message of the error verify() throws, without the "(internal error at ...)" suffix.
  Error verify_error() {
    try {
      verify(g_);
    } catch (const Error& e) {
      return e;
    }
    return Error(ErrorKind::kInternal, "<verified>");
  }
  static std::string head(const Error& e) {
    return e.message().substr(0, e.message().find(" (internal"));
  }

  Graph g_{"g"};
  Parameter* x_ = nullptr;
};

TEST_F(VerifierTest, AcceptsWellFormedGraphs) {
  Node* a = g_.add_node("test_relu", {x_});
  Node* s = g_.add_node("test_split", {a}, {{"num", int64_t{2}}});
  Node* c = g_.add_node("test_call", {s->output(1)}, {{"graph", std::string("body")}});
  g_.add_output(c->output(0));
  Graph* body = g_.add_subgraph("body");
  body->add_output(body->add_node("test_relu", {body->add_parameter("y", f32({1, 3}))}));
  EXPECT_NO_THROW(verify(g_));
}

TEST_F(VerifierTest, StoredTypeDiffersFromInference) {
  g_.create_node(nullptr, "test_relu", {x_}, {}, {{DType::kFloat64, {2, 3}}});
  Error e = verify_error();
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message(),
            "%0 = test_relu(%para1_x): output 0 is stored as <Tensor[Float64], (2, 3)> but "
            "inference gives <Tensor[Float32], (2, 3)>");
}

TEST_F(VerifierTest, WrongArityNamesTheNode) {
  g_.create_node(nullptr, "test_relu", {x_, x_}, {}, {f32({2, 3})});
  Error e = verify_error();
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(e.message(),
            "op 'test_relu' takes 1 input, got 2: (<Tensor[Float32], (2, 3)>, <Tensor[Float32], "
            "(2, 3)>)");
  ASSERT_EQ(e.context().size(), 1u);
  EXPECT_EQ(e.context()[0], "at %0 = test_relu(%para1_x, %para1_x)");
}

TEST_F(VerifierTest, OutputCountAndMissingDefaults) {
  g_.create_node(nullptr, "test_relu", {x_}, {}, {f32({2, 3}), f32({2, 3})});
  EXPECT_EQ(verify_error().message(),
            "%0 = test_relu(%para1_x): has 2 outputs but inference gives 1");

  Graph g2;
  Parameter* a = g2.add_parameter("a", f32({2, 2}));
  g2.create_node(nullptr, "test_matmul", {a, a}, {}, {f32({2, 2})});
  try {
    verify(g2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.message(),
              "%0 = test_matmul(%para1_a, %para1_a): attributes are incomplete "
              "(defaults not filled in)");
  }
}

TEST_F(VerifierTest, UnregisteredOp) {
  g_.create_node(nullptr, "test_not_registered", {x_}, {}, {f32({2, 3})});
  EXPECT_EQ(verify_error().message(),
            "%0 = test_not_registered(%para1_x): op 'test_not_registered' is not registered");
}

TEST_F(VerifierTest, Cycle) {
  Node* a = g_.add_node("test_relu", {x_});
  Node* b = g_.add_node("test_relu", {a});
  g_.set_input(a, 0, b);
  Error e = verify_error();
  EXPECT_EQ(e.kind(), ErrorKind::kInternal);
  EXPECT_EQ(head(e), "%0 = test_relu(%1): is on a dependency cycle");
}

TEST_F(VerifierTest, OperandDefinedAfterUse) {
  Node* a = g_.add_node("test_relu", {x_});
  g_.add_node("test_relu", {a});
  g_.move_node(a, nullptr);
  Error e = verify_error();
  EXPECT_EQ(e.kind(), ErrorKind::kInternal);
  EXPECT_EQ(head(e), "%0 = test_relu(%1): operand 0 is defined after its use");
}

TEST_F(VerifierTest, MissingSubgraphAndContext) {
  g_.add_node("test_call", {x_}, {{"graph", std::string("nowhere")}});
  EXPECT_EQ(verify_error().message(),
            "%0 = test_call(%para1_x): attribute 'graph' names subgraph @nowhere, which does not "
            "exist");

  Graph outer("outer");
  Graph* body = outer.add_subgraph("body");
  Parameter* y = body->add_parameter("y", f32({3}));
  body->create_node(nullptr, "test_relu", {y}, {}, {f32({4})});
  try {
    verify(outer);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.message(),
              "%0 = test_relu(%para1_y): output 0 is stored as <Tensor[Float32], (4)> but "
              "inference gives <Tensor[Float32], (3)>");
    EXPECT_EQ(e.context(), (std::vector<std::string>{"in subgraph @body"}));
  }
}

}  // namespace
}  // namespace mf::ir
