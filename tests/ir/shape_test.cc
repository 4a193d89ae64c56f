#include "ir/shape.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace mf::ir {
namespace {

TEST(ShapeTest, Basics) {
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_EQ(num_elements({2, 3, 4}), 24);
  EXPECT_EQ(num_elements({2, 0}), 0);
  EXPECT_EQ(shape_to_string({}), "()");
  EXPECT_EQ(shape_to_string({7}), "(7)");
  EXPECT_EQ(shape_to_string({64, 784}), "(64, 784)");
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_TRUE(contiguous_strides({}).empty());
}

TEST(ShapeTest, BroadcastRules) {
  EXPECT_EQ(broadcast_shapes({3, 1}, {1, 4}, "add"), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}, "add"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({5, 2, 3}, {3}, "add"), (Shape{5, 2, 3}));
  EXPECT_EQ(broadcast_shapes({1}, {0}, "add"), (Shape{0}));
  EXPECT_EQ(broadcast_shapes({2, 3}, {2, 3}, "add"), (Shape{2, 3}));
}

TEST(ShapeTest, BroadcastErrorNamesOpShapesAndAxis) {
  try {
    broadcast_shapes({2, 3}, {4, 3}, "add");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.message(),
              "op 'add': shapes (2, 3) and (4, 3) cannot be broadcast: axis 0 of the result has "
              "sizes 2 and 4 (numpy rule: trailing axes must be equal or 1)");
  }
}

TEST(ShapeTest, NormalizeAxis) {
  EXPECT_EQ(normalize_axis(-1, 3, "softmax"), 2);
  EXPECT_EQ(normalize_axis(0, 3, "softmax"), 0);
  try {
    normalize_axis(3, 3, "softmax");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.message(),
              "op 'softmax': axis 3 is out of range for rank 3 (expected -3 <= axis < 3)");
  }
  EXPECT_THROW(normalize_axis(-4, 3, "softmax"), Error);
}

}  // namespace
}  // namespace mf::ir
