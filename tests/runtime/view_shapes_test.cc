// The view ops' references take their output shape from the op's own inference, so the conformance
// test's shape check cannot catch a wrong inference for them. Here every sample of every view op
// has its output shape written out by hand (numpy semantics), independently of the code; and the
// convolution and pooling samples' output shapes come from the textbook formula written here, not
// from the window helpers the kernels and references share.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/op_def.h"
#include "ir/shape.h"

namespace mf::runtime::ops {
namespace {

using ir::Shape;

struct ViewRow {
  Shape input;
  Shape output;
};

// Per op, one row per sample in the op's sample order.
const std::map<std::string, std::vector<ViewRow>>& hand_shapes() {
  static const std::map<std::string, std::vector<ViewRow>> table = {
      {"reshape",
       {{{2, 3}, {3, 2}}, {{2, 3, 4}, {6, 4}}, {{6}, {1, 2, 1, 3}}, {{}, {1, 1}}, {{1}, {}}}},
      {"flatten", {{{2, 3, 4}, {2, 12}}, {{5}, {5, 1}}, {{2, 3, 2, 2}, {2, 12}}}},
      {"expand_dims", {{{2, 3}, {1, 2, 3}}, {{2, 3}, {2, 3, 1}}, {{2, 3}, {2, 1, 3}}, {{}, {1}}}},
      {"squeeze", {{{1, 3, 1, 2}, {3, 2}}, {{1, 3, 1, 2}, {1, 3, 2}}, {{1}, {}}}},
  };
  return table;
}

TEST(ViewShapes, InferenceAndReferenceMatchShapesWrittenByHand) {
  for (const auto& [name, rows] : hand_shapes()) {
    SCOPED_TRACE(name);
    const ir::OpDef& op = ir::get_op(name);
    ASSERT_EQ(op.samples.size(), rows.size())
        << "the op's samples changed: write the new samples' shapes into this table";
    for (size_t i = 0; i < rows.size(); ++i) {
      SCOPED_TRACE("sample " + std::to_string(i));
      const ir::OpSample& s = op.samples[i];
      ASSERT_EQ(s.inputs.at(0).shape, rows[i].input) << "the samples were reordered";
      ir::Attrs attrs = s.attrs;
      const std::vector<ir::TensorType> inferred = op.infer_types(s.inputs, attrs);
      ASSERT_EQ(inferred.size(), 1u);
      EXPECT_EQ(inferred[0].shape, rows[i].output)
          << "inference gives " << ir::shape_to_string(inferred[0].shape);
      std::vector<ir::RefTensor> in = {
          {s.inputs[0].shape,
           std::vector<double>(size_t(ir::num_elements(s.inputs[0].shape)), 1.0)}};
      const std::vector<ir::RefTensor> ref = op.reference(in, attrs);
      ASSERT_EQ(ref.size(), 1u);
      EXPECT_EQ(ref[0].shape, rows[i].output);
    }
  }
}

// Convolution and pooling output sizes from the textbook formula, written here rather than taken
// from the kernels' window helpers: out = (in + pad_lo + pad_hi - dilation * (k - 1) - 1) / stride
// + 1, with padding [h, w] meaning both sides and [top, bottom, left, right] each side.
Shape window_output(const Shape& x, int64_t out_channels, const std::vector<int64_t>& kernel,
                    std::vector<int64_t> stride, const std::vector<int64_t>& padding,
                    const std::vector<int64_t>& dilation) {
  if (stride.empty()) stride = kernel;
  const int64_t top = padding[0], bottom = padding.size() == 4 ? padding[1] : padding[0];
  const int64_t left = padding.size() == 4 ? padding[2] : padding[1];
  const int64_t right = padding.size() == 4 ? padding[3] : padding[1];
  const int64_t h = (x[2] + top + bottom - dilation[0] * (kernel[0] - 1) - 1) / stride[0] + 1;
  const int64_t w = (x[3] + left + right - dilation[1] * (kernel[1] - 1) - 1) / stride[1] + 1;
  return {x[0], out_channels, h, w};
}

TEST(WindowShapes, ConvAndPoolingSamplesMatchTheTextbookFormula) {
  int checked = 0;
  for (const char* name : {"conv2d", "max_pool2d", "avg_pool2d"}) {
    const ir::OpDef& op = ir::get_op(name);
    for (size_t i = 0; i < op.samples.size(); ++i) {
      SCOPED_TRACE(std::string(name) + " sample " + std::to_string(i));
      const ir::OpSample& s = op.samples[i];
      ir::Attrs attrs = s.attrs;
      const std::vector<ir::TensorType> inferred =
          op.infer_types(s.inputs, attrs);  // fills defaults
      // Channels-last samples (data_format NHWC): x is (N, H, W, C) and so is the output.
      const bool nhwc = ir::attr_string(attrs, "data_format", name) == "NHWC";
      const Shape& given = s.inputs[0].shape;
      const Shape x = nhwc ? Shape{given[0], given[3], given[1], given[2]} : given;
      const bool conv = std::string(name) == "conv2d";
      const Shape& weight = conv ? s.inputs[1].shape : x;
      const Shape nchw = window_output(
          x, conv ? weight[0] : x[1],
          conv ? std::vector<int64_t>{weight[2], weight[3]} : ir::attr_ints(attrs, "kernel", name),
          ir::attr_ints(attrs, "stride", name), ir::attr_ints(attrs, "padding", name),
          conv ? ir::attr_ints(attrs, "dilation", name) : std::vector<int64_t>{1, 1});
      const Shape want = nhwc ? Shape{nchw[0], nchw[2], nchw[3], nchw[1]} : nchw;
      EXPECT_EQ(inferred.at(0).shape, want)
          << "inference gives " << ir::shape_to_string(inferred[0].shape) << ", the formula "
          << ir::shape_to_string(want);
      std::vector<ir::RefTensor> in;
      for (const ir::TensorType& t : s.inputs) {
        in.push_back({t.shape, std::vector<double>(size_t(ir::num_elements(t.shape)), 0.5)});
      }
      EXPECT_EQ(op.reference(in, attrs).at(0).shape, want) << "the reference's shape";
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace mf::runtime::ops
