// print_file_path: prints go to a protobuf file that reads back exactly; an existing file is kept
// and the output gets a timestamp suffix; damage is reported, never trusted.

#include "engine/io/print_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/ops.h"
#include "engine_fixture.h"

namespace mf {
namespace {

namespace fs = std::filesystem;

using PrintFileTest = testing::EngineTestWithDir;

TEST_F(PrintFileTest, PrintsRoundTripThroughTheFile) {
  const fs::path file = dir_ / "print.pb";
  context::set({{"print_file_path", file.string()}});
  Tensor a = Tensor::from_vector<float>({1.5f, -2, 3}, {3});
  Tensor b = Tensor::from_vector<int64_t>({7, 8, 9, 10}, {2, 2});
  ops::print({a, b});
  ops::call("print", {a}, {{"prefix", std::string("after:")}});
  ops::sync();  // prints run asynchronously
  context::set({{"print_file_path", ""}});
  const auto records = engine::read_print_file(file);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].tensor.to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(records[1].tensor.to_vector<int64_t>(), b.to_vector<int64_t>());
  EXPECT_EQ(records[1].tensor.shape(), (Shape{2, 2}));
  EXPECT_EQ(records[2].prefix, "after:");
}

TEST_F(PrintFileTest, AnExistingFileIsKeptAndTheOutputGetsATimestampSuffix) {
  const fs::path file = dir_ / "print.pb";
  std::ofstream(file) << "keep me";
  EXPECT_EQ(engine::route_print_output(file.string()).string().rfind(file.string() + "_", 0), 0u);
  engine::route_print_output("");
  std::ifstream in(file);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, "keep me");
}

TEST_F(PrintFileTest, DamagedFilesAreReportedNotTrusted) {
  const fs::path file = dir_ / "print.pb";
  context::set({{"print_file_path", file.string()}});
  ops::print({Tensor::ones({100})});
  ops::sync();
  fs::resize_file(file, fs::file_size(file) - 50);
  try {
    engine::read_print_file(file);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kDataLoss);
    EXPECT_NE(std::string(e.what()).find("damaged at record 1"), std::string::npos) << e.what();
  }
  std::ofstream(file, std::ios::trunc) << "not a print file at all";
  EXPECT_THROW(engine::read_print_file(file), Error);
}

}  // namespace
}  // namespace mf
