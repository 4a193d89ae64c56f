#include "base/error.h"
#include "ir/op_def.h"
#include "passes/passes.h"
#include "tests/passes/pass_test_util.h"

namespace mf::passes {
namespace {

TEST(SelectKernelsTest, EveryRegisteredOpWithAKernelAndControlFlowPass) {
  auto r = testing::run_pass(*make_select_kernels(), R"(
subgraph @main(%para1_x: f32(2)) {
  %0 = call(%para1_x) {graph: "f"} : (f32(2)) -> (f32(2))
  %1 = exp(%0) : (f32(2)) -> (f32(2))
  Return(%1)
}

subgraph @f(%para1_x: f32(2)) {
  %0 = neg(%para1_x) : (f32(2)) -> (f32(2))
  Return(%0)
}
)");
  EXPECT_FALSE(r.changed);
}

TEST(SelectKernelsTest, AnOpWithoutKernelIsNamedWithItsScope) {
  [[maybe_unused]] static const ir::OpRegistration kNoKernel =
      ir::define_op("passes_test_no_kernel")
          .arity(1)
          .traits(ir::Trait::kPure)
          .infer([](std::span<const ir::TensorType> in, const ir::Attrs&) {
            return std::vector<ir::TensorType>{in[0]};
          });
  ir::Graph g("main");
  ir::Parameter* x = g.add_parameter("x", {ir::DType::kFloat32, {2}});
  g.add_output(g.add_node("passes_test_no_kernel", {x}, {}, {"Default/net-Odd", ""}));
  try {
    make_select_kernels()->run(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    const std::string what = e.what();
    EXPECT_NE(what.find("%0 = passes_test_no_kernel(%para1_x)"), std::string::npos) << what;
    EXPECT_NE(what.find("scope Default/net-Odd"), std::string::npos) << what;
    EXPECT_NE(what.find("has no CPU kernel"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace mf::passes
