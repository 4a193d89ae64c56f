// The generalization of two compiles into one symbolic graph (ir/symbolic_graph.h): sizes found
// as products of symbols, bound by substitution and re-inference; and refused, with the reason,
// where the compiles differ otherwise or re-inference does not reproduce the probe.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <variant>

#include "ir/graph.h"
#include "ir/symbolic_graph.h"
#include "tests/engine/engine_fixture.h"

namespace mf {
namespace {

using ir::Graph;
using ir::SymbolValues;

const std::vector<ir::InputSignature> kInputs = {
    {"x", DType::kFloat32, {{-1, "batch"}, {-1, "seq"}, {16, ""}}}};

// x (batch, seq, 16) -> reshape to (batch * seq, 16) -> relu -> reshape to (batch, seq * 16).
std::unique_ptr<Graph> flatten_graph(int64_t batch, int64_t seq) {
  auto g = std::make_unique<Graph>("flatten");
  ir::Value x = g->add_parameter("x", {DType::kFloat32, {batch, seq, 16}});
  ir::Value y =
      g->add_node("reshape", {x}, {{"shape", std::vector<int64_t>{batch * seq, 16}}})->output();
  y = g->add_node("relu", {y})->output();
  y = g->add_node("reshape", {y}, {{"shape", std::vector<int64_t>{batch, seq * 16}}})->output();
  g->add_output(y);
  return g;
}

TEST(SymbolicGraphTest, SizesAreFoundAsProductsOfTheSymbols) {
  const SymbolValues first = {{"batch", 7}, {"seq", 5}}, probe = {{"batch", 53}, {"seq", 59}};
  EXPECT_EQ(ir::find_size_expr(7 * 16, 53 * 16, first, probe)->to_string(), "16 * batch");
  EXPECT_EQ(ir::find_size_expr(35, 53 * 59, first, probe)->to_string(), "batch * seq");
  EXPECT_EQ(ir::find_size_expr(5, 59, first, probe)->to_string(), "seq");
  EXPECT_FALSE(ir::find_size_expr(8, 100, first, probe).has_value());
  EXPECT_FALSE(ir::find_size_expr(7 + 1, 53 + 1, first, probe).has_value());  // a sum: no
}

TEST(SymbolicGraphTest, ProbesAreDistinctPrimesAvoidingTheFirstSizesAndKnownDimensions) {
  const std::vector<ir::InputSignature> inputs = {
      {"x", DType::kFloat32, {{-1, "a"}, {59, ""}, {-1, "b"}, {-1, ""}}}};
  const auto named = ir::name_every_dimension(inputs);
  EXPECT_EQ(ir::symbolic_shape_to_string(named[0].shape), "(a, 59, b, ?)");
  const SymbolValues probe = ir::probe_values(named, {{"a", 53}});
  EXPECT_EQ(probe.at("a"), 61);
  EXPECT_EQ(probe.at("b"), 67);
  EXPECT_EQ(probe.at("?1"), 71);
}

TEST(SymbolicGraphTest, BindsEverySizeBySubstitution) {
  const ir::ProbePlan plan = ir::plan_probe(kInputs, {{7, 5, 16}});
  auto generalized = ir::generalize(flatten_graph(7, 5), plan.first, *flatten_graph(53, 59),
                                    plan.probe, plan.inputs, {0});
  ASSERT_TRUE(std::holds_alternative<ir::SymbolicGraph>(generalized))
      << std::get<std::string>(generalized);
  const ir::SymbolicGraph& symbolic = std::get<ir::SymbolicGraph>(generalized);
  EXPECT_EQ(symbolic.patches.size(), 3u);
  EXPECT_NE(symbolic.text.find("(batch * seq, 16)"), std::string::npos) << symbolic.text;
  EXPECT_NE(symbolic.text.find("shape: [batch, 16 * seq]"), std::string::npos) << symbolic.text;
  const std::unique_ptr<Graph> bound = ir::specialize(symbolic, {{2, 3, 16}});
  EXPECT_EQ(bound->outputs()[0].type().shape, (Shape{2, 48}));
  try {
    ir::specialize(symbolic, {{2, 3, 15}});
    ADD_FAILURE() << "a known dimension that differs must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dimension 2 is 15 but is declared 16"), std::string::npos)
        << e.what();
  }
}

TEST(SymbolicGraphTest, RefusesCompilesThatDifferBeyondSizes) {
  const ir::ProbePlan plan = ir::plan_probe(kInputs, {{7, 5, 16}});
  // A node more at one binding.
  auto extra = flatten_graph(53, 59);
  extra->add_output(extra->add_node("relu", {extra->outputs()[0]})->output());
  auto refused =
      ir::generalize(flatten_graph(7, 5), plan.first, *extra, plan.probe, plan.inputs, {0});
  ASSERT_TRUE(std::holds_alternative<std::string>(refused));
  EXPECT_NE(std::get<std::string>(refused).find("the ops chosen depend on the input sizes"),
            std::string::npos);
  // A size in an attribute that is no product of the symbols.
  auto odd = [](int64_t batch, int64_t seq, int64_t extra_rows) {
    auto g = std::make_unique<Graph>("flatten");
    ir::Value x = g->add_parameter("x", {DType::kFloat32, {batch, seq, 16}});
    ir::Value y =
        g->add_node("pad", {x}, {{"pads", std::vector<int64_t>{0, extra_rows, 0, 0, 0, 0}}})
            ->output();
    g->add_output(y);
    return g;
  };
  refused =
      ir::generalize(odd(7, 5, 8), plan.first, *odd(53, 59, 100), plan.probe, plan.inputs, {0});
  ASSERT_TRUE(std::holds_alternative<std::string>(refused));
  EXPECT_NE(std::get<std::string>(refused).find("no product of the input symbols"),
            std::string::npos)
      << std::get<std::string>(refused);
}

// The check that makes a wrong generalization impossible to run: re-inferring the first compile
// at the probe's sizes must give every type the probe compiled. A probe whose stored types
// disagree (as a size-dependent decision the attributes do not show would) is refused.
TEST(SymbolicGraphTest, RefusesWhenReinferenceDoesNotReproduceTheProbe) {
  const ir::ProbePlan plan = ir::plan_probe(kInputs, {{7, 5, 16}});
  auto probe = flatten_graph(53, 59);
  ir::Node* relu = nullptr;
  for (ir::Node& node : probe->nodes()) {
    if (node.op() == "relu") relu = &node;
  }
  probe->set_output_types(relu, {{DType::kFloat32, {53 * 59, 17}}});
  auto refused =
      ir::generalize(flatten_graph(7, 5), plan.first, *probe, plan.probe, plan.inputs, {0});
  ASSERT_TRUE(std::holds_alternative<std::string>(refused));
  EXPECT_NE(std::get<std::string>(refused).find("re-inferring at the probe sizes differs"),
            std::string::npos)
      << std::get<std::string>(refused);
}

}  // namespace
}  // namespace mf
