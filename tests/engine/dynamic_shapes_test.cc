// Dynamic dimensions: an ONNX model whose inputs declare dim_params (or unnamed dimensions) runs
// every size it allows, in both modes, equal to the static import of each size; each concrete
// signature is prepared once and kept (a bounded number); a call that contradicts the declaration
// is an error naming the input and the axis.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/file_reader.h"
#include "context/context.h"
#include "context/fingerprint.h"
#include "context/policy.h"
#include "engine/compile_cache/compile_cache.h"
#include "engine/io/model_file.h"
#include "engine/io/onnx/importer.h"
#include "engine/io/onnx/writer.h"
#include "engine/models/registry.h"
#include "engine/ops.h"
#include "ir/parser.h"
#include "tests/engine/engine_fixture.h"

namespace mf {
namespace {

namespace fs = std::filesystem;
using onnx::ModelWriter;

Tensor i64s(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>(v, {int64_t(v.size())});
}

// x (batch, seq, 16) and mask (batch, seq): relu(x @ w + b) * mask[..., None], then viewed as
// (batch, seq * 8) through the Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain PyTorch
// exports for `y.view(y.size(0), -1)`. Empty dim_params give a static model of `batch` x `seq`.
std::unique_ptr<ModelWriter> write_model(const Shape& x_shape,
                                         const std::vector<std::string>& dims) {
  auto writer = std::make_unique<ModelWriter>(17);
  ModelWriter& m = *writer;
  m.add_input("x", DType::kFloat32, x_shape, {dims[0], dims[1], ""});
  m.add_input("mask", DType::kFloat32, {x_shape[0], x_shape[1]}, {dims[0], dims[1]});
  m.add_initializer("w", Tensor::randn({16, 8}, 5));
  m.add_initializer("b", Tensor::randn({8}, 6));
  m.add_node("MatMul", {"x", "w"}, {"xw"});
  m.add_node("Add", {"xw", "b"}, {"h"});
  m.add_node("Relu", {"h"}, {"r"});
  m.add_node("Constant", {}, {"last"}, {{"value", i64s({-1})}});
  m.add_node("Unsqueeze", {"mask", "last"}, {"m3"});
  m.add_node("Mul", {"r", "m3"}, {"y"});
  m.add_node("Shape", {"y"}, {"s"});
  m.add_node("Constant", {}, {"zero"}, {{"value", Tensor::from_vector<int64_t>({0}, {})}});
  m.add_node("Gather", {"s", "zero"}, {"n"}, {{"axis", int64_t{0}}});
  m.add_node("Constant", {}, {"axes"}, {{"value", i64s({0})}});
  m.add_node("Unsqueeze", {"n", "axes"}, {"n1"});
  m.add_node("Concat", {"n1", "last"}, {"shape"}, {{"axis", int64_t{0}}});
  m.add_node("Reshape", {"y", "shape"}, {"out"});
  m.add_output("out");
  return writer;
}

class DynamicShapesTest : public testing::EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    dir_ = testing::unique_temp_path("mf_dynamic");
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    EngineTest::TearDown();
  }
  fs::path save(const ModelWriter& m, const std::string& name) {
    const fs::path path = dir_ / name;
    m.save(path);
    return path;
  }
  fs::path save(const std::unique_ptr<ModelWriter>& m, const std::string& name) {
    return save(*m, name);
  }
  static std::vector<double> run(engine::ModelFile& file, const Tensor& x, const Tensor& mask) {
    const auto outputs = file.run({{"x", x}, {"mask", mask}}, 0);
    EXPECT_EQ(outputs.size(), 1u);
    return outputs.at(0).second.to_doubles();
  }
  fs::path dir_;
};

TEST_F(DynamicShapesTest, OnnxDimParamsRunEverySizeEqualToTheStaticImport) {
  const fs::path dynamic = save(write_model({1, 1, 16}, {"batch", "seq"}), "dynamic.onnx");
  struct Setting {
    const char* mode;
    const char* jit_level;
  };
  for (const Setting setting : {Setting{"PYNATIVE_MODE", "O0"}, Setting{"GRAPH_MODE", "O0"},
                                Setting{"GRAPH_MODE", "O1"}, Setting{"GRAPH_MODE", "O2"}}) {
    SCOPED_TRACE(std::string(setting.mode) + " " + setting.jit_level);
    const bool graph = std::string(setting.mode) == "GRAPH_MODE";
    context::set({{"mode", setting.mode}, {"jit_config", {{"jit_level", setting.jit_level}}}});
    engine::ModelFile file = engine::ModelFile::load(dynamic);
    ASSERT_TRUE(file.dynamic());
    EXPECT_EQ(ir::signature_to_string(file.signature()),
              "x: Float32 (batch, seq, 16), mask: Float32 (batch, seq)");
    const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 3}, {7, 5}, {64, 2}};
    int compiles = 0;
    for (const auto& [batch, seq] : sizes) {
      SCOPED_TRACE("batch " + std::to_string(batch) + " seq " + std::to_string(seq));
      const Tensor x = Tensor::randn({batch, seq, 16}, uint64_t(batch * 100 + seq));
      const Tensor mask = Tensor::randn({batch, seq}, uint64_t(batch * 7 + seq));
      const std::vector<double> got = run(file, x, mask);
      if (graph) {
        const engine::GraphRunReport& report = file.runner().graph_report();
        compiles += report.compiled ? 1 : 0;
        EXPECT_TRUE(report.specialized);
        EXPECT_EQ(report.dynamic_note, "one compile serves every size");
      }
      engine::ModelFile fixed =
          engine::ModelFile::load(save(write_model({batch, seq, 16}, {"", ""}), "static.onnx"));
      EXPECT_FALSE(fixed.dynamic());
      const std::vector<double> want = run(fixed, x, mask);
      ASSERT_EQ(got.size(), size_t(batch * seq * 8));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "element " << i;
      }
      EXPECT_EQ(file.runner().graph().parameter(0)->type().shape, (Shape{batch, seq, 16}));
    }
    if (graph) {
      EXPECT_EQ(compiles, 1);
      // The reshape's target carries the batch size: written as the symbol, bound per call.
      EXPECT_NE(file.symbolic_description().find("shape[0] = batch"), std::string::npos)
          << file.symbolic_description();
    }
    // Three signatures beyond the one bound at load (every symbol 1); a size seen runs what it
    // prepared.
    EXPECT_EQ(file.prepared_shapes(), 4u);
    run(file, Tensor::randn({7, 5, 16}, 1), Tensor::randn({7, 5}, 2));
    EXPECT_EQ(file.prepared_shapes(), 4u);
    if (graph) {
      EXPECT_FALSE(file.runner().graph_report().compiled);
      EXPECT_FALSE(file.runner().graph_report().specialized);
    }
    context::reset();
  }
}

TEST_F(DynamicShapesTest, PreparedSignaturesAreBoundedMostRecentKept) {
  engine::ModelFile file =
      engine::ModelFile::load(save(write_model({1, 1, 16}, {"batch", "seq"}), "dynamic.onnx"));
  for (int64_t batch = 1; batch <= int64_t(engine::ModelFile::kPreparedShapes) + 3; ++batch) {
    run(file, Tensor::randn({batch, 2, 16}, 1), Tensor::randn({batch, 2}, 2));
  }
  EXPECT_EQ(file.prepared_shapes(), engine::ModelFile::kPreparedShapes);
  // An evicted size is prepared again and still right.
  const Tensor x = Tensor::randn({1, 2, 16}, 3), mask = Tensor::randn({1, 2}, 4);
  engine::ModelFile fixed =
      engine::ModelFile::load(save(write_model({1, 2, 16}, {"", ""}), "static.onnx"));
  EXPECT_EQ(run(file, x, mask), run(fixed, x, mask));
}

TEST_F(DynamicShapesTest, UnnamedDimensionsBindIndependently) {
  ModelWriter m(17);
  m.add_input("a", DType::kFloat32, {1, 4}, {"?", ""});
  m.add_node("Relu", {"a"}, {"r"});
  m.add_output("r");
  // "?": written with neither dim_value nor dim_param.
  engine::ModelFile file = engine::ModelFile::load(save(m, "unnamed.onnx"));
  ASSERT_TRUE(file.dynamic());
  EXPECT_EQ(ir::signature_to_string(file.signature()), "a: Float32 (?, 4)");
  for (int64_t n : {3, 9}) {
    const auto out = file.run({{"a", Tensor::randn({n, 4}, 1)}}, 0);
    EXPECT_EQ(out[0].second.shape(), (Shape{n, 4}));
  }
}

template <typename F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(DynamicShapesTest, ACallThatContradictsTheDeclarationNamesTheInputAndTheAxis) {
  engine::ModelFile file =
      engine::ModelFile::load(save(write_model({1, 1, 16}, {"batch", "seq"}), "dynamic.onnx"));
  expect_invalid(
      [&] {
        run(file, Tensor::randn({2, 3}, 1), Tensor::randn({2, 3}, 1));
      },
      "input 'x' has rank 2 (shape (2, 3)) but is declared (batch, seq, 16)");
  expect_invalid(
      [&] {
        run(file, Tensor::randn({2, 3, 15}, 1), Tensor::randn({2, 3}, 1));
      },
      "input 'x' dimension 2 is 15 but is declared 16 in (batch, seq, 16)");
  expect_invalid(
      [&] {
        run(file, Tensor::randn({2, 3, 16}, 1), Tensor::randn({5, 3}, 1));
      },
      "input 'mask' dimension 0 ('batch' in (batch, seq)) is 5 but an earlier input "
      "bound 'batch' to 2");
  expect_invalid(
      [&] {
        file.run({{"x", Tensor::randn({2, 3, 16}, 1)},
                  {"mask", Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3})}},
                 0);
      },
      "input 'mask' is Int64 but is declared Float32 (batch, seq): give a Float32 tensor");
  // Nothing half-made: the model still runs every size after the errors.
  EXPECT_EQ(run(file, Tensor::randn({2, 3, 16}, 1), Tensor::randn({2, 3}, 1)).size(), 48u);
}

TEST_F(DynamicShapesTest, ImportingADynamicModelWithoutShapesSaysHowToBindThem) {
  const auto writer = write_model({1, 1, 16}, {"batch", "seq"});
  const ModelWriter& m = *writer;
  try {
    onnx::import_onnx_model_from_bytes(m.serialize(), "dynamic.onnx");
    ADD_FAILURE() << "expected Unsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("graph input 'x' has dynamic dimensions (batch, seq, 16)"),
              std::string::npos)
        << e.what();
  }
  onnx::ImportOptions options;
  options.input_shapes = {{"x", {4, 3, 16}}, {"mask", {4, 3}}};
  const auto model = onnx::import_onnx_model_from_bytes(m.serialize(), "dynamic.onnx", options);
  EXPECT_EQ(model.graph->parameter(0)->type().shape, (Shape{4, 3, 16}));
  EXPECT_EQ(ir::symbolic_shape_to_string(model.signature[0].shape), "(batch, seq, 16)");
}

// Max absolute difference relative to the largest value of `want`.
double relative_difference(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  const std::vector<double> g = got.to_doubles(), w = want.to_doubles();
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
    diff = std::max(diff, std::abs(g[i] - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return diff / scale;
}

// A cell with set_inputs: one compile in GRAPH mode at every jit level serves sizes 1, 7 and 64
// of the sample networks, equal to PYNATIVE and to a compile of each size alone.
TEST_F(DynamicShapesTest, CellSetInputsCompilesOnceForEverySize) {
  struct Case {
    const char* net;
    ir::SymbolicShape declared;
    std::vector<Shape> sizes;
  };
  const std::vector<Case> cases = {
      {"mlp", {{-1, "batch"}, {784, ""}}, {{1, 784}, {7, 784}, {64, 784}}},
      {"transformer",
       {{-1, "batch"}, {-1, "seq"}, {256, ""}},
       {{1, 16, 256}, {7, 5, 256}, {2, 64, 256}}},
      {"cnn", {{-1, ""}, {3, ""}, {32, ""}, {32, ""}}, {{1, 3, 32, 32}, {7, 3, 32, 32}}},
  };
  for (const Case& c : cases) {
    for (const char* level : {"O0", "O1", "O2"}) {
      SCOPED_TRACE(std::string(c.net) + " " + level);
      const models::NetSpec& spec = models::find_net(c.net);
      std::unique_ptr<nn::Cell> net = spec.make(3);
      net->set_inputs(c.declared);
      int compiles = 0;
      for (const Shape& shape : c.sizes) {
        SCOPED_TRACE(ir::shape_to_string(shape));
        const Tensor x = Tensor::randn(shape, 11);
        context::set({{"mode", "PYNATIVE_MODE"}});
        const Tensor eager = (*net)(x);
        context::set({{"mode", "GRAPH_MODE"}, {"jit_config", {{"jit_level", level}}}});
        const Tensor compiled = (*net)(x);
        const engine::GraphRunReport& report = net->graph_report();
        compiles += report.compiled ? 1 : 0;
        EXPECT_TRUE(report.specialized) << report.dynamic_note;
        EXPECT_EQ(report.dynamic_note, "one compile serves every size");
        EXPECT_EQ(report.prepared_shapes, size_t(&shape - c.sizes.data()) + 1);
        std::unique_ptr<nn::Cell> alone = spec.make(3);
        const Tensor fixed = (*alone)(x);
        EXPECT_LT(relative_difference(compiled, eager), 1e-5);
        EXPECT_LT(relative_difference(compiled, fixed), 1e-5);
      }
      EXPECT_EQ(compiles, 1);
      context::reset();
    }
  }
}

// A jit cell in PYNATIVE mode compiles once for every size too; a declaration with so many dynamic
// dimensions that the probe would be huge compiles per size, and says why.
TEST_F(DynamicShapesTest, JitCellsCompileOnceAndHugeProbesCompilePerSize) {
  std::unique_ptr<nn::Cell> net = models::find_net("mlp").make(3);
  net->set_inputs({{-1, "batch"}, {784, ""}});
  net->set_jit(true);
  int compiles = 0;
  for (int64_t batch : {1, 7, 64}) {
    const Tensor y = (*net)(Tensor::randn({batch, 784}, 2));
    EXPECT_EQ(y.shape(), (Shape{batch, 10}));
    compiles += net->graph_report().compiled ? 1 : 0;
    EXPECT_TRUE(net->graph_report().jit_region);
  }
  EXPECT_EQ(compiles, 1);

  std::unique_ptr<nn::Cell> wide = models::find_net("elementwise").make(3);
  wide->set_inputs({{-1, ""}, {-1, ""}, {-1, ""}, {-1, ""}, {-1, ""}});
  context::set({{"mode", "GRAPH_MODE"}});
  const Tensor x = Tensor::randn({1, 2, 3, 2, 1}, 2);
  EXPECT_EQ((*wide)(x).shape(), x.shape());
  EXPECT_NE(wide->graph_report().dynamic_note.find("would hold more than 2^26 elements"),
            std::string::npos)
      << wide->graph_report().dynamic_note;
}

// With the compile cache, the symbolic compile is stored under the trace at the probe's sizes:
// another process (here a new cell and a new model object) at another first size loads it and
// runs no pass.
TEST_F(DynamicShapesTest, TheCompileCacheKeepsTheSymbolicCompileForEverySize) {
  context::set({{"mode", "GRAPH_MODE"},
                {"enable_compile_cache", true},
                {"compile_cache_path", (dir_ / "cache").string()}});
  const auto mlp = [] {
    std::unique_ptr<nn::Cell> net = models::find_net("mlp").make(3);
    net->set_inputs({{-1, "batch"}, {784, ""}});
    return net;
  };
  std::unique_ptr<nn::Cell> first = mlp();
  (*first)(Tensor::randn({2, 784}, 1));
  EXPECT_TRUE(first->graph_report().compiled);
  EXPECT_FALSE(first->graph_report().cache_hit);
  std::unique_ptr<nn::Cell> second = mlp();
  const Tensor x = Tensor::randn({5, 784}, 1);
  const Tensor y = (*second)(x);
  EXPECT_TRUE(second->graph_report().cache_hit) << second->graph_report().cache_note;
  EXPECT_TRUE(second->graph_report().specialized);
  const Tensor y7 = (*second)(Tensor::randn({7, 784}, 1));
  EXPECT_EQ(y7.shape(), (Shape{7, 10}));
  context::set({{"mode", "PYNATIVE_MODE"}});
  EXPECT_LT(relative_difference(y, (*second)(x)), 1e-6);

  context::set({{"mode", "GRAPH_MODE"}});
  const fs::path model = save(write_model({1, 1, 16}, {"batch", "seq"}), "dynamic.onnx");
  engine::ModelFile a = engine::ModelFile::load(model);
  run(a, Tensor::randn({2, 3, 16}, 1), Tensor::randn({2, 3}, 2));
  EXPECT_FALSE(a.runner().graph_report().cache_hit);
  engine::ModelFile b = engine::ModelFile::load(model);
  const Tensor bx = Tensor::randn({6, 4, 16}, 3), bm = Tensor::randn({6, 4}, 4);
  const std::vector<double> got = run(b, bx, bm);
  EXPECT_TRUE(b.runner().graph_report().cache_hit) << b.runner().graph_report().cache_note;
  EXPECT_NE(b.symbolic_description().find("dynamic inputs: x: Float32 (batch, seq, 16)"),
            std::string::npos)
      << b.symbolic_description();
  context::set({{"enable_compile_cache", false}});
  engine::ModelFile fresh = engine::ModelFile::load(model);
  EXPECT_EQ(got, run(fresh, bx, bm));
}

// An entry whose symbolic text is not its graph (forged with a valid checksum) is discarded: the
// network compiles, runs right, and stores a good entry again.
TEST_F(DynamicShapesTest, AnEntryWhoseSymbolicTextIsNotItsGraphIsDiscarded) {
  const fs::path cache_dir = dir_ / "cache";
  context::set({{"mode", "GRAPH_MODE"},
                {"enable_compile_cache", true},
                {"compile_cache_path", cache_dir.string()}});
  const auto writer = write_model({1, 1, 16}, {"batch", "seq"});
  const fs::path model = save(writer, "dynamic.onnx");
  {
    engine::ModelFile a = engine::ModelFile::load(model);
    run(a, Tensor::randn({2, 3, 16}, 1), Tensor::randn({2, 3}, 2));
  }
  // The key as the driver makes it: the model imported at the probe's sizes.
  const auto signature =
      onnx::onnx_input_signature(*onnx::parse_onnx_model(writer->serialize(), "dynamic.onnx"));
  const ir::ProbePlan plan = ir::plan_probe(signature, {{2, 3, 16}, {2, 3}});
  onnx::ImportOptions options;
  options.read_weights = false;
  options.input_shapes = {{"x", plan.probe_shapes[0]}, {"mask", plan.probe_shapes[1]}};
  onnx::ImportedModel probe =
      onnx::import_onnx_model_from_bytes(writer->serialize(), "dynamic.onnx", options);
  probe.graph->set_output_name(0, "out");
  const context::Snapshot snapshot = context::snapshot();
  const context::Policy policy = context::derive_policy(snapshot);
  const engine::CacheKey key = engine::make_cache_key(
      *probe.graph, probe.graph->parameter(0)->type(), context::fingerprint(snapshot, policy),
      ir::signature_to_string(plan.inputs));
  const engine::CompileCache cache(policy.compile_cache_dir.value);
  std::optional<engine::LoadedEntry> loaded = cache.load(key, *probe.graph);
  ASSERT_TRUE(loaded.has_value());
  std::string& text = loaded->compiled.symbolic_text;
  const size_t relu = text.find("= relu(");
  ASSERT_NE(relu, std::string::npos) << text;
  text.replace(relu, 7, "= tanh(");
  ASSERT_TRUE(cache.store(key, loaded->compiled, 1.0));

  engine::ModelFile b = engine::ModelFile::load(model);
  const Tensor x = Tensor::randn({4, 2, 16}, 5), mask = Tensor::randn({4, 2}, 6);
  const std::vector<double> got = run(b, x, mask);
  EXPECT_FALSE(b.runner().graph_report().cache_hit);
  EXPECT_NE(b.runner().graph_report().cache_note.find("stored"), std::string::npos)
      << b.runner().graph_report().cache_note;
  context::set({{"enable_compile_cache", false}});
  engine::ModelFile fresh = engine::ModelFile::load(model);
  EXPECT_EQ(got, run(fresh, x, mask));
}

TEST_F(DynamicShapesTest, CellCallsThatContradictTheDeclarationFailInBothModes) {
  std::unique_ptr<nn::Cell> net = models::find_net("mlp").make(3);
  net->set_inputs({{-1, "batch"}, {784, ""}});
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    SCOPED_TRACE(mode);
    context::set({{"mode", mode}});
    expect_invalid(
        [&] {
          (*net)(Tensor::randn({7, 783}, 1));
        },
        "input 'x' dimension 1 is 783 but is declared 784 in (batch, 784)");
    expect_invalid([&] { (*net)(Tensor::randn({784}, 1)); },
                   "input 'x' has rank 1 (shape (784)) but is declared (batch, 784)");
    expect_invalid(
        [&] {
          (*net)(Tensor::zeros({2, 784}, DType::kFloat64));
        },
        "input 'x' is Float64 but is declared Float32 (batch, 784)");
    EXPECT_EQ((*net)(Tensor::randn({3, 784}, 1)).shape(), (Shape{3, 10}));
  }
  expect_invalid([&] { net->set_inputs({{-2, ""}}); }, "is neither a size nor -1");
  expect_invalid([&] { net->set_inputs({{-1, "bad name"}}); }, "is not a name");
}

// A network whose trace depends on the size beyond what a symbol can say (here a constant made
// from the batch) compiles each size, and says why; the answers stay right.
TEST_F(DynamicShapesTest, OnnxModelThatDoesNotGeneralizeCompilesPerSizeAndSaysWhy) {
  ModelWriter m(17);
  m.add_input("x", DType::kFloat32, {1, 4}, {"n", ""});
  m.add_node("Shape", {"x"}, {"s"});
  m.add_node("ConstantOfShape", {"s"}, {"ones"},
             {{"value", Tensor::from_vector<float>({2.5f}, {1})}});
  m.add_node("Mul", {"x", "ones"}, {"y"});
  m.add_output("y");
  context::set({{"mode", "GRAPH_MODE"}});
  engine::ModelFile file = engine::ModelFile::load(save(m, "per_size.onnx"));
  for (int64_t n : {2, 5}) {
    const Tensor x = Tensor::randn({n, 4}, uint64_t(n));
    const auto out = file.run({{"x", x}}, 0);
    EXPECT_LT(relative_difference(out[0].second, ops::mul(x, ops::scalar(2.5))), 1e-7);
    EXPECT_TRUE(file.runner().graph_report().compiled);
    EXPECT_FALSE(file.runner().graph_report().specialized);
  }
  EXPECT_NE(file.dynamic_note().find("compiled per size: a constant"), std::string::npos)
      << file.dynamic_note();
}

// A size the network does not allow is the op's own error, naming the node; the model still runs
// the sizes it allows.
TEST_F(DynamicShapesTest, ASizeTheNetworkDoesNotAllowIsTheOpsError) {
  ModelWriter m(17);
  m.add_input("x", DType::kFloat32, {6}, {"n"});
  m.add_node("Constant", {}, {"shape"}, {{"value", i64s({-1, 3})}});
  m.add_node("Reshape", {"x", "shape"}, {"y"});
  m.add_node("Relu", {"y"}, {"z"});
  m.add_output("z");
  context::set({{"mode", "GRAPH_MODE"}});
  engine::ModelFile file = engine::ModelFile::load(save(m, "reshape.onnx"));
  EXPECT_EQ(file.run({{"x", Tensor::randn({6}, 1)}}, 0)[0].second.shape(), (Shape{2, 3}));
  try {
    file.run({{"x", Tensor::randn({7}, 1)}}, 0);
    ADD_FAILURE() << "a size of 7 cannot be viewed as (-1, 3)";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reshape"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file.run({{"x", Tensor::randn({9}, 1)}}, 0)[0].second.shape(), (Shape{3, 3}));
}

// The symbolic dump parses back: at any binding of its inputs, and as a model that runs every size
// with one compile, equal to the ONNX model it was dumped from.
TEST_F(DynamicShapesTest, TheSymbolicDumpParsesBackAndRunsEverySize) {
  const fs::path dumps = dir_ / "ir";
  context::set({{"mode", "GRAPH_MODE"},
                {"jit_config", {{"jit_level", "O1"}}},
                {"save_graphs", 1},
                {"save_graphs_path", dumps.string()}});
  engine::ModelFile onnx_file =
      engine::ModelFile::load(save(write_model({1, 1, 16}, {"batch", "seq"}), "dynamic.onnx"));
  run(onnx_file, Tensor::randn({2, 3, 16}, 1), Tensor::randn({2, 3}, 2));
  fs::path symbolic;
  for (const auto& entry : fs::directory_iterator(dumps)) {
    if (entry.path().filename().string().ends_with("_symbolic.ir")) symbolic = entry.path();
  }
  ASSERT_FALSE(symbolic.empty());
  context::set({{"save_graphs", 0}});

  std::vector<ir::InputSignature> signature;
  ir::ParseBinding binding{{{"x", {4, 6, 16}}, {"mask", {4, 6}}}, &signature};
  const std::string text = read_regular_file(symbolic, kMaxTextFileBytes, "IR file");
  const auto graph = ir::parse_graph(text, "symbolic.ir", binding);
  EXPECT_EQ(ir::signature_to_string(signature),
            "x: Float32 (batch, seq, 16), mask: Float32 (batch, seq)");
  EXPECT_EQ(graph->outputs()[0].type().shape, (Shape{4, 48}));

  engine::ModelFile ir_file = engine::ModelFile::load(symbolic);
  ASSERT_TRUE(ir_file.dynamic());
  int compiles = 0;
  for (const auto& [batch, seq] : std::vector<std::pair<int64_t, int64_t>>{{1, 4}, {5, 2}}) {
    const Tensor x = Tensor::randn({batch, seq, 16}, 7), mask = Tensor::randn({batch, seq}, 8);
    // The dump's weights are parameters: feed the ONNX model's.
    std::map<std::string, Tensor> feeds = {{"x", x}, {"mask", mask}};
    for (const auto& [name, tensor] : onnx_file.feeds({})) feeds[name] = tensor;
    const auto got = ir_file.run(feeds, 0);
    compiles += ir_file.runner().graph_report().compiled ? 1 : 0;
    EXPECT_LT(
        relative_difference(got[0].second, onnx_file.run({{"x", x}, {"mask", mask}}, 0)[0].second),
        1e-6);
  }
  EXPECT_EQ(compiles, 1);
}

TEST_F(DynamicShapesTest, SymbolicSizesInTextThatCannotBeBoundAreClearErrors) {
  const auto parse_error = [](const std::string& text, ir::ParseBinding binding = {}) {
    try {
      ir::parse_graph(text, "bad.ir", binding);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = "subgraph @f(%para1_x: <Tensor[Float32], (batch, 4)>) {\n";
  EXPECT_NE(
      parse_error(head + "  %0 = reshape(%para1_x) {shape: [?, 2]} : (<Tensor[Float32], (batch, "
                         "4)>) -> (<Tensor[Float32], (batch, 2)>)\n  Return(%0)\n}\n")
          .find("'?' in an attribute cannot be bound"),
      std::string::npos);
  EXPECT_NE(
      parse_error(head + "  %0 = reshape(%para1_x) {shape: [seq, 2]} : (<Tensor[Float32], (batch, "
                         "4)>) -> (<Tensor[Float32], (seq, 2)>)\n  Return(%0)\n}\n")
          .find("symbol 'seq' in an attribute is not a dimension of an input"),
      std::string::npos);
  const std::string ok = head +
                         "  %0 = reshape(%para1_x) {shape: [2 * batch, 2]} : (<Tensor[Float32], "
                         "(batch, 4)>) -> (<Tensor[Float32], (2 * batch, 2)>)\n  Return(%0)\n}\n";
  EXPECT_NE(parse_error(ok, {{{"x", {3, 5}}}, nullptr})
                .find("dimension 1 is 5 but is declared 4 in (batch, 4)"),
            std::string::npos);
  const auto graph = ir::parse_graph(ok, "ok.ir", {{{"x", {3, 4}}}, nullptr});
  EXPECT_EQ(graph->outputs()[0].type().shape, (Shape{6, 2}));
}

}  // namespace
}  // namespace mf
