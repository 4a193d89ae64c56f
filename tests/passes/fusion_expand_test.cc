// expand-composite-ops on IR text: each composite op becomes the basic ops its expander declares;
// by default elementwise composites stay whole and others expand only where bit-exact;
// --enable_expand_ops forces, --disable_expand_ops and --enable_expand_ops_only restrict.

#include <filesystem>

#include "tests/passes/fusion_test_util.h"
#include "tests/unique_temp_path.h"

namespace mf::passes {
namespace {

using testing::expand;
using testing::fusion_options;

constexpr const char* kSigmoidSquare = R"(
subgraph @main(%para1_x: f32(3)) {
  %0 = sigmoid(%para1_x) : (f32(3)) -> (f32(3))
  %1 = square(%0) : (f32(3)) -> (f32(3))
  Return(%1)
}
)";

TEST(ExpandCompositeOpsTest, ElementwiseCompositesStayWholeByDefault) {
  const auto dir = mf::testing::unique_temp_path("mf_expand_whole_test");
  const CompileOptions options = testing::dumping_options(1, dir);
  auto r = testing::run_pass(*make_expand_composite_ops(options), kSigmoidSquare);
  EXPECT_FALSE(r.changed) << "their own tile math fuses whole, in one pass";
  const std::string text =
      testing::read_file(dir / "graph_kernel_dump" / "expand-composite-ops.txt");
  EXPECT_NE(text.find("sigmoid#0"), std::string::npos) << text;
  EXPECT_NE(text.find("an elementwise composite joins a fused kernel whole"), std::string::npos)
      << text;
  std::filesystem::remove_all(dir);
}

TEST(ExpandCompositeOpsTest, SigmoidAndSquareExpandToBasicOpsWhenNamed) {
  CompileOptions options = fusion_options(1);
  options.fusion.enable_expand_ops = {"sigmoid", "square"};
  auto r = testing::run_pass(*make_expand_composite_ops(options), kSigmoidSquare);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.text, expand(R"(
subgraph @main(%para1_x: f32(3)) {
  %const1 = Constant <Tensor[Float32], ()> [1]
  %const2 = Constant <Tensor[Float32], ()> [1]
  %0 = neg(%para1_x) : (f32(3)) -> (f32(3))
  %1 = exp(%0) : (f32(3)) -> (f32(3))
  %2 = add(%const2, %1) : (f32(), f32(3)) -> (f32(3))
  %3 = div(%const1, %2) : (f32(), f32(3)) -> (f32(3))
  %4 = mul(%3, %3) : (f32(3), f32(3)) -> (f32(3))
  Return(%4)
}
)")) << r.text;
}

constexpr const char* kSoftmaxOdd = R"(
subgraph @main(%para1_x: f32(4, 10)) {
  %0 = softmax(%para1_x) {axis: -1} : (f32(4, 10)) -> (f32(4, 10))
  Return(%0)
}
)";

constexpr const char* kSoftmaxFirstAxis = R"(
subgraph @main(%para1_x: f32(4, 10)) {
  %0 = softmax(%para1_x) {axis: 0} : (f32(4, 10)) -> (f32(4, 10))
  Return(%0)
}
)";

// softmax's row kernel beats its stitched expansion, so it stays whole at every level unless named;
// named, it expands only where its reductions can stitch (opt_level 3), over any axis.
TEST(ExpandCompositeOpsTest, SoftmaxStaysWholeUnlessNamedAndStitched) {
  for (int level : {1, 2, 3}) {
    const auto r =
        testing::run_pass(*make_expand_composite_ops(fusion_options(level)), kSoftmaxOdd);
    EXPECT_FALSE(r.changed) << "opt_level " << level << ": " << r.text;
    EXPECT_NE(r.text.find("softmax("), std::string::npos) << r.text;
  }
  CompileOptions options = fusion_options(1);
  options.fusion.enable_expand_ops = {"softmax"};
  EXPECT_FALSE(testing::run_pass(*make_expand_composite_ops(options), kSoftmaxOdd).changed)
      << "without stitching its reductions would be kernels of their own";
  options = fusion_options(3);
  options.fusion.enable_expand_ops = {"softmax"};
  for (const char* text : {kSoftmaxOdd, kSoftmaxFirstAxis}) {
    const auto r = testing::run_pass(*make_expand_composite_ops(options), text);
    EXPECT_TRUE(r.changed) << text;
    EXPECT_NE(r.text.find("reduce_max("), std::string::npos) << r.text;
    EXPECT_NE(r.text.find("reduce_sum("), std::string::npos) << r.text;
    EXPECT_EQ(r.text.find("softmax("), std::string::npos) << r.text;
  }
}

TEST(ExpandCompositeOpsTest, DisableAndOnlyLists) {
  const char* text = R"(
subgraph @main(%para1_x: f32(3)) {
  %0 = sigmoid(%para1_x) : (f32(3)) -> (f32(3))
  %1 = gelu_erf(%0) : (f32(3)) -> (f32(3))
  Return(%1)
}
)";
  CompileOptions options = fusion_options(1);
  options.fusion.disable_expand_ops = {"sigmoid"};
  options.fusion.enable_expand_ops = {"gelu_erf"};
  auto r = testing::run_pass(*make_expand_composite_ops(options), text);
  EXPECT_NE(r.text.find("sigmoid("), std::string::npos) << r.text;
  EXPECT_EQ(r.text.find("gelu_erf("), std::string::npos) << r.text;
  options = fusion_options(1);
  options.fusion.enable_expand_ops_only = {"gelu_erf"};
  r = testing::run_pass(*make_expand_composite_ops(options), text);
  EXPECT_NE(r.text.find("sigmoid("), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("erf("), std::string::npos) << r.text;
  options = fusion_options(1);
  options.fusion.enable_expand_ops = {"relu"};
  try {
    make_expand_composite_ops(options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--enable_expand_ops=relu: op 'relu' has no expander"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mf::passes
