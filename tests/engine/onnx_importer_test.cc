// The ONNX importer on small models written with our own writer: each model runs in PYNATIVE and
// GRAPH mode and must match the same computation written with mf::ops; broken, hostile and
// unsupported files must fail with a clear mf::Error, never a crash.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "context/context.h"
#include "engine/eager/ir_runner.h"
#include "engine/io/model_file.h"
#include "engine/io/onnx/importer.h"
#include "engine/io/onnx/writer.h"
#include "engine/ops.h"
#include "tests/engine/engine_fixture.h"

namespace mf {
namespace {

using context::Json;
using onnx::ModelWriter;
using onnx::NodeAttr;

class OnnxImporterTest : public testing::EngineTest {
 protected:
  // Imports `writer`'s model and runs it in `mode` with the given inputs (ONNX names).
  // `settings`: more context keys for the run.
  std::vector<Tensor> run(const ModelWriter& writer, const char* mode,
                          const std::map<std::string, Tensor>& inputs,
                          const Json& settings = Json::object()) {
    onnx::ImportedModel model = onnx::import_onnx_model_from_bytes(writer.serialize(), "test.onnx");
    std::map<std::string, Tensor> feed = model.weights;
    for (const auto& [name, t] : inputs) feed[onnx::sanitize_name(name)] = t;
    context::set({{"mode", mode}});
    context::set(settings);
    engine::IrRunner runner(std::move(model.graph));
    std::vector<Tensor> out;
    for (auto& [name, t] : runner.run(feed, 0)) out.push_back(t);
    context::reset();
    return out;
  }

  // Runs in both modes and compares every output with `expected`.
  void check(const ModelWriter& writer, const std::map<std::string, Tensor>& inputs,
             const std::vector<Tensor>& expected, double tolerance = 1e-4) {
    for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
      SCOPED_TRACE(mode);
      const std::vector<Tensor> got = run(writer, mode, inputs);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t k = 0; k < got.size(); ++k) {
        SCOPED_TRACE("output " + std::to_string(k));
        ASSERT_EQ(got[k].shape(), expected[k].shape());
        ASSERT_EQ(got[k].dtype(), expected[k].dtype());
        const std::vector<double> g = got[k].to_doubles(), w = expected[k].to_doubles();
        for (size_t i = 0; i < g.size(); ++i) {
          ASSERT_NEAR(g[i], w[i], tolerance * (1 + std::abs(w[i]))) << "element " << i;
        }
      }
    }
  }

  // The mf::Error an import of `writer`'s model throws (fails the test when none).
  static Error import_error(const std::string& bytes) {
    try {
      onnx::import_onnx_model_from_bytes(bytes, "bad.onnx");
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "import succeeded";
    return Error(ErrorKind::kInternal, "no error");
  }
};

Tensor i64s(std::vector<int64_t> v) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector(v, {n});
}

TEST_F(OnnxImporterTest, SmallCnnMatchesOps) {
  const Tensor x = Tensor::randn({2, 3, 8, 8}, 1);
  const Tensor w1 = Tensor::randn({4, 3, 3, 3}, 2, 0.3), b1 = Tensor::randn({4}, 3, 0.1);
  const Tensor scale = Tensor::uniform({4}, 0.5, 1.5, 4), shift = Tensor::randn({4}, 5, 0.1);
  const Tensor mean = Tensor::randn({4}, 6, 0.1), var = Tensor::uniform({4}, 0.5, 2.0, 7);
  const Tensor w2 = Tensor::randn({10, 64}, 8, 0.1), b2 = Tensor::randn({10}, 9, 0.1);

  ModelWriter m;
  m.add_input("input.1", DType::kFloat32, {2, 3, 8, 8});
  m.add_initializer("conv1.weight", w1);
  m.add_initializer("conv1.bias", b1);
  m.add_initializer("bn.weight", scale);
  m.add_initializer("bn.bias", shift);
  m.add_initializer("bn.running_mean", mean);
  m.add_initializer("bn.running_var", var);
  m.add_initializer("fc.weight", w2);
  m.add_initializer("fc.bias", b2);
  m.add_node("Conv", {"input.1", "conv1.weight", "conv1.bias"}, {"c"},
             {{"kernel_shape", std::vector<int64_t>{3, 3}},
              {"pads", std::vector<int64_t>{1, 1, 1, 1}},
              {"strides", std::vector<int64_t>{1, 1}}},
             "/conv1/Conv");
  m.add_node("BatchNormalization",
             {"c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, {"bn"},
             {{"epsilon", 1e-5}});
  m.add_node("Relu", {"bn"}, {"r"});
  m.add_node(
      "MaxPool", {"r"}, {"p"},
      {{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  m.add_node("Flatten", {"p"}, {"f"}, {{"axis", int64_t{1}}});
  m.add_node("Gemm", {"f", "fc.weight", "fc.bias"}, {"logits"}, {{"transB", int64_t{1}}});
  m.add_output("logits");

  Tensor y = ops::conv2d(x, w1, {{1, 1}, {1, 1}, {1, 1}, 1});
  y = ops::bias_add(y, b1, 1);
  y = ops::relu(ops::batch_norm(y, scale, shift, mean, var, 1e-5));
  y = ops::flatten(ops::max_pool2d(y, {{2, 2}, {2, 2}, {0, 0}}));
  y = ops::bias_add(ops::matmul(y, w2, false, true), b2);
  check(m, {{"input.1", x}}, {y});

  // Initializers are weights named after their ONNX names; the input is a plain parameter.
  onnx::ImportedModel model = onnx::import_onnx_model_from_bytes(m.serialize(), "cnn.onnx");
  ASSERT_NE(model.graph->find_parameter("conv1.weight"), nullptr);
  EXPECT_TRUE(model.graph->find_parameter("conv1.weight")->is_weight());
  EXPECT_FALSE(model.graph->find_parameter("input.1")->is_weight());
  EXPECT_EQ(model.inputs, std::vector<std::string>{"input.1"});
  EXPECT_EQ(model.weights.size(), 8u);
}

TEST_F(OnnxImporterTest, TransformerBlockWithGeluAndLayerNormPatterns) {
  const Tensor x = Tensor::randn({2, 5, 8}, 11);
  const Tensor w = Tensor::randn({8, 8}, 12, 0.3), b = Tensor::randn({8}, 13, 0.1);
  const Tensor g1 = Tensor::uniform({8}, 0.5, 1.5, 14), be1 = Tensor::randn({8}, 15, 0.1);
  const Tensor g2 = Tensor::uniform({8}, 0.5, 1.5, 16), be2 = Tensor::randn({8}, 17, 0.1);

  ModelWriter m(17);
  m.add_input("x", DType::kFloat32, {2, 5, 8});
  m.add_initializer("w", w);
  m.add_initializer("b", b);
  m.add_initializer("g1", g1);
  m.add_initializer("be1", be1);
  m.add_initializer("g2", g2);
  m.add_initializer("be2", be2);
  m.add_node("MatMul", {"x", "w"}, {"mm"});
  m.add_node("Add", {"mm", "b"}, {"lin"});
  m.add_node("LayerNormalization", {"lin", "g1", "be1"}, {"ln"},
             {{"axis", int64_t{-1}}, {"epsilon", 1e-5}});
  // GELU as exporters write it: x * 0.5 * (1 + erf(x / sqrt 2)).
  m.add_node("Constant", {}, {"sqrt2"}, {{"value", ops::scalar(std::sqrt(2.0))}});
  m.add_node("Constant", {}, {"one"}, {{"value", ops::scalar(1.0)}});
  m.add_node("Constant", {}, {"half"}, {{"value", ops::scalar(0.5)}});
  m.add_node("Div", {"ln", "sqrt2"}, {"d"});
  m.add_node("Erf", {"d"}, {"e"});
  m.add_node("Add", {"e", "one"}, {"e1"});
  m.add_node("Mul", {"ln", "e1"}, {"xe"});
  m.add_node("Mul", {"xe", "half"}, {"gelu"});
  m.add_node("Softmax", {"gelu"}, {"sm"}, {{"axis", int64_t{-1}}});
  // LayerNorm decomposed, as opset < 17 exports write it.
  m.add_node("Constant", {}, {"two"}, {{"value", ops::scalar(2.0)}});
  m.add_node("Constant", {}, {"eps"}, {{"value", ops::scalar(1e-5)}});
  m.add_node("ReduceMean", {"sm"}, {"mu"}, {{"axes", std::vector<int64_t>{-1}}});
  m.add_node("Sub", {"sm", "mu"}, {"xc"});
  m.add_node("Pow", {"xc", "two"}, {"sq"});
  m.add_node("ReduceMean", {"sq"}, {"v"}, {{"axes", std::vector<int64_t>{-1}}});
  m.add_node("Add", {"v", "eps"}, {"ve"});
  m.add_node("Sqrt", {"ve"}, {"sd"});
  m.add_node("Div", {"xc", "sd"}, {"nrm"});
  m.add_node("Mul", {"nrm", "g2"}, {"sc"});
  m.add_node("Add", {"sc", "be2"}, {"out"});
  m.add_output("out");

  Tensor y = ops::reshape(ops::matmul(ops::reshape(x, {10, 8}), w), {2, 5, 8});
  y = ops::add(y, b);
  y = ops::layer_norm(y, g1, be1, -1, 1e-5);
  y = ops::softmax(ops::gelu(y, /*tanh_approximation=*/false), -1);
  y = ops::layer_norm(y, g2, be2, -1, 1e-5);
  check(m, {{"x", x}}, {y}, 1e-5);
}

TEST_F(OnnxImporterTest, ShapeArithmeticFoldsToConstants) {
  ModelWriter m(13);
  m.add_input("x", DType::kFloat32, {2, 3, 4});
  m.add_node("Shape", {"x"}, {"s"});
  m.add_node("Constant", {}, {"zero"}, {{"value", Tensor::from_vector<int64_t>({0}, {})}});
  m.add_node("Gather", {"s", "zero"}, {"n"}, {{"axis", int64_t{0}}});
  m.add_node("Constant", {}, {"axes"}, {{"value", i64s({0})}});
  m.add_node("Unsqueeze", {"n", "axes"}, {"n1"});
  m.add_node("Constant", {}, {"minus1"}, {{"value", i64s({-1})}});
  m.add_node("Concat", {"n1", "minus1"}, {"shape"}, {{"axis", int64_t{0}}});
  m.add_node("Reshape", {"x", "shape"}, {"y"});
  m.add_output("y");
  const auto model = onnx::import_onnx_model_from_bytes(m.serialize(), "shape.onnx");
  ASSERT_EQ(model.graph->num_nodes(), 1u);
  EXPECT_EQ(model.graph->nodes().begin()->op(), "reshape");
  const Tensor x = Tensor::randn({2, 3, 4}, 21);
  check(m, {{"x", x}}, {ops::reshape(x, {2, 12})});
}

// Clip with both bounds is one clip op (one pass over x op by op, where maximum and minimum took
// two); with one bound, the op for that side. Same values as the two ops.
TEST_F(OnnxImporterTest, ClipIsOneOpWithBothBoundsAndOneSideWithOne) {
  ModelWriter m(13);
  m.add_input("x", DType::kFloat32, {3, 17});
  m.add_initializer("lo", ops::scalar(-0.5));
  m.add_initializer("hi", ops::scalar(0.75));
  m.add_node("Clip", {"x", "lo", "hi"}, {"both"});
  m.add_node("Clip", {"x", "lo"}, {"lower"});
  m.add_node("Clip", {"x", "", "hi"}, {"upper"});
  for (const char* out : {"both", "lower", "upper"}) m.add_output(out);
  const auto model = onnx::import_onnx_model_from_bytes(m.serialize(), "clip.onnx");
  std::vector<std::string> ops_seen;
  for (const auto& node : model.graph->nodes()) ops_seen.push_back(node.op());
  EXPECT_EQ(ops_seen, (std::vector<std::string>{"clip", "maximum", "minimum"}));
  const Tensor x = Tensor::randn({3, 17}, 41, 2.0);
  const Tensor lo = ops::scalar(-0.5), hi = ops::scalar(0.75);
  check(m, {{"x", x}},
        {ops::minimum(ops::maximum(x, lo), hi), ops::maximum(x, lo), ops::minimum(x, hi)});
}

TEST_F(OnnxImporterTest, ShapeOpsActivationsAndGather) {
  const Tensor x = Tensor::randn({2, 6, 4}, 31, 4.0);
  const Tensor table = Tensor::randn({12, 4}, 32);
  const Tensor ids = Tensor::from_vector<int64_t>({3, 0, 11, -1}, {2, 2});
  ModelWriter m(13);
  m.add_input("x", DType::kFloat32, {2, 6, 4});
  m.add_input("ids", DType::kInt64, {2, 2});
  m.add_initializer("table", table);
  m.add_initializer("lo", ops::scalar(0.0));
  m.add_initializer("hi", ops::scalar(6.0));
  m.add_initializer("split", i64s({2, 4}));
  m.add_initializer("starts", i64s({1, 0}));
  m.add_initializer("ends", i64s({1000, -1}));
  m.add_initializer("axes", i64s({1, 2}));
  m.add_initializer("steps", i64s({2, 1}));
  m.add_node("Clip", {"x", "lo", "hi"}, {"relu6"});
  m.add_node("LeakyRelu", {"x"}, {"leaky"}, {{"alpha", 0.1}});
  m.add_node("Split", {"x", "split"}, {"s0", "s1"}, {{"axis", int64_t{1}}});
  m.add_node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"sl"});
  m.add_node("Transpose", {"x"}, {"t"}, {{"perm", std::vector<int64_t>{2, 0, 1}}});
  m.add_node("Cast", {"x"}, {"xd"}, {{"to", int64_t{11}}});
  m.add_node("Identity", {"xd"}, {"xi"});
  m.add_node("Dropout", {"xi"}, {"xo"});
  m.add_node("Gather", {"table", "ids"}, {"emb"});
  m.add_node("ReduceSum", {"x", "axes"}, {"rs"}, {{"keepdims", int64_t{0}}});
  for (const char* out : {"relu6", "leaky", "s0", "s1", "sl", "t", "xo", "emb", "rs"}) {
    m.add_output(out);
  }
  const Tensor zero = ops::scalar(0.0);
  check(m, {{"x", x}, {"ids", ids}},
        {ops::minimum(ops::maximum(x, zero), ops::scalar(6.0)),
         ops::select(ops::less(x, zero), ops::mul(x, ops::scalar(0.1)), x),
         ops::slice(x, {0, 0, 0}, {2, 2, 4}), ops::slice(x, {0, 2, 0}, {2, 6, 4}),
         ops::call("slice", {x},
                   {{"begin", std::vector<int64_t>{0, 1, 0}},
                    {"end", std::vector<int64_t>{2, 6, 3}},
                    {"strides", std::vector<int64_t>{1, 2, 1}}})[0],
         ops::transpose(x, {2, 0, 1}), ops::cast(x, DType::kFloat64),
         ops::call("gather", {table, ids}, {{"axis", int64_t{0}}})[0],
         ops::reduce_sum(x, {1, 2}, false)});
}

TEST_F(OnnxImporterTest, Opset11FormsAndPoolingDetails) {
  const Tensor x = Tensor::randn({1, 2, 7, 7}, 41);
  ModelWriter m(11);
  m.add_input("x", DType::kFloat32, {1, 2, 7, 7});
  m.add_node("AveragePool", {"x"}, {"ap"},
             {{"kernel_shape", std::vector<int64_t>{3, 3}},
              {"strides", std::vector<int64_t>{2, 2}},
              {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  m.add_node("MaxPool", {"x"}, {"mp"},
             {{"kernel_shape", std::vector<int64_t>{2, 2}},
              {"strides", std::vector<int64_t>{2, 2}},
              {"ceil_mode", int64_t{1}}});
  m.add_node("Unsqueeze", {"x"}, {"u"}, {{"axes", std::vector<int64_t>{0}}});
  m.add_node("Squeeze", {"u"}, {"sq"}, {{"axes", std::vector<int64_t>{0}}});
  m.add_node("Softmax", {"sq"}, {"sm"}, {{"axis", int64_t{1}}});  // opset 11: over C*H*W
  m.add_node("GlobalAveragePool", {"x"}, {"gap"});
  for (const char* out : {"ap", "mp", "sm", "gap"}) m.add_output(out);
  const Tensor sm = ops::reshape(ops::softmax(ops::reshape(x, {1, 98}), -1), {1, 2, 7, 7});
  ops::Pool2dOptions ceil_pool{{2, 2}, {2, 2}, {0, 1, 0, 1}};
  check(m, {{"x", x}},
        {ops::avg_pool2d(x, {{3, 3}, {2, 2}, {1, 1}}), ops::max_pool2d(x, ceil_pool), sm,
         ops::global_avg_pool(x)});
}

// ---- errors ----

TEST_F(OnnxImporterTest, UnsupportedOpNamesOpDomainOpsetNodeAndRemedy) {
  ModelWriter m(15);
  m.add_input("x", DType::kFloat32, {2});
  m.add_node("Bernoulli", {"x"}, {"y"}, {}, "my_coin");
  m.add_output("y");
  const Error e = import_error(m.serialize());
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  for (const char* part :
       {"'Bernoulli'", "ai.onnx", "opset 15", "my_coin", "Supported ops:", "Conv"}) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << part << " in " << e.what();
  }

  ModelWriter custom(17);
  custom.add_input("x", DType::kFloat32, {2});
  custom.add_node("FusedGelu", {"x"}, {"y"}, {}, "g", "com.microsoft");
  custom.add_output("y");
  const Error c = import_error(custom.serialize());
  EXPECT_EQ(c.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(c.what()).find("com.microsoft"), std::string::npos) << c.what();

  ModelWriter old(6);
  old.add_input("x", DType::kFloat32, {1, 1, 2, 2});
  old.add_node("Upsample", {"x"}, {"y"}, {{"width_scale", 2.0}, {"height_scale", 2.0}});
  old.add_output("y");
  const Error o = import_error(old.serialize());
  EXPECT_EQ(o.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(o.what()).find("opset 6"), std::string::npos) << o.what();
  EXPECT_NE(std::string(o.what()).find("version_converter"), std::string::npos) << o.what();
}

// Opsets 1-6: nodes are rewritten into their opset-7 form (legacy_opsets.cc), each rewrite
// checked against the answer the old op defines.
TEST_F(OnnxImporterTest, LegacyOpsetsReadAsTheirOpset7Form) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  // Add-6 with broadcast=1, axis=0: B (2,) aligns with A's first axis, not numpy's last.
  ModelWriter add(6);
  add.add_input("a", DType::kFloat32, {2, 3});
  add.add_input("b", DType::kFloat32, {2});
  add.add_node("Add", {"a", "b"}, {"y"},
               {{"broadcast", int64_t{1}},
                {"axis", int64_t{0}},
                {"consumed_inputs", std::vector<int64_t>{0, 0}}});
  add.add_output("y");
  check(add, {{"a", a}, {"b", Tensor::from_vector<float>({10, 20}, {2})}},
        {Tensor::from_vector<float>({11, 12, 13, 24, 25, 26}, {2, 3})}, 0);

  // Opset 1: Reshape's shape attribute, Cast's type name, Concat's default axis 1, Pad's paddings.
  ModelWriter old(1);
  old.add_input("a", DType::kFloat32, {2, 3});
  old.add_node("Reshape", {"a"}, {"r"}, {{"shape", std::vector<int64_t>{3, 2}}});
  old.add_node("Cast", {"r"}, {"c"}, {{"to", std::string("INT32")}});
  old.add_node("Cast", {"c"}, {"f"}, {{"to", std::string("FLOAT")}});
  old.add_node("Concat", {"f", "f"}, {"cat"});
  old.add_node("Pad", {"cat"}, {"p"},
               {{"paddings", std::vector<int64_t>{0, 1, 0, 0}}, {"value", 9.0}});
  old.add_output("p");
  check(old, {{"a", a}},
        {Tensor::from_vector<float>({9, 1, 2, 1, 2, 9, 3, 4, 3, 4, 9, 5, 6, 5, 6}, {3, 5})}, 0);

  // What has no opset-7 form is Unsupported, naming the op and the way to upgrade.
  for (const char* op : {"Tile", "Upsample", "GRU"}) {
    ModelWriter m(5);
    m.add_input("x", DType::kFloat32, {2});
    m.add_node(op, {"x"}, {"y"});
    m.add_output("y");
    const Error e = import_error(m.serialize());
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << op;
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("convert_version"), std::string::npos) << e.what();
  }
  ModelWriter bad(5);
  bad.add_input("x", DType::kFloat32, {2});
  bad.add_node("Cast", {"x"}, {"y"}, {{"to", std::string("FLOAT\x1b[2J")}});
  bad.add_output("y");
  const Error e = import_error(bad.serialize());
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(std::string(e.what()).find('\x1b'), std::string::npos) << "escaped";
}

// A graph input an op needs as a constant (Resize's scales) is Unsupported, unless its value is
// given in ImportOptions::input_values: the graph is specialized to it, and still takes the input.
TEST_F(OnnxImporterTest, InputValuesSpecializeInputsThatMustBeKnown) {
  ModelWriter m(13);
  m.add_input("x", DType::kFloat32, {1, 1, 2, 2});
  m.add_input("scales", DType::kFloat32, {4});
  m.add_node("Resize", {"x", "", "scales"}, {"y"},
             {{"mode", std::string("cubic")},
              {"coordinate_transformation_mode", std::string("asymmetric")}});
  m.add_output("y");
  const Error e = import_error(m.serialize());
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(e.what()).find("'scales'"), std::string::npos) << e.what();

  const Tensor scales = Tensor::from_vector<float>({1, 1, 2, 1}, {4});
  onnx::ImportOptions options;
  options.input_values["scales"] = scales;
  onnx::ImportedModel model =
      onnx::import_onnx_model_from_bytes(m.serialize(), "test.onnx", options);
  ASSERT_EQ(model.inputs.size(), 2u);
  std::map<std::string, Tensor> feed = {
      {model.inputs[0], Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2})},
      {model.inputs[1], scales}};
  engine::IrRunner runner(std::move(model.graph));
  const Tensor y = runner.run(feed, 0).at(0).second;
  // Asymmetric cubic doubling the height: rows at 0 and 1 exactly, rows between from Keys' kernel
  // (A = -0.75) over the edge-clamped taps: at 0.5 the weights are (-0.09375, 0.59375, 0.59375,
  // -0.09375) over rows (0, 0, 1, 1); at 1.5 over rows (0, 1, 1, 1).
  const std::vector<float> want = {1, 2, 2, 3, 3, 4, 3.1875f, 4.1875f};
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4, 2}));
  const std::vector<float> got = y.to_vector<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

// A reverse RNN over sequences of different lengths: each entry runs from its own last step back
// to the first, Y is 0 past its length and Y_h is the state after its first step. The expected
// values are the ONNX equations written out here.
TEST_F(OnnxImporterTest, ReverseRnnHonoursSequenceLengthsAndClip) {
  const int64_t steps = 3, batch = 2, hidden = 2;
  const std::vector<float> xs = {0.5f, -1.0f, 1.5f, 0.25f, -0.75f, 2.0f};  // (steps, batch, 1)
  const std::vector<float> w = {0.8f, -0.6f}, r = {0.5f, -0.3f, 0.2f, 0.9f};
  const std::vector<float> b = {0.1f, -0.2f, 0.05f, 0.3f};
  const std::vector<int64_t> lengths = {3, 1};
  ModelWriter m(14);
  m.add_input("x", DType::kFloat32, {steps, batch, 1});
  m.add_initializer("w", Tensor::from_vector(w, {1, hidden, 1}));
  m.add_initializer("r", Tensor::from_vector(r, {1, hidden, hidden}));
  m.add_initializer("b", Tensor::from_vector(b, {1, 2 * hidden}));
  m.add_initializer("lens", Tensor::from_vector(std::vector<int32_t>{3, 1}, {batch}));
  m.add_node("RNN", {"x", "w", "r", "b", "lens"}, {"y", "y_h"},
             {{"hidden_size", hidden}, {"direction", std::string("reverse")}, {"clip", 1.0}});
  m.add_output("y");
  m.add_output("y_h");
  std::vector<float> y(size_t(steps * batch * hidden), 0.0f), h(size_t(batch * hidden), 0.0f);
  for (int64_t n = 0; n < batch; ++n) {
    std::vector<double> state(size_t(hidden), 0.0);
    for (int64_t t = lengths[size_t(n)] - 1; t >= 0; --t) {
      std::vector<double> next(static_cast<size_t>(hidden), 0.0);
      for (int64_t j = 0; j < hidden; ++j) {
        double z = xs[size_t(t * batch + n)] * w[size_t(j)] + b[size_t(j)] + b[size_t(hidden + j)];
        for (int64_t k = 0; k < hidden; ++k) z += state[size_t(k)] * r[size_t(j * hidden + k)];
        next[size_t(j)] = std::tanh(std::clamp(z, -1.0, 1.0));
        y[size_t((t * batch + n) * hidden + j)] = float(next[size_t(j)]);
      }
      state = next;
    }
    for (int64_t j = 0; j < hidden; ++j) h[size_t(n * hidden + j)] = float(state[size_t(j)]);
  }
  check(m, {{"x", Tensor::from_vector(xs, {steps, batch, 1})}},
        {Tensor::from_vector(y, {steps, 1, batch, hidden}),
         Tensor::from_vector(h, {1, batch, hidden})},
        1e-6);
}

// Einsum with three operands (a chain contracted to a scalar) and with broadcast ellipses and an
// implicit output, against the sums written out.
TEST_F(OnnxImporterTest, EinsumContractsChainsAndBroadcastsEllipses) {
  const auto values = [](int64_t n, float scale) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * float((i * 7) % 11) - 2.0f;
    return v;
  };
  const std::vector<float> a = values(12, 0.5f), b = values(20, 0.25f), c = values(15, 0.125f);
  ModelWriter chain(13);
  chain.add_input("a", DType::kFloat32, {3, 4});
  chain.add_input("b", DType::kFloat32, {4, 5});
  chain.add_input("c", DType::kFloat32, {3, 5});
  chain.add_node("Einsum", {"a", "b", "c"}, {"y"}, {{"equation", std::string("ij,jk,ik->")}});
  chain.add_output("y");
  double sum = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) sum += double(a[i * 4 + j]) * b[j * 5 + k] * c[i * 5 + k];
  check(chain,
        {{"a", Tensor::from_vector(a, {3, 4})},
         {"b", Tensor::from_vector(b, {4, 5})},
         {"c", Tensor::from_vector(c, {3, 5})}},
        {Tensor::from_vector<float>({float(sum)}, {})}, 1e-5);

  // (2, 1, 2, 3) x (4, 3, 2): the ellipses (2, 1) and (4,) broadcast to (2, 4).
  const std::vector<float> x = values(12, 0.5f), y = values(24, 0.25f);
  ModelWriter ellipsis(13);
  ellipsis.add_input("x", DType::kFloat32, {2, 1, 2, 3});
  ellipsis.add_input("y", DType::kFloat32, {4, 3, 2});
  ellipsis.add_node("Einsum", {"x", "y"}, {"z"}, {{"equation", std::string("...ij,...jk")}});
  ellipsis.add_output("z");
  std::vector<float> z;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 4; ++q)
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 2; ++k) {
          double v = 0;
          for (int j = 0; j < 3; ++j) v += double(x[(p * 2 + i) * 3 + j]) * y[(q * 3 + j) * 2 + k];
          z.push_back(float(v));
        }
  check(ellipsis,
        {{"x", Tensor::from_vector(x, {2, 1, 2, 3})}, {"y", Tensor::from_vector(y, {4, 3, 2})}},
        {Tensor::from_vector(z, {2, 4, 2, 2})}, 1e-5);
}

// Initializers kept as external data are read from files in the model's folder, at their offset;
// a location that leaves the folder (.., an absolute path, a symbolic link out) or data past the
// end of its file is refused, and so is external data in a model given as bytes.
TEST_F(OnnxImporterTest, ExternalDataIsReadFromTheModelsFolderOnly) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mf_external_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "model");
  const std::vector<float> w = {1.5f, -2.0f, 0.25f, 4.0f};
  std::string bytes(8, 'x');  // 8 bytes before the tensor: the offset must be honoured
  bytes.append(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
  std::ofstream(dir / "model" / "weights.bin", std::ios::binary) << bytes;
  std::ofstream(dir / "outside.bin", std::ios::binary) << bytes;
  fs::create_symlink(dir / "outside.bin", dir / "model" / "link.bin");
  const auto model = [&](const std::string& location, const std::string& offset) {
    ModelWriter m;
    m.add_input("x", DType::kFloat32, {4});
    m.add_external_initializer("w", 1, {4},
                               {{"location", location}, {"offset", offset}, {"length", "16"}});
    m.add_node("Mul", {"x", "w"}, {"y"});
    m.add_output("y");
    m.save(dir / "model" / "m.onnx");
    return m.serialize();
  };
  model("weights.bin", "8");
  onnx::ImportedModel imported = onnx::import_onnx_model(dir / "model" / "m.onnx");
  ASSERT_EQ(imported.weights.size(), 1u);
  EXPECT_EQ(imported.weights.begin()->second.to_vector<float>(), w);
  // The same file as `mf run` and ms.onnx.load_cell open it: reading its inputs first (which
  // needs no external data) and running it.
  engine::ModelFile file = engine::ModelFile::load(dir / "model" / "m.onnx");
  const auto outputs = file.run({{"x", Tensor::from_vector<float>({1, 1, 2, 2}, {4})}}, 0);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].second.to_vector<float>(), (std::vector<float>{1.5f, -2.0f, 0.5f, 8.0f}));

  for (const std::string& location :
       {std::string("../outside.bin"), (dir / "outside.bin").string(), std::string("link.bin"),
        std::string("sub/../../outside.bin")}) {
    model(location, "8");
    try {
      onnx::import_onnx_model(dir / "model" / "m.onnx");
      ADD_FAILURE() << location << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("model's folder"), std::string::npos) << e.what();
    }
  }
  model("weights.bin", "16");  // 16 bytes from 16: past the end of the 24-byte file
  try {
    onnx::import_onnx_model(dir / "model" / "m.onnx");
    ADD_FAILURE() << "data past the end was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << e.what();
  }
  const Error e = import_error(model("weights.bin", "8"));
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_NE(std::string(e.what()).find("from its file"), std::string::npos) << e.what();
  fs::remove_all(dir);
}

TEST_F(OnnxImporterTest, DamagedTensorsAreDataLoss) {
  ModelWriter bad_size;
  bad_size.add_input("x", DType::kFloat32, {2, 3});
  bad_size.add_raw_initializer("w", 1, {2, 3}, std::string(20, '\0'));  // 24 bytes needed
  bad_size.add_node("Add", {"x", "w"}, {"y"});
  bad_size.add_output("y");
  const Error e = import_error(bad_size.serialize());
  EXPECT_EQ(e.kind(), ErrorKind::kDataLoss);
  EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();

  ModelWriter negative;
  negative.add_input("x", DType::kFloat32, {2});
  negative.add_raw_initializer("w", 1, {-2}, std::string(8, '\0'));
  negative.add_node("Add", {"x", "w"}, {"y"});
  negative.add_output("y");
  EXPECT_EQ(import_error(negative.serialize()).kind(), ErrorKind::kDataLoss);

  EXPECT_EQ(import_error("this is not a protobuf \xff\xff\xff").kind(), ErrorKind::kDataLoss);
}

TEST_F(OnnxImporterTest, CyclesAndUndefinedInputsAreInvalid) {
  ModelWriter cycle;
  cycle.add_input("x", DType::kFloat32, {2});
  cycle.add_node("Add", {"x", "b"}, {"a"}, {}, "n1");
  cycle.add_node("Relu", {"a"}, {"b"}, {}, "n2");
  cycle.add_output("b");
  const Error c = import_error(cycle.serialize());
  EXPECT_EQ(c.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(c.what()).find("cycle"), std::string::npos) << c.what();

  ModelWriter undefined;
  undefined.add_input("x", DType::kFloat32, {2});
  undefined.add_node("Add", {"x", "ghost"}, {"y"}, {}, "n1");
  undefined.add_output("y");
  const Error u = import_error(undefined.serialize());
  EXPECT_EQ(u.kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(std::string(u.what()).find("'ghost'"), std::string::npos) << u.what();
}

// Truncations and random byte edits of a valid model either import or throw mf::Error.
TEST_F(OnnxImporterTest, FuzzedFilesImportOrThrowCleanly) {
  ModelWriter m(13);
  m.add_input("x", DType::kFloat32, {1, 2, 5, 5});
  m.add_initializer("w", Tensor::randn({3, 2, 3, 3}, 51));
  m.add_initializer("shape", i64s({1, -1}));
  m.add_node("Conv", {"x", "w"}, {"c"}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  m.add_node("Relu", {"c"}, {"r"});
  m.add_node("Reshape", {"r", "shape"}, {"f"});
  m.add_node("Softmax", {"f"}, {"y"});
  m.add_output("y");
  const std::string good = m.serialize();
  std::mt19937 rng(7);
  int imported = 0, rejected = 0;
  auto attempt = [&](const std::string& bytes) {
    try {
      onnx::import_onnx_model_from_bytes(bytes, "fuzz.onnx");
      ++imported;
    } catch (const Error&) {
      ++rejected;
    }
  };
  for (size_t n = 0; n < good.size(); n += 3) attempt(good.substr(0, n));
  for (int i = 0; i < 1500; ++i) {
    std::string bytes = good;
    const int edits = 1 + int(rng() % 4);
    for (int k = 0; k < edits; ++k) bytes[rng() % bytes.size()] = char(rng() & 0xff);
    attempt(bytes);
  }
  EXPECT_GT(imported, 0);
  EXPECT_GT(rejected, 0);
}

// A resnet-like network (conv-bn-relu stages with residual adds, global pool, fc): imports and
// agrees across modes. With MF_ONNX_WRITE_RESNET=FILE it also writes the full-size model (the
// resnet18 layout at 224x224) for `mf run FILE --iters 10` measurements.
void write_resnet_like(ModelWriter& m, int64_t size, int64_t width, int64_t blocks_per_stage) {
  uint64_t seed = 100;
  m.add_input("input", DType::kFloat32, {1, 3, size, size});
  int counter = 0;
  auto conv_bn = [&](const std::string& x, int64_t in_c, int64_t out_c, int64_t k, int64_t stride,
                     bool relu) {
    const std::string p = "l" + std::to_string(counter++);
    const double stddev = std::sqrt(2.0 / double(in_c * k * k));
    m.add_initializer(p + ".w", Tensor::randn({out_c, in_c, k, k}, seed++, stddev));
    m.add_initializer(p + ".scale", Tensor::uniform({out_c}, 0.5, 1.0, seed++));
    m.add_initializer(p + ".bias", Tensor::randn({out_c}, seed++, 0.1));
    m.add_initializer(p + ".mean", Tensor::randn({out_c}, seed++, 0.1));
    m.add_initializer(p + ".var", Tensor::uniform({out_c}, 0.5, 1.5, seed++));
    const int64_t pad = k / 2;
    m.add_node("Conv", {x, p + ".w"}, {p + ".c"},
               {{"kernel_shape", std::vector<int64_t>{k, k}},
                {"strides", std::vector<int64_t>{stride, stride}},
                {"pads", std::vector<int64_t>{pad, pad, pad, pad}}});
    m.add_node("BatchNormalization", {p + ".c", p + ".scale", p + ".bias", p + ".mean", p + ".var"},
               {p + ".bn"});
    if (!relu) return p + ".bn";
    m.add_node("Relu", {p + ".bn"}, {p + ".r"});
    return p + ".r";
  };
  std::string x = conv_bn("input", 3, width, 7, 2, true);
  m.add_node("MaxPool", {x}, {"pool"},
             {{"kernel_shape", std::vector<int64_t>{3, 3}},
              {"strides", std::vector<int64_t>{2, 2}},
              {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  x = "pool";
  int64_t c = width;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t out_c = width << stage;
    for (int64_t b = 0; b < blocks_per_stage; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      std::string shortcut = x;
      if (stride != 1 || c != out_c) shortcut = conv_bn(x, c, out_c, 1, stride, false);
      std::string y = conv_bn(x, c, out_c, 3, stride, true);
      y = conv_bn(y, out_c, out_c, 3, 1, false);
      const std::string sum = "add" + std::to_string(counter),
                        out = "res" + std::to_string(counter);
      m.add_node("Add", {y, shortcut}, {sum});
      m.add_node("Relu", {sum}, {out});
      x = out;
      c = out_c;
    }
  }
  m.add_node("GlobalAveragePool", {x}, {"gap"});
  m.add_node("Flatten", {"gap"}, {"flat"});
  m.add_initializer("fc.w", Tensor::randn({1000, c}, seed++, 0.05));
  m.add_initializer("fc.b", Tensor::randn({1000}, seed++, 0.05));
  m.add_node("Gemm", {"flat", "fc.w", "fc.b"}, {"logits"}, {{"transB", int64_t{1}}});
  m.add_output("logits");
}

TEST_F(OnnxImporterTest, ResnetLikeAgreesAcrossModes) {
  if (const char* path = std::getenv("MF_ONNX_WRITE_RESNET")) {
    ModelWriter full(13, "resnet18_like");
    write_resnet_like(full, 224, 64, 2);
    full.save(path);
  }
  ModelWriter m(13, "resnet_small");
  write_resnet_like(m, 32, 8, 1);
  const Tensor x = Tensor::randn({1, 3, 32, 32}, 61);
  // Each mode against the other (no independent reference for a network this size): GRAPH mode's
  // compiled kernels must agree with PYNATIVE's op-by-op run.
  const std::vector<Tensor> eager = run(m, "PYNATIVE_MODE", {{"input", x}});
  const std::vector<Tensor> graph = run(m, "GRAPH_MODE", {{"input", x}});
  ASSERT_EQ(eager.size(), 1u);
  ASSERT_EQ(graph.size(), 1u);
  ASSERT_EQ(eager[0].shape(), (Shape{1, 1000}));
  ASSERT_EQ(graph[0].shape(), eager[0].shape());
  const std::vector<double> e = eager[0].to_doubles(), g = graph[0].to_doubles();
  double spread = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    ASSERT_TRUE(std::isfinite(e[i])) << "element " << i;
    ASSERT_NEAR(g[i], e[i], 1e-4 * (1 + std::abs(e[i]))) << "element " << i;
    spread = std::max(spread, std::abs(e[i] - e[0]));
  }
  EXPECT_GT(spread, 0.0) << "the logits are all equal: the network computed nothing";
}

// Wider, so that its last stages' convolutions (64 -> 128 channels over 2x2 and 1x1 planes) run the
// packed-weights kernel (runtime/kernels/packed_conv.cc) and its first ones oneDNN's: with
// deterministic=ON every mode and jit level gives the same bytes.
TEST_F(OnnxImporterTest, ResnetLikeWithPackedConvolutionsGivesTheSameBitsInEveryMode) {
  ModelWriter m(13, "resnet_wide");
  write_resnet_like(m, 32, 16, 1);
  const Tensor x = Tensor::randn({1, 3, 32, 32}, 62);
  const Json deterministic = {{"deterministic", "ON"}};
  const std::vector<Tensor> eager = run(m, "PYNATIVE_MODE", {{"input", x}}, deterministic);
  ASSERT_EQ(eager.size(), 1u);
  for (const char* level : {"O0", "O1", "O2"}) {
    SCOPED_TRACE(level);
    Json settings = deterministic;
    settings["jit_config"] = {{"jit_level", level}};
    const std::vector<Tensor> graph = run(m, "GRAPH_MODE", {{"input", x}}, settings);
    ASSERT_EQ(graph.size(), 1u);
    ASSERT_EQ(graph[0].shape(), eager[0].shape());
    EXPECT_EQ(std::memcmp(graph[0].raw_data(), eager[0].raw_data(), eager[0].nbytes()), 0);
  }
}

// The ops docs/onnx.md lists whose ONNX backend cases never run (their cases are opset < 7 or use
// an output the importer does not support): each runs here against a reference computed from the
// definition in double precision, independent of mf::ops.

// `x` mapped element by element through `f`, as a float32 tensor of x's shape.
Tensor map_reference(const Tensor& x, double (*f)(double)) {
  std::vector<float> out;
  for (double v : x.to_doubles()) out.push_back(float(f(v)));
  return Tensor::from_vector(out, x.shape());
}

TEST_F(OnnxImporterTest, EluHardSigmoidAndSoftplusFollowTheirDefinitions) {
  // Values on both sides of every kink, including exactly 0 and the HardSigmoid clamps.
  const Tensor x = Tensor::from_vector(
      std::vector<float>{-6.f, -3.f, -2.5f, -1.f, -0.25f, 0.f, 0.25f, 1.f, 2.5f, 3.f, 6.f, 30.f},
      {3, 4});
  struct Case {
    const char* op;
    std::vector<NodeAttr> attrs;
    double (*reference)(double);
  };
  const std::vector<Case> cases = {
      {"Elu", {}, [](double v) { return v < 0 ? std::exp(v) - 1 : v; }},
      {"Elu", {{"alpha", 0.5}}, [](double v) { return v < 0 ? 0.5 * (std::exp(v) - 1) : v; }},
      {"HardSigmoid", {}, [](double v) { return std::min(1.0, std::max(0.0, 0.2 * v + 0.5)); }},
      {"HardSigmoid",
       {{"alpha", 0.25}, {"beta", 0.6}},
       [](double v) { return std::min(1.0, std::max(0.0, 0.25 * v + 0.6)); }},
      {"Softplus", {}, [](double v) { return std::log1p(std::exp(v)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.op) + " with " + std::to_string(c.attrs.size()) + " attributes");
    ModelWriter m;
    m.add_input("x", DType::kFloat32, {3, 4});
    m.add_node(c.op, {"x"}, {"y"}, c.attrs);
    m.add_output("y");
    check(m, {{"x", x}}, {map_reference(x, c.reference)}, 1e-6);
  }
}

TEST_F(OnnxImporterTest, ConstantOfShapeFillsTheGivenShapeWithItsValue) {
  // Default value: float 0.
  {
    ModelWriter m;
    m.add_initializer("shape", i64s({2, 3}));
    m.add_node("ConstantOfShape", {"shape"}, {"y"});
    m.add_output("y");
    check(m, {}, {Tensor::from_vector(std::vector<float>(6, 0.f), {2, 3})});
  }
  // An int64 value, from a one-element tensor attribute; and an empty dimension.
  {
    ModelWriter m;
    m.add_initializer("shape", i64s({3, 1, 2}));
    m.add_node("ConstantOfShape", {"shape"}, {"y"},
               {{"value", Tensor::from_vector(std::vector<int64_t>{7}, {1})}});
    m.add_output("y");
    check(m, {}, {Tensor::from_vector(std::vector<int64_t>(6, 7), {3, 1, 2})});
  }
  {
    ModelWriter m;
    m.add_initializer("shape", i64s({4, 0}));
    m.add_node("ConstantOfShape", {"shape"}, {"y"},
               {{"value", Tensor::from_vector(std::vector<float>{2.5f}, {1})}});
    m.add_output("y");
    check(m, {}, {Tensor::from_vector(std::vector<float>{}, {4, 0})});
  }
}

TEST_F(OnnxImporterTest, GlobalMaxPoolTakesTheMaximumOfEachChannel) {
  const Tensor x = Tensor::randn({2, 3, 5, 4}, 71);
  const std::vector<double> v = x.to_doubles();
  std::vector<float> want;
  for (int nc = 0; nc < 2 * 3; ++nc) {
    double best = v[size_t(nc) * 20];
    for (int i = 1; i < 20; ++i) best = std::max(best, v[size_t(nc) * 20 + i]);
    want.push_back(float(best));
  }
  ModelWriter m;
  m.add_input("x", DType::kFloat32, {2, 3, 5, 4});
  m.add_node("GlobalMaxPool", {"x"}, {"y"});
  m.add_output("y");
  check(m, {{"x", x}}, {Tensor::from_vector(want, {2, 3, 1, 1})}, 0.0);
}

// Layer normalization over the axes from `axis` on, in double precision.
Tensor layer_norm_reference(const Tensor& x, int64_t axis, const std::vector<double>& gamma,
                            const std::vector<double>& beta, double epsilon) {
  const std::vector<double> v = x.to_doubles();
  size_t inner = 1;
  for (size_t d = size_t(axis); d < x.shape().size(); ++d) inner *= size_t(x.shape()[d]);
  std::vector<float> out(v.size());
  for (size_t row = 0; row < v.size() / inner; ++row) {
    double mean = 0, var = 0;
    for (size_t i = 0; i < inner; ++i) mean += v[row * inner + i];
    mean /= double(inner);
    for (size_t i = 0; i < inner; ++i)
      var += (v[row * inner + i] - mean) * (v[row * inner + i] - mean);
    var /= double(inner);
    for (size_t i = 0; i < inner; ++i) {
      const double norm = (v[row * inner + i] - mean) / std::sqrt(var + epsilon);
      out[row * inner + i] = float(norm * gamma[i] + (beta.empty() ? 0.0 : beta[i]));
    }
  }
  return Tensor::from_vector(out, x.shape());
}

TEST_F(OnnxImporterTest, NativeLayerNormalizationNormalizesFromItsAxis) {
  const Tensor x = Tensor::randn({2, 3, 4}, 72, 2.0);
  for (const int64_t axis : {int64_t{-1}, int64_t{1}}) {
    const Shape norm_shape = axis == -1 ? Shape{4} : Shape{3, 4};
    const Tensor gamma = Tensor::uniform(norm_shape, 0.5, 1.5, 73);
    const Tensor beta = Tensor::randn(norm_shape, 74, 0.5);
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + (with_bias ? " with bias" : " without bias"));
      ModelWriter m;
      m.add_input("x", DType::kFloat32, {2, 3, 4});
      m.add_initializer("gamma", gamma);
      std::vector<std::string> inputs = {"x", "gamma"};
      if (with_bias) {
        m.add_initializer("beta", beta);
        inputs.push_back("beta");
      }
      m.add_node("LayerNormalization", inputs, {"y"}, {{"axis", axis}, {"epsilon", 1e-3}});
      m.add_output("y");
      const Tensor want =
          layer_norm_reference(x, axis == -1 ? 2 : 1, gamma.to_doubles(),
                               with_bias ? beta.to_doubles() : std::vector<double>{}, 1e-3);
      check(m, {{"x", x}}, {want}, 1e-5);
      // Imported as the native op, not decomposed.
      const onnx::ImportedModel model =
          onnx::import_onnx_model_from_bytes(m.serialize(), "ln.onnx");
      int layer_norms = 0;
      for (const auto& node : model.graph->nodes()) layer_norms += node.op() == "layer_norm";
      EXPECT_EQ(layer_norms, 1);
    }
  }
}

}  // namespace
}  // namespace mf
