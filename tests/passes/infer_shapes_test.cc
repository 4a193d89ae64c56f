#include "base/error.h"
#include "passes/passes.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes {
namespace {

using testing::expand;

TEST(InferShapesTest, AVerifiedGraphIsUnchanged) {
  const char* text = R"(
subgraph @main(%para1_x: f32(2, 3)) {
  %0 = reshape(%para1_x) {shape: [3, 2]} : (f32(2, 3)) -> (f32(3, 2))
  %1 = call(%0) {graph: "f"} : (f32(3, 2)) -> (f32(3, 2))
  Return(%1)
}

subgraph @f(%para1_x: f32(3, 2)) {
  %0 = neg(%para1_x) : (f32(3, 2)) -> (f32(3, 2))
  Return(%0)
}
)";
  auto r = testing::run_pass(*make_infer_shapes(), text);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.text, expand(text));
}

TEST(InferShapesTest, UpdatesStaleTypesDownstream) {
  ir::Graph g("main");
  ir::Parameter* x = g.add_parameter("x", {ir::DType::kFloat32, {2, 3}});
  ir::Node* r = g.add_node("reshape", {x}, {{"shape", std::vector<int64_t>{6}}});
  ir::Node* n = g.add_node("neg", {r});
  g.add_output(n);
  // A rewrite changed the reshape's target without re-inferring anything.
  r->set_attr("shape", std::vector<int64_t>{3, 2});
  EXPECT_TRUE(make_infer_shapes()->run(g));
  ir::verify(g);
  EXPECT_EQ(n->output_type().shape, (ir::Shape{3, 2}));
}

TEST(InferShapesTest, ABadNodeIsNamed) {
  ir::Graph g("main");
  ir::Parameter* x = g.add_parameter("x", {ir::DType::kFloat32, {2, 3}});
  ir::Node* r = g.add_node("reshape", {x}, {{"shape", std::vector<int64_t>{6}}});
  g.add_output(r);
  r->set_attr("shape", std::vector<int64_t>{4});
  try {
    make_infer_shapes()->run(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reshape(%para1_x)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mf::passes
