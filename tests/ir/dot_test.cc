#include "ir/dot.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "tests/ir/test_ops.h"
#include "tests/unique_temp_path.h"

namespace mf::ir {
namespace {

using testing::f32;

TEST(DotTest, LabelsClustersAndEdges) {
  testing::register_test_ops();
  Graph g("net");
  Parameter* x = g.add_parameter("x", f32({4, 2}));
  Parameter* w = g.add_parameter("fc.weight", f32({3, 2}), true);
  Constant* c = g.add_constant<float>({4, 3}, std::vector<float>(12, 1.0f));
  Node* mm = g.add_node("test_matmul", {x, w}, {{"transpose_b", true}}, {"Default/net/fc", ""});
  Node* add = g.add_node("test_add", {mm, c}, {}, {"Default/net", ""});
  Node* s = g.add_node("test_split", {add}, {{"num", int64_t{2}}});
  g.add_output(s->output(1));

  const std::string dot = to_dot(g);
  EXPECT_TRUE(dot.starts_with("digraph \"net\" {\n"));
  EXPECT_NE(dot.find("p1 [shape=ellipse, style=filled, label=\"fc.weight\\n<Tensor[Float32], (3, "
                     "2)>\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("c0 [shape=box, style=dashed, label=\"const1\\n<Tensor[Float32], (4, 3)>\"];"),
            std::string::npos);
  EXPECT_NE(dot.find("label=\"Default\";"), std::string::npos);
  EXPECT_NE(dot.find("label=\"net\";"), std::string::npos);
  EXPECT_NE(
      dot.find("label=\"fc\";\n        n0 [shape=box, label=\"test_matmul\\n<Tensor[Float32], "
               "(4, 3)>\"];"),
      std::string::npos)
      << dot;
  EXPECT_NE(dot.find("  p0 -> n0;\n  p1 -> n0;\n  n0 -> n1;\n  c0 -> n1;\n  n1 -> n2;\n  n2 -> out "
                     "[label=\"1\"];\n}\n"),
            std::string::npos)
      << dot;
  EXPECT_EQ(to_dot(g), dot);  // deterministic

  const auto path = mf::testing::unique_temp_path("mf_ir_dot_test").replace_extension(".dot");
  write_dot_file(g, path.string());
  std::ifstream in(path);
  std::stringstream read;
  read << in.rdbuf();
  EXPECT_EQ(read.str(), dot);
  std::filesystem::remove(path);
  EXPECT_THROW(write_dot_file(g, "/nonexistent/dir/x.dot"), Error);
}

TEST(DotTest, EscapesQuotes) {
  testing::register_test_ops();
  Graph g("q");
  Parameter* x = g.add_parameter("x", f32({1}));
  g.add_node("test_relu", {x}, {}, {"a\"b\\c", ""});
  EXPECT_NE(to_dot(g).find("label=\"a\\\"b\\\\c\";"), std::string::npos) << to_dot(g);
}

}  // namespace
}  // namespace mf::ir
