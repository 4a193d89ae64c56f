#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "base/error.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "tests/ir/test_ops.h"
#include "tests/unique_temp_path.h"

namespace mf::ir {
namespace {

using testing::f32;

class PrinterParserTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::register_test_ops(); }
};

std::unique_ptr<Graph> make_mlp() {
  auto g = std::make_unique<Graph>("mlp");
  Parameter* x = g->add_parameter("x", f32({64, 784}));
  Parameter* w1 = g->add_parameter("fc1.weight", f32({512, 784}), true);
  Parameter* w2 = g->add_parameter("fc2.weight", f32({10, 512}), true);
  Node* h = g->add_node("test_matmul", {x, w1}, {{"transpose_b", true}},
                        {"Default/net-Mlp/fc1-Dense", "mlp.cc:10"});
  Node* r = g->add_node("test_relu", {h}, {}, {"Default/net-Mlp/relu-ReLU", "mlp.cc:11"});
  Node* o = g->add_node("test_matmul", {r, w2}, {{"transpose_b", true}},
                        {"Default/net-Mlp/fc2-Dense", "mlp.cc:12"});
  g->add_output(o);
  return g;
}

TEST_F(PrinterParserTest, PrintsMindSporeLikeText) {
  auto g = make_mlp();
  EXPECT_EQ(print_graph(*g),
            "# IR entry: @mlp\n"
            "# Total subgraphs: 1\n"
            "\n"
            "subgraph @mlp(%para1_x: <Tensor[Float32], (64, 784)>, %para2_fc1.weight: "
            "<Ref[Tensor[Float32]], (512, 784)>, %para3_fc2.weight: <Ref[Tensor[Float32]], (10, "
            "512)>) {\n"
            "  %0 = test_matmul(%para1_x, %para2_fc1.weight) {transpose_a: false, transpose_b: "
            "true} : (<Tensor[Float32], (64, 784)>, <Tensor[Float32], (512, 784)>) -> "
            "(<Tensor[Float32], (64, 512)>)\n"
            "      # scope: Default/net-Mlp/fc1-Dense\n"
            "  %1 = test_relu(%0) : (<Tensor[Float32], (64, 512)>) -> (<Tensor[Float32], (64, "
            "512)>)\n"
            "      # scope: Default/net-Mlp/relu-ReLU\n"
            "  %2 = test_matmul(%1, %para3_fc2.weight) {transpose_a: false, transpose_b: true} : "
            "(<Tensor[Float32], (64, 512)>, <Tensor[Float32], (10, 512)>) -> (<Tensor[Float32], "
            "(64, 10)>)\n"
            "      # scope: Default/net-Mlp/fc2-Dense\n"
            "  Return(%2)\n"
            "}\n");
}

TEST_F(PrinterParserTest, OutputNamesRoundTrip) {
  auto g = make_mlp();
  g->set_output_name(0, "logits");
  const std::string text = print_graph(*g);
  EXPECT_NE(text.find("  Return(%2 as \"logits\")\n"), std::string::npos) << text;
  auto parsed = parse_graph(text);
  EXPECT_EQ(parsed->output_name(0), "logits");
  EXPECT_EQ(print_graph(*parsed), text);
  EXPECT_EQ(make_mlp()->output_name(0), "");
  EXPECT_THROW(g->set_output_name(0, "not a name"), Error);
  // An unquoted name is a parse error that says what is expected.
  std::string bad = text;
  bad.replace(bad.find("as \"logits\""), 13, "as logits");
  try {
    parse_graph(bad);
    FAIL() << "an unquoted output name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a quoted output name after 'as'"), std::string::npos)
        << e.what();
  }
}

TEST_F(PrinterParserTest, DetailLevels) {
  auto g = make_mlp();
  const std::string compact = print_graph(*g, {Detail::kCompact});
  EXPECT_EQ(compact.find("transpose_a"), std::string::npos);  // default left out
  EXPECT_NE(compact.find("{transpose_b: true}"), std::string::npos);
  EXPECT_EQ(compact.find("# location"), std::string::npos);
  const std::string full = print_graph(*g, {Detail::kFull});
  EXPECT_NE(full.find("      # scope: Default/net-Mlp/fc1-Dense\n      # location: mlp.cc:10\n"),
            std::string::npos);
  for (Detail d : {Detail::kCompact, Detail::kNormal, Detail::kFull}) {
    const std::string text = print_graph(*g, {d});
    auto parsed = parse_graph(text, "mlp.ir");
    verify(*parsed);
    EXPECT_EQ(print_graph(*parsed, {d}), text);
  }
  auto parsed = parse_graph(full);
  EXPECT_EQ(parsed->nodes().front().location(), "mlp.cc:10");
  EXPECT_TRUE(parsed->parameter(1)->is_weight());
  EXPECT_FALSE(parsed->parameter(0)->is_weight());
}

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Everything the format can express, in one module.
std::unique_ptr<Graph> make_rich() {
  auto g = std::make_unique<Graph>("main");
  Parameter* x = g->add_parameter("x", f32({4, 2}));
  Parameter* flags = g->add_parameter("flags", {DType::kBool, {2}});
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  Constant* cf = g->add_constant<float>(
      {2, 4}, {1.0f, 2.5f, -0.0f, 0.1f, finf, -finf, std::numeric_limits<float>::denorm_min(),
               std::numeric_limits<float>::max()});
  g->add_constant<float>({1}, {fnan});
  g->add_constant<double>({4}, {0.1, -1e300, std::numeric_limits<double>::denorm_min(), 1.0 / 3});
  g->add_constant<int32_t>({3}, {std::numeric_limits<int32_t>::min(), 0, 7});
  g->add_constant<int64_t>(
      {2}, {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()});
  g->add_constant(TensorType{DType::kBool, {2}}, std::vector<uint8_t>{1, 0});
  g->add_constant<float>({}, {42.0f});
  g->add_constant<float>({0, 3}, {});

  Node* s = g->add_node("test_split", {x}, {{"num", int64_t{2}}}, {"Default/split", ""});
  Node* a = g->add_node("test_add", {s->output(0), s->output(1)});
  Node* all = g->add_node("test_all_attrs", {a},
                          {{"flag", true},
                           {"count", int64_t{-3}},
                           {"scale", 2.0},
                           {"label", std::string("q\"uote\\ \n\t\x01 é")},
                           {"dims", std::vector<int64_t>{1, -2, 3}},
                           {"weights", std::vector<double>{0.5, 1.0, -1e-7}},
                           {"dtype", DType::kInt64}},
                          {"Default/net/odd scope: with # marks ", "file.cc:1"});
  Node* c = g->add_node("test_add", {cf, cf});
  g->add_node("test_sink", {c});
  Node* call = g->add_node("test_call", {all, flags}, {{"graph", std::string("body")}});
  g->add_output(call->output(0));
  g->add_output(call->output(1));
  g->add_output(x);

  Graph* body = g->add_subgraph("body");
  Parameter* bx = body->add_parameter("x", f32({2, 2}));
  body->add_parameter("f", {DType::kBool, {2}});
  Node* inner_call = body->add_node("test_call", {bx}, {{"graph", std::string("inner")}});
  body->add_output(inner_call);
  Graph* inner = body->add_subgraph("inner");
  Parameter* ix = inner->add_parameter("x", f32({2, 2}));
  inner->add_output(inner->add_node("test_relu", {ix}));
  g->add_subgraph("empty");
  return g;
}

TEST_F(PrinterParserTest, RoundTripIsExact) {
  auto g = make_rich();
  verify(*g);
  for (Detail d : {Detail::kCompact, Detail::kNormal, Detail::kFull}) {
    const std::string text = print_graph(*g, {d});
    auto parsed = parse_graph(text, "rich.ir");
    verify(*parsed);
    EXPECT_EQ(print_graph(*parsed, {d}), text);
  }
  auto parsed = parse_graph(print_graph(*g, {Detail::kFull}));
  ASSERT_EQ(parsed->num_constants(), g->num_constants());
  for (size_t i = 0; i < g->num_constants(); ++i) {
    EXPECT_EQ(parsed->constant(i)->type(), g->constant(i)->type()) << i;
    EXPECT_TRUE(std::ranges::equal(parsed->constant(i)->bytes(), g->constant(i)->bytes()))
        << "constant " << i;
  }
  auto it = parsed->nodes().begin();
  std::advance(it, 2);
  EXPECT_EQ(it->attrs(), std::next(g->nodes().begin(), 2)->attrs());
  EXPECT_EQ(it->scope(), "Default/net/odd scope: with # marks ");
  ASSERT_EQ(parsed->subgraphs().size(), 2u);
  EXPECT_EQ(parsed->subgraphs()[0]->subgraphs()[0]->name(), "inner");
}

TEST_F(PrinterParserTest, ClonePrintsIdentically) {
  auto g = make_rich();
  auto copy = g->clone();
  verify(*copy);
  EXPECT_EQ(print_graph(*copy, {Detail::kFull}), print_graph(*g, {Detail::kFull}));
  EXPECT_EQ(copy->nodes().front().id(), g->nodes().front().id());
  EXPECT_NE(&copy->nodes().front(), &g->nodes().front());
}

TEST_F(PrinterParserTest, PrintsConstantsMultiOutputsAndSubgraphs) {
  auto g = make_rich();
  const std::string text = print_graph(*g);
  EXPECT_NE(text.find("# Total subgraphs: 4\n"), std::string::npos);
  EXPECT_NE(text.find("  %const1 = Constant <Tensor[Float32], (2, 4)> [1, 2.5, -0, 0.1, inf, "
                      "-inf, 1e-45, 3.4028235e+38]\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%const3 = Constant <Tensor[Float64], (4)> [0.1, -1e+300, 5e-324, "
                      "0.3333333333333333]"),
            std::string::npos);
  EXPECT_NE(text.find("%const5 = Constant <Tensor[Int64], (2)> [-9223372036854775808, "
                      "9223372036854775807]"),
            std::string::npos);
  EXPECT_NE(text.find("%const6 = Constant <Tensor[Bool], (2)> [true, false]"), std::string::npos);
  EXPECT_NE(text.find("%const7 = Constant <Tensor[Float32], ()> [42]"), std::string::npos);
  EXPECT_NE(text.find("%const8 = Constant <Tensor[Float32], (0, 3)> []"), std::string::npos);
  EXPECT_NE(text.find("  %0 = test_split(%para1_x) {axis: 0, num: 2} : (<Tensor[Float32], (4, "
                      "2)>) -> (<Tensor[Float32], (2, 2)>, <Tensor[Float32], (2, 2)>)\n"),
            std::string::npos);
  EXPECT_NE(text.find("  %1 = test_add(%0.0, %0.1)"), std::string::npos);
  EXPECT_NE(text.find("{count: -3, dims: [1, -2, 3], dtype: Int64, flag: true, label: "
                      "\"q\\\"uote\\\\ \\n\\t\\x01 é\", scale: 2.0, weights: [0.5, 1.0, -1e-07]}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  %4 = test_sink(%3) : (<Tensor[Float32], (2, 4)>) -> ()\n"),
            std::string::npos);
  EXPECT_NE(text.find("  Return(%5.0, %5.1, %para1_x)\n}\n"), std::string::npos);
  EXPECT_NE(text.find("\nsubgraph @body(%para1_x: <Tensor[Float32], (2, 2)>, %para2_f: "
                      "<Tensor[Bool], (2)>) {\n"),
            std::string::npos);
  EXPECT_NE(text.find("\nsubgraph @body/inner(%para1_x"), std::string::npos);
  EXPECT_NE(text.find("\nsubgraph @empty() {\n  Return()\n}\n"), std::string::npos);
}

TEST_F(PrinterParserTest, FileRoundTrip) {
  auto g = make_mlp();
  const auto path =
      mf::testing::unique_temp_path("mf_ir_printer_parser_test").replace_extension(".ir");
  write_graph_file(*g, path.string());
  auto parsed = parse_graph_file(path.string());
  EXPECT_EQ(print_graph(*parsed), print_graph(*g));
  std::filesystem::remove(path);
  try {
    parse_graph_file("/nonexistent/dir/x.ir");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_EQ(e.message(),
              "cannot read IR file '/nonexistent/dir/x.ir': No such file or directory");
  }
}

std::string parse_error(const std::string& text) {
  try {
    parse_graph(text, "bad.ir");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    return e.message();
  }
  return "<parsed>";
}

const char* const kHeader = "subgraph @f(%para1_x: <Tensor[Float32], (2, 3)>) {\n";

TEST_F(PrinterParserTest, MalformedInputsNamePositionAndExpectation) {
  EXPECT_EQ(parse_error(""), "bad.ir:1:1: expected 'subgraph', found end of file");
  EXPECT_EQ(parse_error("# only a comment\n"),
            "bad.ir:2:1: expected 'subgraph', found end of file");
  EXPECT_EQ(parse_error("graph @f() {}"), "bad.ir:1:1: expected 'subgraph', found 'graph'");
  EXPECT_EQ(parse_error("subgraph f() {}"),
            "bad.ir:1:10: expected a graph name such as '@main', found 'f'");
  EXPECT_EQ(parse_error("subgraph @f(%para1_x: <Tensor[Float33], (2)>) {"),
            "bad.ir:1:31: expected a dtype (Float32, Float64, Int32, Int64, Bool), found "
            "'Float33'");
  EXPECT_EQ(parse_error("subgraph @f(%para1_x: <Tensor[Float32], (2, -1)>) {"),
            "bad.ir:1:45: expected a dimension >= 0, found '-1'");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  Return(%para1_x)\n"),
            "bad.ir:3:1: expected '}' after Return, found end of file");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  %0 = test_relu(%9) : () -> ()\n"),
            "bad.ir:2:18: expected a defined value, found '%9' (not defined above)");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  %0 = test_relu(%para1_x) $\n"),
            "bad.ir:2:28: expected a token, found '$'");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  %0 = test_all_attrs(%para1_x) {label: \"abc\n"),
            "bad.ir:2:45: expected '\"' to close the string started at 2:41, found end of line");
  EXPECT_EQ(
      parse_error(std::string(kHeader) + "  %0 = test_all_attrs(%para1_x) {label: \"\\q\"}"),
      "bad.ir:2:41: expected an escape (\\n \\t \\r \\\" \\\\ \\xHH) in a string, found '\\q'");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  %0 = test_all_attrs(%para1_x) {count: 1 2}"),
            "bad.ir:2:43: expected ',' or '}', found '2'");
  EXPECT_EQ(parse_error(std::string(kHeader) +
                        "  %0 = test_all_attrs(%para1_x) {count: 99999999999999999999}"),
            "bad.ir:2:41: expected a 64-bit integer, found '99999999999999999999'");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  %const1 = Constant <Tensor[Float32], (2)> [1]\n"),
            "bad.ir:2:45: expected 2 values for <Tensor[Float32], (2)>, found 1");
  EXPECT_EQ(parse_error(std::string(kHeader) +
                        "  %const1 = Constant <Tensor[Int32], (1)> [3000000000]\n"),
            "bad.ir:2:44: expected an Int32 value, found '3000000000'");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  %const1 = Constant <Tensor[Bool], (1)> [1]\n"),
            "bad.ir:2:43: expected 'true' or 'false', found '1'");
}

TEST_F(PrinterParserTest, SemanticErrorsNamePosition) {
  const std::string ok_types = " : (<Tensor[Float32], (2, 3)>) -> (<Tensor[Float32], (2, 3)>)\n";
  EXPECT_EQ(parse_error(std::string(kHeader) + "  %0 = test_relx(%para1_x)" + ok_types),
            "bad.ir:2:8: unknown op 'test_relx'; did you mean 'test_relu', 'test_call', "
            "'test_add'? (" +
                std::to_string(all_ops().size()) + " ops are registered)");
  EXPECT_EQ(parse_error(std::string(kHeader) +
                        "  %0 = test_relu(%para1_x, %para1_x) : (<Tensor[Float32], (2, 3)>, "
                        "<Tensor[Float32], (2, 3)>) -> (<Tensor[Float32], (2, 3)>)\n"),
            "bad.ir:2:8: op 'test_relu' takes 1 input, got 2: (<Tensor[Float32], (2, 3)>, "
            "<Tensor[Float32], (2, 3)>)");
  EXPECT_EQ(parse_error(std::string(kHeader) +
                        "  %0 = test_relu(%para1_x) : (<Tensor[Float32], (2, 3)>) -> "
                        "(<Tensor[Float64], (2, 3)>)\n"),
            "bad.ir:2:62: declared output type <Tensor[Float64], (2, 3)> of op 'test_relu' does "
            "not match the inferred <Tensor[Float32], (2, 3)>");
  EXPECT_EQ(parse_error(std::string(kHeader) +
                        "  %0 = test_relu(%para1_x) : (<Tensor[Int32], (2, 3)>) -> "
                        "(<Tensor[Float32], (2, 3)>)\n"),
            "bad.ir:2:31: declared type <Tensor[Int32], (2, 3)> of input 0 does not match the "
            "type <Tensor[Float32], (2, 3)> of %para1_x");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  %0 = test_relu(%para1_x) {alpha: 1}" + ok_types),
            "bad.ir:2:8: op 'test_relu' has no attribute 'alpha' (it has none)");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  %0 = test_relu(%para1_x)" + ok_types +
                        "  %0 = test_relu(%para1_x)" + ok_types),
            "bad.ir:3:3: value '%0' is defined twice");
  EXPECT_EQ(
      parse_error(std::string(kHeader) +
                  "  %0 = test_split(%para1_x) {num: 2} : (<Tensor[Float32], (2, 3)>) -> "
                  "(<Tensor[Float32], (1, 3)>, <Tensor[Float32], (1, 3)>)\n  Return(%0)\n}\n"),
      "bad.ir:3:10: expected an output index such as '%0.0' for a node with 2 outputs, "
      "found '%0'");
  EXPECT_EQ(parse_error(std::string(kHeader) + "  Return()\n}\nsubgraph @a/b() {\n  Return()\n}\n"),
            "bad.ir:4:10: expected the parent @a to be defined before its subgraph @a/b");
}

// Every prefix of a valid file either parses or fails with mf::Error; so does every single-byte
// corruption from a fixed seed. Run under ASan/UBSan this also shows nothing reads out of bounds.
TEST_F(PrinterParserTest, TruncatedAndGarbageInputsNeverCrash) {
  const std::string text = print_graph(*make_rich(), {Detail::kFull});
  size_t parsed = 0, failed = 0;
  for (size_t n = 0; n <= text.size(); ++n) {
    try {
      parse_graph(std::string_view(text).substr(0, n));
      ++parsed;
    } catch (const Error&) {
      ++failed;
    }
  }
  EXPECT_GE(parsed, 1u);  // at least the whole text
  EXPECT_GT(failed, 0u);
  std::mt19937 rng(1234);
  const std::string alphabet = "%@#<>()[]{},:=-.\"\\ \n0123456789aefinTRx\x01\xff";
  for (int i = 0; i < 3000; ++i) {
    std::string mutated = text;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % mutated.size();
      switch (rng() % 3) {
        case 0:
          mutated[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          mutated.erase(at, 1 + rng() % 8);
          break;
        default:
          mutated.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    try {
      auto g = parse_graph(mutated);
      verify(*g);
      EXPECT_EQ(print_graph(*parse_graph(print_graph(*g))), print_graph(*g));
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace mf::ir
