#include "passes/pipeline.h"

#include <algorithm>

#include "base/error.h"
#include "passes/pass_table.h"
#include "passes/passes.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes {
namespace {

const char* kSmall = R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  %1 = neg(%0) : (f32(2)) -> (f32(2))
  Return(%1)
}
)";

// Breaks the graph on purpose: a node whose stored type disagrees with inference.
class BreakTypes final : public Pass {
 public:
  std::string_view name() const override { return "break-types"; }
  bool run(ir::Graph& graph) override {
    ir::Value x = graph.parameter(0);
    graph.create_node(nullptr, "neg", {x}, {}, {ir::TensorType{ir::DType::kInt32, {7}}});
    return true;
  }
};

// Claims to change the graph the first `changes` times it runs, and counts its runs.
class Flaky final : public Pass {
 public:
  Flaky(int changes, int* runs) : changes_(changes), runs_(runs) {}
  std::string_view name() const override { return "flaky"; }
  bool run(ir::Graph&) override { return (*runs_)++ < changes_; }

 private:
  int changes_;
  int* runs_;
};

// Rewrites the graph and says it did not: the second neg becomes an abs.
class SilentRewrite final : public Pass {
 public:
  std::string_view name() const override { return "silent-rewrite"; }
  bool run(ir::Graph& graph) override {
    for (ir::Node& node : graph.nodes()) {
      if (node.op() == "neg" && node.inputs()[0].node() != nullptr) {
        graph.set_input(&node, 0, graph.parameter(0));
        return false;
      }
    }
    return false;
  }
};

class Throws final : public Pass {
 public:
  std::string_view name() const override { return "throws"; }
  bool run(ir::Graph&) override { MF_FAIL(InvalidArgument, "no good"); }
};

TEST(PipelineTest, VerificationNamesThePassThatBrokeTheGraph) {
  auto graph = testing::parse(kSmall);
  Pipeline pipeline;
  pipeline.add(make_dead_code_elimination());
  pipeline.add(std::make_unique<BreakTypes>());
  try {
    pipeline.run(*graph);
    FAIL() << "expected a verification error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("graph verification failed after pass 'break-types'"),
              std::string::npos)
        << e.what();
  }
}

TEST(PipelineTest, APassThatChangesTheGraphButReportsNoChangeIsAnInternalError) {
  auto graph = testing::parse(kSmall);
  Pipeline pipeline;
  pipeline.add(std::make_unique<SilentRewrite>());
  try {
    pipeline.run(*graph);
    FAIL() << "expected an internal error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_EQ(e.message(),
              "pass 'silent-rewrite' reported no change but changed the graph "
              "(0 nodes added, 0 removed, 1 rewritten)");
  }
}

TEST(PipelineTest, EveryTableRowNamesItsPassAsThePassNamesItself) {
  const std::vector<std::string> names = known_pass_names();
  ASSERT_GE(names.size(), 14u);
  for (const std::string& name : names) EXPECT_EQ(make_pass(name)->name(), name);
}

TEST(PipelineTest, ErrorsCarryThePassName) {
  auto graph = testing::parse(kSmall);
  Pipeline pipeline;
  pipeline.add(std::make_unique<Throws>());
  try {
    pipeline.run(*graph);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "no good");
    ASSERT_FALSE(e.context().empty());
    EXPECT_EQ(e.context().back(), "in pass 'throws'");
  }
}

TEST(PipelineTest, FixedPointGroupRunsUntilNothingChanges) {
  auto graph = testing::parse(kSmall);
  int runs = 0;
  Pipeline pipeline;
  std::vector<std::unique_ptr<Pass>> group;
  group.push_back(std::make_unique<Flaky>(2, &runs));
  group.push_back(make_dead_code_elimination());
  pipeline.add_group("simplify", std::move(group));
  const auto records = pipeline.run(*graph);
  EXPECT_EQ(runs, 3);  // changed, changed, then a quiet round
  EXPECT_EQ(records.size(), 6u);
  EXPECT_TRUE(records[0].changed);
  EXPECT_FALSE(records[4].changed);
}

TEST(PipelineTest, FixedPointGroupIsBounded) {
  auto graph = testing::parse(kSmall);
  int runs = 0;
  Pipeline pipeline;
  std::vector<std::unique_ptr<Pass>> group;
  group.push_back(std::make_unique<Flaky>(1000, &runs));
  pipeline.add_group("simplify", std::move(group), 5);
  pipeline.run(*graph);
  EXPECT_EQ(runs, 5);
}

TEST(PipelineTest, RecordsWhatEachPassDid) {
  auto graph = testing::parse(R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  %1 = neg(%0) : (f32(2)) -> (f32(2))
  %2 = exp(%para1_x) : (f32(2)) -> (f32(2))
  Return(%1)
}
)");
  Pipeline pipeline;
  pipeline.add(make_algebraic_simplification());
  pipeline.add(make_dead_code_elimination());
  std::vector<std::string> observed;
  pipeline.set_observer([&](const ir::Graph& g, const PassRecord& r) {
    observed.push_back(r.name + ":" + std::to_string(g.num_nodes()));
  });
  const auto records = pipeline.run(*graph);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].name, "algebraic-simplification");
  // The rules only rewire uses here: the graph output moves, no node changes.
  EXPECT_EQ(records[0].summary, "no node change, outputs or constants changed");
  EXPECT_EQ(records[1].summary, "0 nodes added, 3 removed, 0 rewritten");
  EXPECT_EQ(observed,
            (std::vector<std::string>{"algebraic-simplification:3", "dead-code-elimination:0"}));
}

std::vector<std::string> rows_text(const CompileOptions& options) {
  std::vector<std::string> out;
  for (const PipelineRow& row : describe_pipeline(options)) {
    out.push_back(row.name + " | " + row.origin + " | " + row.group);
  }
  return out;
}

TEST(PipelineTest, DescribePerLevel) {
  CompileOptions o0;
  EXPECT_EQ(rows_text(o0), (std::vector<std::string>{
                               "infer-shapes | jit_level O0 | ",
                               "inline | jit_level O0 | ",
                               "format-transform | jit_level O0 | ",
                               "dead-code-elimination | jit_level O0 | ",
                               "select-kernels | jit_level O0 | ",
                               "plan-memory | jit_level O0 | ",
                           }));
  CompileOptions o1;
  o1.jit_level = JitLevel::kO1;
  EXPECT_EQ(rows_text(o1), (std::vector<std::string>{
                               "infer-shapes | jit_level O0 | ",
                               "inline | jit_level O0 | ",
                               "format-transform | jit_level O0 | ",
                               "dead-code-elimination | jit_level O0 | ",
                               "constant-folding | jit_level O1 | simplify",
                               "algebraic-simplification | jit_level O1 | simplify",
                               "common-subexpression-elimination | jit_level O1 | simplify",
                               "dead-code-elimination | jit_level O1 | simplify",
                               "select-kernels | jit_level O0 | ",
                               "plan-memory | jit_level O0 | ",
                           }));
  CompileOptions o2 = o1;
  o2.jit_level = JitLevel::kO2;
  // O2 compiles the same passes as O1; what it changes is the executor (a Policy decision the
  // driver carries out), not the pipeline.
  EXPECT_EQ(rows_text(o2), rows_text(o1));
}

TEST(PipelineTest, DisableAndEnablePasses) {
  CompileOptions options;
  options.jit_level = JitLevel::kO1;
  options.disable_passes = {"common-subexpression-elimination", "dead-code-elimination"};
  auto rows = rows_text(options);
  EXPECT_EQ(std::count_if(rows.begin(), rows.end(),
                          [](const std::string& r) {
                            return r.starts_with("dead-code") || r.starts_with("common-sub");
                          }),
            0);
  CompileOptions o0;
  o0.enable_passes = {"constant-folding"};
  rows = rows_text(o0);
  EXPECT_EQ(rows[4], "constant-folding | --enable_pass | simplify");

  // And the built pipeline follows: at O0 with folding enabled, 2 + 3 folds to 5.
  auto graph = testing::parse(R"(
subgraph @main() {
  %const1 = Constant f32() [2]
  %const2 = Constant f32() [3]
  %0 = add(%const1, %const2) : (f32(), f32()) -> (f32())
  Return(%0)
}
)");
  build_frontend_pipeline(o0).run(*graph);
  // Only folding was enabled: the simplify group's dead-code-elimination was not, so the old
  // constants stay.
  const std::string text = testing::body(*graph);
  EXPECT_NE(text.find("%const3 = Constant <Tensor[Float32], ()> [5]\n  Return(%const3)"),
            std::string::npos)
      << text;
}

TEST(PipelineTest, UnknownPassNamesListTheKnownOnes) {
  CompileOptions options;
  options.disable_passes = {"constant-foldin"};
  try {
    describe_pipeline(options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--disable_pass=constant-foldin names no pass; known "
                                         "passes: infer-shapes, inline, format-transform, "
                                         "dead-code-elimination, constant-folding,"),
              std::string::npos)
        << e.what();
  }
  options.disable_passes.clear();
  options.enable_passes = {"plan-memory"};
  EXPECT_THROW(build_backend_pipeline(options), Error);
}

TEST(PipelineTest, O1SimplifiesARealisticGraph) {
  auto graph = testing::parse(R"(
subgraph @main(%para1_x: f32(2, 3)) {
  %const1 = Constant f32() [1]
  %const2 = Constant f32() [2]
  %0 = add(%const1, %const1) : (f32(), f32()) -> (f32())
  %1 = div(%0, %const2) : (f32(), f32()) -> (f32())
  %2 = mul(%para1_x, %1) : (f32(2, 3), f32()) -> (f32(2, 3))
  %3 = transpose(%2) {perm: []} : (f32(2, 3)) -> (f32(3, 2))
  %4 = transpose(%3) {perm: []} : (f32(3, 2)) -> (f32(2, 3))
  %5 = exp(%4) : (f32(2, 3)) -> (f32(2, 3))
  %6 = exp(%2) : (f32(2, 3)) -> (f32(2, 3))
  %7 = add(%5, %6) : (f32(2, 3), f32(2, 3)) -> (f32(2, 3))
  Return(%7)
}
)");
  CompileOptions options;
  options.jit_level = JitLevel::kO1;
  options.verify_every_pass = true;
  build_frontend_pipeline(options).run(*graph);
  EXPECT_EQ(testing::body(*graph), testing::expand(R"(
subgraph @main(%para1_x: f32(2, 3)) {
  %0 = exp(%para1_x) : (f32(2, 3)) -> (f32(2, 3))
  %1 = add(%0, %0) : (f32(2, 3), f32(2, 3)) -> (f32(2, 3))
  Return(%1)
}
)"));
}

}  // namespace
}  // namespace mf::passes
