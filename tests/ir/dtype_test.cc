#include "ir/dtype.h"

#include <gtest/gtest.h>

namespace mf::ir {
namespace {

TEST(DtypeTest, NamesRoundTrip) {
  for (DType d : kAllDTypes) {
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
  EXPECT_EQ(dtype_name(DType::kFloat32), "Float32");
  EXPECT_EQ(parse_dtype("float32"), DType::kFloat32);
  EXPECT_EQ(parse_dtype("int64"), DType::kInt64);
  EXPECT_EQ(parse_dtype("bool"), DType::kBool);
  EXPECT_EQ(parse_dtype("FLOAT32"), std::nullopt);
  EXPECT_EQ(parse_dtype("float"), std::nullopt);
  EXPECT_EQ(parse_dtype(""), std::nullopt);
}

TEST(DtypeTest, SizesAndKinds) {
  EXPECT_EQ(dtype_size(DType::kFloat32), 4u);
  EXPECT_EQ(dtype_size(DType::kFloat64), 8u);
  EXPECT_EQ(dtype_size(DType::kInt32), 4u);
  EXPECT_EQ(dtype_size(DType::kInt64), 8u);
  EXPECT_EQ(dtype_size(DType::kBool), 1u);
  EXPECT_TRUE(is_floating(DType::kFloat64));
  EXPECT_FALSE(is_floating(DType::kInt32));
  EXPECT_EQ(dtype_of<double>(), DType::kFloat64);
  size_t seen = visit_dtype(DType::kInt64, [](auto x) { return sizeof(x); });
  EXPECT_EQ(seen, 8u);
}

}  // namespace
}  // namespace mf::ir
