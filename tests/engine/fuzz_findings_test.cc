// What the fuzz targets (fuzz/) found, one test each; the inputs themselves are kept in
// fuzz/corpus/<target>/crash-*, which `tools/fuzz.sh --regression` replays.

#include <gtest/gtest.h>

#include <google/protobuf/arena.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "compile_cache.pb.h"
#include "context/context.h"
#include "engine/compile_cache/entry_file.h"
#include "engine/compile_cache/plan_codec.h"
#include "engine/io/print_file.h"
#include "engine_fixture.h"
#include "ir/serialize.h"
#include "ir/shape.h"
#include "runtime/kernels/print_sink.h"

namespace mf {
namespace {

namespace fs = std::filesystem;
using FuzzFindingsTest = testing::EngineTestWithDir;

std::string corpus_file(const std::string& target, const std::string& name) {
  std::ifstream in(fs::path(MF_SOURCE_DIR) / "fuzz" / "corpus" / target / name, std::ios::binary);
  EXPECT_TRUE(in.good()) << target << "/" << name;
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

template <typename F>
void expect_error(F&& f, ErrorKind kind, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    return;
  }
  ADD_FAILURE() << "expected an error containing '" << needle << "'";
}

// context_json_fuzz: a number beyond a double is valid JSON syntax that nlohmann refuses with
// out_of_range, which escaped as a bare C++ exception.
TEST_F(FuzzFindingsTest, ContextFileNumberBeyondDoubleIsAnError) {
  const fs::path file = dir_ / "big.json";
  std::ofstream(file) << R"({"max_call_depth": 1e999})";
  expect_error([&] { context::read_json_file(file); }, ErrorKind::kInvalidArgument,
               "write numbers that fit a double");
}

// print_file_fuzz: an empty tensor (one axis 0) whose other axes multiply past int64 passed the
// size check (0 elements) and overflowed its strides. Zero axes now count as 1 in the bound, and
// an axis after a zero is checked too.
TEST_F(FuzzFindingsTest, EmptyTensorWithHugeAxesIsRefused) {
  EXPECT_EQ(ir::try_num_elements({0, int64_t{1} << 40, int64_t{1} << 30}), std::nullopt);
  EXPECT_EQ(ir::try_num_elements({0, -5}), std::nullopt);
  EXPECT_EQ(ir::try_num_elements({0, 3}), 0);
  EXPECT_EQ(ir::try_num_elements({int64_t{1} << 20, 0, int64_t{1} << 20}), 0);
  const fs::path file = dir_ / "damaged.pf";
  std::ofstream(file, std::ios::binary)
      << corpus_file("print_file_fuzz", "crash-empty-tensor-stride-overflow.pf");
  expect_error([&] { engine::read_print_file(file); }, ErrorKind::kDataLoss, "declares shape");
}

// print_file_fuzz: an empty tensor of shape (2^20, 2^20, 0) printed a bracket pair per row, 2^40
// of them (a hang); it prints as [] now.
TEST_F(FuzzFindingsTest, EmptyTensorPrintsWithoutWalkingItsRows) {
  ir::TensorView view;
  view.data = nullptr;
  view.type = {ir::DType::kFloat32, {int64_t{1} << 20, int64_t{1} << 20, 0}};
  EXPECT_EQ(runtime::ops::format_tensor(view),
            "Tensor(shape=[1048576, 1048576, 0], dtype=Float32, value=[])");
  // The finding's first four records are whole; what follows them is a damaged length field,
  // refused as such (it once read as the end of the file).
  const std::string finding = corpus_file("print_file_fuzz", "timeout-empty-tensor-rows.pf");
  const fs::path whole = dir_ / "damaged_tail.pf";
  std::ofstream(whole, std::ios::binary) << finding;
  expect_error([&] { engine::read_print_file(whole); }, ErrorKind::kDataLoss,
               "its length field is not a valid varint");
  const fs::path file = dir_ / "empty_rows.pf";
  std::ofstream(file, std::ios::binary) << finding.substr(0, 177);
  const auto records = engine::read_print_file(file);
  EXPECT_EQ(records.size(), 3u);
  for (const auto& record : records) {
    const Tensor& t = record.tensor;
    EXPECT_LT(runtime::ops::format_tensor({const_cast<void*>(t.raw_data()), t.type()}).size(),
              100000u);
  }
}

// cache_entry_fuzz: a stored step whose node has an op this build does not register reached
// code that reads the op's definition (a null pointer).
TEST_F(FuzzFindingsTest, CacheEntryStepOfUnregisteredOpIsDataLoss) {
  using namespace engine::detail;
  const std::string bytes = corpus_file("cache_entry_fuzz", "crash-unregistered-op-step.mfcc");
  proto::CacheEntryHeader header;
  size_t offset = 0;
  parse_header(bytes, header, &offset);
  google::protobuf::Arena arena;
  auto& payload = *google::protobuf::Arena::CreateMessage<proto::CacheEntryPayload>(&arena);
  parse_payload(std::string_view(bytes).substr(offset), payload);
  const auto graph = ir::graph_from_proto(payload.graph());
  expect_error([&] { plan_from_payload(payload, *graph); }, ErrorKind::kDataLoss,
               "which this build does not register");
}

}  // namespace
}  // namespace mf
