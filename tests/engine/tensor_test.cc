#include "engine/tensor.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine_fixture.h"

namespace mf {
namespace {

using testing::EngineTest;
namespace fs = std::filesystem;

using TensorTest = testing::EngineTestWithDir;

TEST_F(TensorTest, CreationHelpersFillAsAsked) {
  EXPECT_EQ(Tensor::zeros({2, 3}).to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(Tensor::ones({4}, DType::kInt64).to_vector<int64_t>(), std::vector<int64_t>(4, 1));
  EXPECT_EQ(Tensor::full({}, 2.5).to_vector<float>(), std::vector<float>{2.5f});
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.to_vector<float>()[5], 6.0f);
}

TEST_F(TensorTest, RandnIsReproducibleFromItsSeedAndRoughlyStandard) {
  const auto a = Tensor::randn({10000}, 7).to_vector<float>();
  EXPECT_EQ(a, Tensor::randn({10000}, 7).to_vector<float>());
  EXPECT_NE(a, Tensor::randn({10000}, 8).to_vector<float>());
  double sum = 0, sq = 0;
  for (float v : a) sum += v, sq += double(v) * v;
  EXPECT_NEAR(sum / a.size(), 0.0, 0.05);
  EXPECT_NEAR(sq / a.size(), 1.0, 0.05);
}

TEST_F(TensorTest, WrongElementTypeIsRejected) {
  Tensor t = Tensor::zeros({2});
  try {
    t.data<int32_t>();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data<Int32>() on a tensor of dtype Float32"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Tensor::from_vector<float>({1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(Tensor().shape(), Error);
}

// 0, 1, 0, 3, 1, 5 in the given dtype (bool: nonzero is true).
Tensor small_values(DType dtype) {
  const std::vector<double> values = {0, 1, 0, 3, 1, 5};
  std::vector<uint8_t> bytes(values.size() * ir::dtype_size(dtype));
  ir::visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < values.size(); ++i)
      reinterpret_cast<T*>(bytes.data())[i] = static_cast<T>(values[i]);
  });
  return Tensor::from_bytes(dtype, {2, 3}, bytes.data());
}

TEST_F(TensorTest, NpyRoundTripsEveryDtype) {
  for (DType dtype : ir::kAllDTypes) {
    Tensor t = small_values(dtype);
    const fs::path file = dir_ / "t.npy";
    t.save_npy(file);
    Tensor back = Tensor::load_npy(file);
    EXPECT_EQ(back.type(), t.type()) << ir::dtype_name(dtype);
    EXPECT_EQ(back.to_doubles(), t.to_doubles()) << ir::dtype_name(dtype);
  }
}

TEST_F(TensorTest, NpyScalarAndOneDimensionalShapes) {
  for (const Shape& shape : {Shape{}, Shape{3}, Shape{2, 0}}) {
    Tensor t = Tensor::ones(shape);
    t.save_npy(dir_ / "s.npy");
    EXPECT_EQ(Tensor::load_npy(dir_ / "s.npy").shape(), shape);
  }
}

void write_bytes(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary);
  out << bytes;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(TensorTest, MalformedNpyFilesGetClearErrors) {
  const fs::path file = dir_ / "bad.npy";
  EXPECT_NE(
      error_of([&] { Tensor::load_npy(dir_ / "missing.npy"); }).find("No such file or directory"),
      std::string::npos);
  write_bytes(file, "hello world");
  EXPECT_NE(error_of([&] { Tensor::load_npy(file); }).find("not a .npy file"), std::string::npos);
  // A valid file cut short in its data.
  Tensor::ones({100}).save_npy(file);
  fs::resize_file(file, fs::file_size(file) - 10);
  EXPECT_NE(error_of([&] { Tensor::load_npy(file); }).find("data is truncated"), std::string::npos);
  // An unsupported dtype.
  Tensor::ones({2}).save_npy(file);
  std::ifstream in(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  bytes.replace(bytes.find("<f4"), 3, "<c8");
  write_bytes(file, bytes);
  EXPECT_NE(error_of([&] { Tensor::load_npy(file); }).find("dtype '<c8' is not supported"),
            std::string::npos);
}

TEST_F(TensorTest, StatsSummarizeValues) {
  const TensorStats s = tensor_stats(Tensor::from_vector<float>({1, -2, 4}, {3}));
  EXPECT_DOUBLE_EQ(s.sum, 3);
  EXPECT_DOUBLE_EQ(s.mean, 1);
  EXPECT_DOUBLE_EQ(s.min, -2);
  EXPECT_DOUBLE_EQ(s.max, 4);
}

}  // namespace
}  // namespace mf
