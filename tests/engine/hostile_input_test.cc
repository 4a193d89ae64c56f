// Issue #17, hostile input: shape products that would wrap around 64 bits, unbounded recursion,
// special files (FIFOs, /dev/zero, /dev/full) as inputs and outputs, damaged .npy headers, narrowed
// integers and giant error messages. Each must be a clear mf::Error (or a correct result), never a
// crash, a hang or a silently wrong answer.

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <functional>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "base/file_reader.h"
#include "context/context.h"
#include "context/json_file.h"
#include "engine/eager/ir_runner.h"
#include "engine/io/npy.h"
#include "engine/io/onnx/importer.h"
#include "engine/io/onnx/writer.h"
#include "engine/io/print_file.h"
#include "engine/ops.h"
#include "engine_fixture.h"
#include "ir/call_graph.h"
#include "ir/graph.h"
#include "ir/op_def.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/shape.h"
#include "ir/verifier.h"
#include "runtime/kernels/print_sink.h"
#include "tests/run_on_stack.h"

namespace mf {
namespace {

namespace fs = std::filesystem;
using onnx::ModelWriter;
using onnx::NodeAttr;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

using HostileInputTest = testing::EngineTestWithDir;

// Runs `f`, expecting an mf::Error of `kind` whose text contains `needle`; returns the text.
template <typename F>
std::string expect_error(F&& f, ErrorKind kind, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 4000u) << "error text too long";
    return e.what();
  }
  ADD_FAILURE() << "expected an error containing '" << needle << "'";
  return {};
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// ---- checked shape arithmetic ----

TEST(CheckedShapeTest, ProductsNeverWrap) {
  EXPECT_EQ(ir::checked_mul(int64_t{1} << 62, 4), std::nullopt);
  EXPECT_EQ(ir::checked_mul(-3, 4), -12);
  EXPECT_EQ(ir::checked_add(kInt64Max, 1), std::nullopt);
  // (16, 2^60 + 1) wraps to 16 in 64 bits.
  const ir::Shape wraps = {16, (int64_t{1} << 60) + 1};
  EXPECT_THROW(ir::num_elements(wraps), Error);
  EXPECT_EQ(ir::try_num_elements(wraps), std::nullopt);
  EXPECT_EQ(ir::num_elements({0, kInt64Max, kInt64Max}), 0);
  EXPECT_EQ(ir::try_num_elements({int64_t{1} << 40}), int64_t{1} << 40);
  EXPECT_EQ(ir::try_num_elements({(int64_t{1} << 40) + 1}), std::nullopt);
  EXPECT_EQ(ir::try_num_elements({2, -1}), std::nullopt);
  expect_error(
      [] {
        ir::checked_num_elements({1, 1, -9223372036854775804, 2}, "t");
      },
      ErrorKind::kInvalidArgument, "negative dimension -9223372036854775804 at axis 2");
  expect_error([] { ir::checked_byte_size({int64_t{1} << 62}, 4, "t"); },
               ErrorKind::kInvalidArgument, "more than 2^40");
}

TEST(CheckedShapeTest, HugeRanksPrintCut) {
  const ir::Shape shape(100000, 1);
  const std::string text = ir::shape_to_string(shape);
  EXPECT_LT(text.size(), 100u);
  EXPECT_NE(text.find("[rank 100000]"), std::string::npos) << text;
  expect_error([&] { ir::checked_num_elements(shape, "t"); }, ErrorKind::kInvalidArgument,
               "has rank 100000; at most 64 axes");
}

// An op whose inference is wrong on purpose: the central check in OpDef::infer_types stops it.
const ir::OpRegistration kBadInfer =
    ir::define_op("test_hostile_bad_infer")
        .arity(1)
        .infer([](std::span<const ir::TensorType> in, const ir::Attrs&) {
          return std::vector<ir::TensorType>{{in[0].dtype, {1, 1, -9223372036854775804, 2}}};
        })
        .kernel([](const ir::KernelContext&) { ADD_FAILURE() << "the kernel must not run"; })
        .doc("test only: infers a negative dimension");

TEST_F(HostileInputTest, InferredShapesAreValidatedCentrally) {
  ir::Graph g("g");
  auto* x = g.add_parameter("x", {ir::DType::kFloat32, {2}});
  const std::string text = expect_error([&] { g.add_node("test_hostile_bad_infer", {x}); },
                                        ErrorKind::kInvalidArgument, "negative dimension");
  EXPECT_NE(text.find("op 'test_hostile_bad_infer' on inputs"), std::string::npos) << text;
  // Op by op (PYNATIVE): an error, no kernel call.
  context::set({{"mode", "PYNATIVE_MODE"}});
  expect_error([] { ops::call("test_hostile_bad_infer", {Tensor::ones({2})}); },
               ErrorKind::kInvalidArgument, "negative dimension");
}

TEST_F(HostileInputTest, ReshapeWhoseProductWrapsIsRejected) {
  // An ONNX Reshape of 16 elements to (16, 2^60 + 1): the product wraps to 16 in 64 bits.
  ModelWriter w;
  w.add_input("x", DType::kFloat32, {16});
  w.add_initializer("shape", Tensor::from_vector<int64_t>({16, (int64_t{1} << 60) + 1}, {2}));
  w.add_node("Reshape", {"x", "shape"}, {"y"});
  w.add_output("y");
  expect_error([&] { onnx::import_onnx_model_from_bytes(w.serialize(), "reshape.onnx"); },
               ErrorKind::kInvalidArgument, "more than 2^40 elements");
  // The op itself, from the IR.
  ir::Graph g("g");
  auto* x = g.add_parameter("x", {ir::DType::kFloat32, {16}});
  expect_error(
      [&] {
        g.add_node("reshape", {x}, {{"shape", std::vector<int64_t>{16, (int64_t{1} << 60) + 1}}});
      },
      ErrorKind::kInvalidArgument, "more than 2^40 elements");
}

TEST_F(HostileInputTest, ExpandToTwoToTheSixtyFourElementsIsRejected) {
  ModelWriter w;
  w.add_input("x", DType::kFloat32, {1, 1});
  w.add_initializer("shape",
                    Tensor::from_vector<int64_t>({int64_t{1} << 32, int64_t{1} << 32}, {2}));
  w.add_node("Expand", {"x", "shape"}, {"y"});
  w.add_output("y");
  expect_error([&] { onnx::import_onnx_model_from_bytes(w.serialize(), "expand.onnx"); },
               ErrorKind::kInvalidArgument, "more than 2^40");
}

TEST_F(HostileInputTest, OnnxConvWithHugeDilationsOrPadsIsRejected) {
  for (const char* attr : {"dilations", "pads"}) {
    ModelWriter w;
    w.add_input("x", DType::kFloat32, {1, 1, 4, 4});
    w.add_initializer("w", Tensor::ones({1, 1, 3, 3}));
    const int64_t huge = int64_t{1} << 62;
    std::vector<int64_t> values = std::string(attr) == "pads" ? std::vector<int64_t>{huge, 0, 0, 0}
                                                              : std::vector<int64_t>{huge, 1};
    w.add_node("Conv", {"x", "w"}, {"y"}, {{attr, values}});
    w.add_output("y");
    expect_error([&] { onnx::import_onnx_model_from_bytes(w.serialize(), "conv.onnx"); },
                 ErrorKind::kInvalidArgument, "2^40");
  }
}

// runtime/ops/conv.cc (owned by the oneDNN work) computes the window span unchecked: a dilation of
// INT64_MAX wraps it to -1 and a 4x4 input convolved with a 3x3 kernel gives 6x6. Enable once
// make_window uses ir::checked_mul / checked_add.
// Sizes the importer turns into work or memory at import are bounded first: a diagonal's identity
// mask, a window made as a constant, an unrolled sequence, a transposed convolution's full output.
TEST_F(HostileInputTest, ImportTimeSizesAreBoundedBeforeUse) {
  ModelWriter einsum(13);
  einsum.add_input("x", ir::DType::kFloat32, {100000, 100000});
  einsum.add_node("Einsum", {"x"}, {"y"}, {{"equation", std::string("ii->i")}});
  einsum.add_output("y");
  expect_error([&] { onnx::import_onnx_model_from_bytes(einsum.serialize(), "e.onnx"); },
               ErrorKind::kUnsupported, "at most 16384 are taken");

  ModelWriter window(17);
  window.add_initializer("n", Tensor::from_vector<int64_t>({int64_t{1} << 36}, {}));
  window.add_node("HannWindow", {"n"}, {"w"});
  window.add_output("w");
  expect_error([&] { onnx::import_onnx_model_from_bytes(window.serialize(), "w.onnx"); },
               ErrorKind::kUnsupported, "at most 2^24 are made");

  ModelWriter rnn(14);
  rnn.add_input("x", ir::DType::kFloat32, {100000, 1, 1});
  rnn.add_initializer("w", Tensor::from_vector<float>({1}, {1, 1, 1}));
  rnn.add_initializer("r", Tensor::from_vector<float>({1}, {1, 1, 1}));
  rnn.add_node("RNN", {"x", "w", "r"}, {"y"}, {{"hidden_size", int64_t{1}}});
  rnn.add_output("y");
  expect_error([&] { onnx::import_onnx_model_from_bytes(rnn.serialize(), "r.onnx"); },
               ErrorKind::kUnsupported, "takes at most 4096");

  ModelWriter deconv(13);
  deconv.add_input("x", ir::DType::kFloat32, {1, 1, 1 << 20, 2});
  deconv.add_initializer("w", Tensor::from_vector<float>({1, 1, 1, 1}, {1, 1, 2, 2}));
  deconv.add_node("ConvTranspose", {"x", "w"}, {"y"},
                  {{"strides", std::vector<int64_t>{int64_t{1} << 40, 1}},
                   {"output_shape", std::vector<int64_t>{4, 4}}});
  deconv.add_output("y");
  expect_error([&] { onnx::import_onnx_model_from_bytes(deconv.serialize(), "d.onnx"); },
               ErrorKind::kInvalidArgument, "exceeds 2^40");
}

TEST_F(HostileInputTest, IrConvWithInt64MaxDilationIsRejected) {
  ir::Graph g("g");
  auto* x = g.add_parameter("x", {ir::DType::kFloat32, {1, 1, 4, 4}});
  auto* w = g.add_parameter("w", {ir::DType::kFloat32, {1, 1, 3, 3}});
  expect_error(
      [&] {
        g.add_node("conv2d", {x, w}, {{"dilation", std::vector<int64_t>{kInt64Max, kInt64Max}}});
      },
      ErrorKind::kInvalidArgument, "dilation");
}

// ---- .npy ----

std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string header = dict;
  const size_t fixed = 6 + 2 + (major == 1 ? 2 : 4);
  header.append((64 - (fixed + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(char(major));
  out.push_back(char(0));
  const uint32_t len = uint32_t(header.size());
  out.push_back(char(len & 0xff));
  out.push_back(char((len >> 8) & 0xff));
  if (major != 1) {
    out.push_back(char((len >> 16) & 0xff));
    out.push_back(char(len >> 24));
  }
  return out + header + data;
}

TEST_F(HostileInputTest, NpyRoundTripsAndAcceptsNumpysOwnHeaders) {
  const fs::path file = dir_ / "a.npy";
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  t.save_npy(file);
  EXPECT_EQ(Tensor::load_npy(file).to_vector<float>(), t.to_vector<float>());
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().filename(), "a.npy") << "a temporary file was left behind";
  }
  // numpy's own spellings: "(3,)", "()", double quotes, version 2.0, no trailing comma.
  write_bytes(file, npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
                              std::string(24, '\0')));
  EXPECT_EQ(Tensor::load_npy(file).shape(), (Shape{3}));
  write_bytes(file, npy_bytes("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": ()}",
                              std::string(4, '\0'), 2));
  EXPECT_EQ(Tensor::load_npy(file).shape(), (Shape{}));
}

TEST_F(HostileInputTest, NpyHeadersAreParsedStrictly) {
  const fs::path file = dir_ / "bad.npy";
  struct Case {
    std::string dict;
    std::string data;
    std::string needle;
  };
  const std::vector<Case> cases = {
      // Hex once read as (0, 784) by a substring search.
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0x40, 784), }", "",
       "expected ',' or ')' in the shape"},
      // 2^62 elements over 0 data bytes.
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }", "",
       "a dimension is larger than 2^40"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", "",
       "more than 2^40 elements"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "",
       "expected a decimal dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", std::string(12, '\0'),
       "a 1-D shape is written (n,)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'shape': (3,)}",
       std::string(12, '\0'), "appears twice"},
      {"{'descr': '<f4', 'shape': (3,), }", std::string(12, '\0'),
       "'fortran_order' entry is missing"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", std::string(12, '\0'),
       "unexpected key 'x'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } junk", std::string(12, '\0'),
       "followed only by spaces"},
      // The data must be exactly what the shape says.
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", std::string(11, '\0'),
       ".npy data is truncated: expected 12 bytes"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", std::string(13, '\0'),
       "has 1 bytes after the 12 bytes of data"},
  };
  for (const Case& c : cases) {
    write_bytes(file, npy_bytes(c.dict, c.data));
    expect_error([&] { Tensor::load_npy(file); }, ErrorKind::kDataLoss, c.needle);
  }
  // A header length pointing past the real header: misaligned data is damage, not data.
  std::string shifted =
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", std::string(12, '\0'));
  shifted[8] = char(uint8_t(shifted[8]) + 4);
  write_bytes(file, shifted);
  expect_error([&] { Tensor::load_npy(file); }, ErrorKind::kDataLoss, "malformed .npy header");
}

// A valid header followed by gigabytes its shape does not account for is refused from the header
// and the file's size: the reader's peak memory must not grow by the file's size (it read the
// whole file before checking, 3 GiB for a 12-byte array).
TEST_F(HostileInputTest, NpyOfTheWrongSizeIsRefusedWithoutReadingIt) {
  const fs::path file = dir_ / "sparse.npy";
  write_bytes(file, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                              std::string(12, '\0')));
  const auto gib3 = std::uintmax_t{3} << 30;
  fs::resize_file(file, gib3);  // sparse: costs no disk
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  expect_error([&] { Tensor::load_npy(file); }, ErrorKind::kDataLoss, "bytes after the 12 bytes");
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 * 1024) << "peak grew by KiB";
  fs::remove(file);
}

TEST_F(HostileInputTest, SavingToAFullDeviceIsAnError) {
  expect_error([] { Tensor::ones({4}).save_npy("/dev/full"); }, ErrorKind::kInvalidArgument,
               "No space left on device");
  expect_error([] { mf::write_file_atomically("/dev/full", "abc", "test file"); },
               ErrorKind::kInvalidArgument, "No space left on device");
  EXPECT_FALSE(fs::exists("/dev/full.tmp"));
}

// ---- special files as inputs ----

TEST_F(HostileInputTest, FifosAndDevicesAreRefusedWithoutBlocking) {
  const fs::path fifo = dir_ / "input.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const fs::path& path : {fifo, fs::path("/dev/zero")}) {
    const std::string kind = path == fifo ? "a FIFO" : "a character device";
    expect_error([&] { Tensor::load_npy(path); }, ErrorKind::kInvalidArgument, kind);
    expect_error([&] { ir::parse_graph_file(path.string()); }, ErrorKind::kInvalidArgument, kind);
    expect_error([&] { context::read_json_document(path, "context file"); },
                 ErrorKind::kInvalidArgument, kind);
    expect_error([&] { onnx::import_onnx_model(path); }, ErrorKind::kInvalidArgument, kind);
    expect_error([&] { engine::read_print_file(path); }, ErrorKind::kInvalidArgument, kind);
  }
  expect_error([&] { context::read_json_document(dir_, "context file"); },
               ErrorKind::kInvalidArgument, "a directory");
  expect_error([&] { mf::read_regular_file(dir_ / "missing", 10, "x"); }, ErrorKind::kNotFound,
               "No such file or directory");
  write_bytes(dir_ / "big", std::string(11, 'x'));
  expect_error([&] { mf::read_regular_file(dir_ / "big", 10, "x"); }, ErrorKind::kInvalidArgument,
               "11 bytes; at most 10 are read");
}

// Protobuf's wire format, written by hand so a test can write what no writer would.
std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(char((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
  return out;
}

std::string field(int number, const std::string& bytes) {
  return varint(uint64_t(number) << 3 | 2) + varint(bytes.size()) + bytes;
}

TEST_F(HostileInputTest, PrintFileDeclaringAHugeShapeIsDamage) {
  const std::string header = field(1, "modeflow-print") + varint(2 << 3) + varint(1);
  const std::string tensor =
      field(1, "Float32") + field(2, varint(uint64_t{1} << 62)) + field(3, "");
  const std::string record = field(2, tensor);
  const fs::path file = dir_ / "print.pb";
  write_bytes(file, varint(header.size()) + header + varint(record.size()) + record);
  expect_error([&] { engine::read_print_file(file); }, ErrorKind::kDataLoss,
               "more than 2^40 elements");
}

// Length fields are checked against what is left of the file: a header or record length of
// 2^32 - 1 (which once passed as a negative int) and an overlong varint are damage, not the end.
TEST_F(HostileInputTest, PrintFileLengthFieldsAreCheckedAgainstTheFile) {
  const std::string header = field(1, "modeflow-print") + varint(2 << 3) + varint(1);
  const fs::path file = dir_ / "lengths.pb";
  write_bytes(file, varint(0xffffffffu) + header);
  expect_error([&] { engine::read_print_file(file); }, ErrorKind::kDataLoss,
               "declares 4294967295 bytes but");
  write_bytes(file, varint(header.size()) + header + varint(0xffffffffu) + "xx");
  expect_error([&] { engine::read_print_file(file); }, ErrorKind::kDataLoss,
               "declares 4294967295 bytes but 2 remain");
  write_bytes(file, varint(header.size()) + header + std::string(11, char(0xff)));
  expect_error([&] { engine::read_print_file(file); }, ErrorKind::kDataLoss,
               "its length field is not a valid varint");
  // A bool element that is neither 0 nor 1 (UBSan: "load of value 2 ... bool").
  const std::string tensor = field(1, "Bool") + field(2, varint(1)) + field(3, std::string(1, 2));
  const std::string record = field(2, tensor);
  write_bytes(file, varint(header.size()) + header + varint(record.size()) + record);
  expect_error([&] { engine::read_print_file(file); }, ErrorKind::kDataLoss,
               "bool byte that is neither 0 nor 1");
}

// An IR file says which graph it runs: two @main blocks, or an entry line naming another graph,
// are errors, not a silent choice of the first.
TEST_F(HostileInputTest, IrEntryMustBeUnambiguous) {
  const std::string block =
      "subgraph @main(%para1_x: <Tensor[Float32], (2)>) {\n"
      "  %0 = neg(%para1_x) : (<Tensor[Float32], (2)>) -> (<Tensor[Float32], (2)>)\n"
      "  Return(%0)\n}\n";
  expect_error([&] { ir::parse_graph(block + "\n" + block, "twice.ir"); },
               ErrorKind::kInvalidArgument,
               "subgraph @main is defined twice (the first @main is the entry)");
  expect_error([&] { ir::parse_graph("# IR entry: @other\n" + block, "entry.ir"); },
               ErrorKind::kInvalidArgument,
               "the entry line names @other but the first subgraph, the one that runs, is @main");
  EXPECT_NO_THROW(ir::parse_graph("# IR entry: @main\n" + block, "entry.ir"));
}

// An ONNX node with an input its op does not define (a Relu with two) is malformed, not imported
// without it.
TEST_F(HostileInputTest, OnnxNodeWithAnInputItsOpDoesNotTakeIsRefused) {
  ModelWriter w(13);
  w.add_input("x", ir::DType::kFloat32, {2});
  w.add_input("y", ir::DType::kFloat32, {2});
  w.add_node("Relu", {"x", "y"}, {"z"}, {}, "two_inputs");
  w.add_output("z");
  expect_error([&] { onnx::import_onnx_model_from_bytes(w.serialize(), "relu2.onnx"); },
               ErrorKind::kInvalidArgument, "has 2 inputs, but this op takes at most 1");
}

// Text from the input is escaped and cut in every message: a control byte or a newline in an ONNX
// name, a context key or a value never reaches the terminal raw.
TEST_F(HostileInputTest, EchoedInputIsEscapedAndCut) {
  ModelWriter w(13);
  w.add_input("x", ir::DType::kFloat32, {2});
  w.add_node("No\x1b[31mSuchOp\nline", {"x"}, {"y"}, {}, "node\r\x07");
  w.add_output("y");
  const std::string onnx_text =
      expect_error([&] { onnx::import_onnx_model_from_bytes(w.serialize(), "esc.onnx"); },
                   ErrorKind::kUnsupported, "No\\x1b[31mSuchOp\\nline");
  EXPECT_EQ(onnx_text.find('\x1b'), std::string::npos) << onnx_text;
  EXPECT_EQ(onnx_text.find('\x07'), std::string::npos) << onnx_text;
  // A graph input an op needs as a constant is named in the error: escaped too.
  ModelWriter shape_input(13);
  shape_input.add_input("x", ir::DType::kFloat32, {2});
  shape_input.add_input(
      "sh\x1b"
      "ape",
      ir::DType::kInt64, {1});
  shape_input.add_node("Reshape",
                       {"x",
                        "sh\x1b"
                        "ape"},
                       {"y"});
  shape_input.add_output("y");
  const std::string input_text =
      expect_error([&] { onnx::import_onnx_model_from_bytes(shape_input.serialize(), "esc.onnx"); },
                   ErrorKind::kUnsupported, "sh\\x1bape");
  EXPECT_EQ(input_text.find('\x1b'), std::string::npos) << input_text;
  const std::string key_text = expect_error(
      [] {
        context::set({{std::string("bad\nkey\x1b") + std::string(100000, 'k'), 1}});
      },
      ErrorKind::kInvalidArgument, "more characters)");
  EXPECT_EQ(key_text.find('\x1b'), std::string::npos);
  EXPECT_LT(key_text.size(), 2000u);
  const std::string value_text = expect_error(
      [] {
        context::set({{"save_graphs_path", std::string("a\0b", 3)}});
      },
      ErrorKind::kInvalidArgument, "without NUL bytes");
  EXPECT_NE(value_text.find("a\\x00b"), std::string::npos) << value_text;
}

// C++ leaves a float that an integer cannot hold undefined (optimized code may give anything); the
// cast op defines it: NaN is 0, beyond the range the nearest bound. Long enough for the vector
// paths, in both precisions.
TEST_F(HostileInputTest, CastOfFloatsBeyondAnIntegerIsDefined) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {std::nanf(""), 1e10f, -1e10f, 3e9f, -3e9f, inf, -inf, 2147483520.f};
  std::vector<int32_t> want = {0,         INT32_MAX, INT32_MIN, INT32_MAX,
                               INT32_MIN, INT32_MAX, INT32_MIN, 2147483520};
  for (int i = 0; i < 5; ++i) {
    x.insert(x.end(), x.begin(), x.begin() + 8);
    want.insert(want.end(), want.begin(), want.begin() + 8);
  }
  const Tensor t = Tensor::from_vector(x, {int64_t(x.size())});
  EXPECT_EQ(ops::call("cast", {t}, {{"dtype", ir::DType::kInt32}})[0].to_vector<int32_t>(), want);
  const Tensor wide = ops::call("cast", {t}, {{"dtype", ir::DType::kFloat64}})[0];
  EXPECT_EQ(ops::call("cast", {wide}, {{"dtype", ir::DType::kInt32}})[0].to_vector<int32_t>(),
            want);
  const std::vector<int64_t> big =
      ops::call("cast", {Tensor::from_vector<double>({1e19, -1e19, std::nan("")}, {3})},
                {{"dtype", ir::DType::kInt64}})[0]
          .to_vector<int64_t>();
  EXPECT_EQ(big, (std::vector<int64_t>{INT64_MAX, INT64_MIN, 0}));
}

// fill refuses a value its dtype cannot hold (it once stored INT_MIN silently), and a NaN value
// is named as such rather than called an incomplete attribute.
TEST_F(HostileInputTest, FillValuesMustFitTheirDtype) {
  for (double value : {1e300, 3e9, std::nan("")}) {
    expect_error(
        [&] {
          ops::call(
              "fill", {},
              {{"shape", std::vector<int64_t>{2}}, {"value", value}, {"dtype", ir::DType::kInt32}});
        },
        ErrorKind::kInvalidArgument, "does not fit dtype Int32");
  }
  expect_error(
      [] {
        ops::call(
            "fill", {},
            {{"shape", std::vector<int64_t>{2}}, {"value", 1e40}, {"dtype", ir::DType::kFloat32}});
      },
      ErrorKind::kInvalidArgument, "does not fit dtype Float32");
  // A NaN float fill is fine, in a graph that verifies.
  ir::Graph g("nan_fill");
  g.add_output(g.add_node("fill", {},
                          {{"shape", std::vector<int64_t>{2}},
                           {"value", std::nan("")},
                           {"dtype", ir::DType::kFloat32}}));
  EXPECT_NO_THROW(ir::verify(g));
}

TEST_F(HostileInputTest, PrintFilePathOnAFullDeviceIsAnError) {
  expect_error([] { engine::route_print_output("/dev/full"); }, ErrorKind::kInvalidArgument,
               "No space left on device");
  engine::route_print_output("");
}

// ---- bounded recursion ----

TEST_F(HostileInputTest, DeepJsonIsRefusedWithoutRecursion) {
  const fs::path file = dir_ / "deep.json";
  write_bytes(file, std::string(100000, '[') + std::string(100000, ']'));
  expect_error([&] { context::read_json_document(file, "context file"); },
               ErrorKind::kInvalidArgument, "nests arrays and objects more than 128 deep");
  // Brackets inside strings do not count.
  write_bytes(file, "{\"a\": \"" + std::string(1000, '[') + "\"}");
  EXPECT_NO_THROW(context::read_json_document(file, "context file"));
}

TEST_F(HostileInputTest, TensorsOfHugeRankPrintWithoutRecursion) {
  float value = 2.5f;
  ir::TensorView view;
  view.data = &value;
  view.type = {ir::DType::kFloat32, ir::Shape(200000, 1)};
  const std::string text = runtime::ops::format_tensor(view);
  EXPECT_NE(text.find("[[[[2.5]]]]"), std::string::npos);
  EXPECT_NE(text.find("(200000 values)"), std::string::npos);
  // And the ordinary layout is unchanged.
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  view.data = const_cast<float*>(values.data());
  view.type = {ir::DType::kFloat32, {2, 1, 3}};
  EXPECT_EQ(runtime::ops::format_tensor(view),
            "Tensor(shape=[2, 1, 3], dtype=Float32, value=\n[[[1, 2, 3]],\n\n [[4, 5, 6]]])");
}

// A chain of `n` nested calls, f0 -> f1 -> ... -> f(n-1), each adding 1.
std::unique_ptr<ir::Graph> call_chain(int n) {
  auto g = std::make_unique<ir::Graph>("main");
  const ir::TensorType type{ir::DType::kFloat32, {2}};
  auto* x = g->add_parameter("x", type);
  std::vector<ir::Graph*> fs;
  auto name = [](int i) { return std::string("f").append(std::to_string(i)); };
  for (int i = 0; i < n; ++i) fs.push_back(g->add_subgraph(name(i)));
  for (int i = 0; i < n; ++i) {
    auto* px = fs[i]->add_parameter("x", type);
    ir::Value v = fs[i]->add_node("add", {px, fs[i]->add_constant<float>({}, {1.0f})});
    if (i + 1 < n) v = fs[i]->create_node(nullptr, "call", {v}, {{"graph", name(i + 1)}}, {type});
    fs[i]->add_output(v);
  }
  g->add_output(g->create_node(nullptr, "call", {x}, {{"graph", std::string("f0")}}, {type}));
  return g;
}

// About what the default 8 MiB stack holds op by op, with margin: a chain this deep runs in both
// modes in a normal build.
constexpr int kDeepChain = 4000;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif
#else
constexpr bool kSanitizerBuild = false;
#endif

// A thread with a 1.5 MiB stack cannot hold 4000 levels: the interpreter refuses cleanly when the
// stack runs low, whatever max_call_depth allows, instead of overflowing it.
TEST_F(HostileInputTest, ACallChainDeeperThanTheThreadsStackIsRefused) {
  const std::string text = expect_error(
      [] {
        testing::run_on_stack(size_t{3} << 19, [] {
          context::set({{"mode", "PYNATIVE_MODE"}, {"max_call_depth", kDeepChain}});
          engine::IrRunner runner(call_chain(kDeepChain - 1));
          runner.run({{"x", Tensor::from_vector<float>({0, 10}, {2})}}, 0);
        });
      },
      ErrorKind::kInvalidArgument, "the thread's stack is nearly used up");
  EXPECT_NE(text.find("run on a thread with a larger stack"), std::string::npos) << text;
  context::reset();
}

TEST_F(HostileInputTest, ADeepCallChainRunsInBothModes) {
  // GRAPH mode inlines the chain in linear time. MF_TEST_CALL_DEPTH runs another depth.
  const char* env = std::getenv("MF_TEST_CALL_DEPTH");
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    SCOPED_TRACE(mode);
    const int depth = env != nullptr ? std::atoi(env) : kDeepChain;
    context::set({{"mode", mode}, {"max_call_depth", depth}});
    // @main is level 1: depth - 1 nested calls reach level `depth`.
    engine::IrRunner runner(call_chain(depth - 1));
    if (kSanitizerBuild) {
      // Frames several times larger: the chain may not fit, and then the stack check refuses it.
      try {
        runner.run({{"x", Tensor::from_vector<float>({0, 10}, {2})}}, 0);
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("stack is nearly used up"), std::string::npos)
            << e.what();
      }
      continue;
    }
    const auto out = runner.run({{"x", Tensor::from_vector<float>({0, 10}, {2})}}, 0);
    EXPECT_EQ(out.at(0).second.to_vector<float>(),
              (std::vector<float>{float(depth - 1), 9.0f + depth}));
  }
  context::reset();
}

// Beyond max_call_depth both modes give the same error, though GRAPH mode would flatten the chain
// and could run it: it refuses what op by op refuses, before compiling.
TEST_F(HostileInputTest, BeyondMaxCallDepthBothModesRefuseTheSame) {
  for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
    SCOPED_TRACE(mode);
    context::set({{"mode", mode}, {"max_call_depth", 100}});
    engine::IrRunner deep(call_chain(300));
    const std::string text = expect_error(
        [&] {
          deep.run({{"x", Tensor::from_vector<float>({0, 10}, {2})}}, 0);
        },
        ErrorKind::kInvalidArgument, "call depth exceeds max_call_depth 100");
    EXPECT_LT(text.size(), 4000u) << text;
  }
  // A chain exactly at the limit runs.
  context::set({{"mode", "GRAPH_MODE"}, {"max_call_depth", 100}});
  engine::IrRunner at_limit(call_chain(99));
  EXPECT_NO_THROW(at_limit.run({{"x", Tensor::from_vector<float>({0, 10}, {2})}}, 0));
  context::reset();
}

// MindSpore takes any positive max_call_depth (scripts set 10000 and 100000): accepted, and a
// chain deeper than the stack holds still ends in the stack guard's error, never a crash.
TEST_F(HostileInputTest, AnyPositiveMaxCallDepthIsAcceptedAndTheStackStillGuards) {
  for (int limit : {10000, 100000, 2147483647}) {
    EXPECT_NO_THROW(context::set({{"max_call_depth", limit}})) << limit;
  }
  expect_error(
      [] {
        context::set({{"max_call_depth", 0}});
      },
      ErrorKind::kInvalidArgument, "an integer >= 1");
  context::set({{"mode", "PYNATIVE_MODE"}, {"max_call_depth", 100000}});
  engine::IrRunner deep(call_chain(50000));
  expect_error(
      [&] {
        deep.run({{"x", Tensor::from_vector<float>({0, 10}, {2})}}, 0);
      },
      ErrorKind::kInvalidArgument, "the thread's stack is nearly used up");
  context::reset();
}

// Recursion: a function calling itself, two calling each other, and a recursive cond branch.
// Without a base case both modes stop at max_call_depth with the same clear error; `mf ir check`
// (the verifier) accepts such graphs, and compiling them (GRAPH mode, dumps) never recurses
// without bound.
enum class Recursion { kSelfCall, kMutual, kCondBranch };

std::unique_ptr<ir::Graph> recursive_graph(Recursion kind) {
  const ir::TensorType type{ir::DType::kFloat32, {2}};
  auto call = [&](ir::Graph* g, ir::Value x, const char* callee) {
    return ir::Value(
        g->create_node(nullptr, "call", {x}, {{"graph", std::string(callee)}}, {type}));
  };
  auto g = std::make_unique<ir::Graph>("main");
  g->add_output(call(g.get(), g->add_parameter("x", type), "f"));
  ir::Graph* f = g->add_subgraph("f");
  ir::Value fx = f->add_parameter("x", type);
  switch (kind) {
    case Recursion::kSelfCall:
      f->add_output(call(f, fx, "f"));
      break;
    case Recursion::kMutual: {
      f->add_output(call(f, fx, "g"));
      ir::Graph* other = g->add_subgraph("g");
      ir::Value gx = other->add_parameter("x", type);
      other->add_output(call(other, other->add_node("neg", {gx}), "f"));
      break;
    }
    case Recursion::kCondBranch: {
      // sum(x) > sum(x) is false: the else branch, which calls f again, is always taken.
      ir::Value sum = f->add_node("reduce_sum", {fx}, {{"axes", std::vector<int64_t>{0}}});
      ir::Value never = f->add_node("greater", {sum, sum});
      f->add_output(f->create_node(
          nullptr, "cond", {never, fx},
          {{"then_branch", std::string("done")}, {"else_branch", std::string("again")}}, {type}));
      ir::Graph* done = g->add_subgraph("done");
      done->add_output(done->add_parameter("x", type));
      ir::Graph* again = g->add_subgraph("again");
      again->add_output(call(again, again->add_parameter("x", type), "f"));
      break;
    }
  }
  ir::verify(*g);
  return g;
}

TEST_F(HostileInputTest, RecursionStopsAtMaxCallDepthInEveryModeAndLevel) {
  for (Recursion kind : {Recursion::kSelfCall, Recursion::kMutual, Recursion::kCondBranch}) {
    const auto graph = recursive_graph(kind);
    EXPECT_TRUE(ir::call_depth(*graph).recursive);
    // It prints and parses back (what `mf ir check` reads).
    EXPECT_NO_THROW(ir::parse_graph(ir::print_graph(*graph), "recursive.ir"));
    for (const char* mode : {"PYNATIVE_MODE", "GRAPH_MODE"}) {
      for (const char* level : {"O0", "O1", "O2"}) {
        SCOPED_TRACE(std::string(mode) + " " + level);
        context::set(
            {{"mode", mode}, {"max_call_depth", 200}, {"jit_config", {{"jit_level", level}}}});
        engine::IrRunner runner(recursive_graph(kind));
        expect_error(
            [&] {
              runner.run({{"x", Tensor::from_vector<float>({1, 2}, {2})}}, 0);
            },
            ErrorKind::kInvalidArgument, "call depth exceeds max_call_depth 200");
      }
    }
  }
  context::reset();
}

// ---- integer narrowing and long messages ----

TEST_F(HostileInputTest, HugeIntegersAreRangeErrorsNotNarrowed) {
  for (const char* key : {"runtime_num_threads", "inter_op_parallel_num", "max_call_depth"}) {
    expect_error(
        [&] {
          context::set({{key, kInt64Max}});
        },
        ErrorKind::kInvalidArgument, "an integer in [");
  }
  expect_error(
      [] {
        context::set({{"runtime_num_threads", kInt64Max}});
      },
      ErrorKind::kInvalidArgument, "an integer in [0, 2147483647]");
  expect_error(
      [] {
        context::set({{"runtime_num_threads", uint64_t(-1)}});
      },
      ErrorKind::kInvalidArgument, "an integer in [0, 2147483647]");
}

TEST_F(HostileInputTest, ErrorsQuoteLongInputCut) {
  const std::string text = expect_error(
      [] {
        context::set({{"device_target", std::string(300000, 'x')}});
      },
      ErrorKind::kInvalidArgument, "more characters)");
  EXPECT_LT(text.size(), 1000u);
}

}  // namespace
}  // namespace mf
