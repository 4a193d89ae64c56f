// The view ops' references take their output shape from the op's own inference, so the conformance
// test's shape check cannot catch a wrong inference for them. Here every sample of every view op
// has its output shape written out by hand (numpy semantics), independently of the code; and the
// convolution and pooling samples' output shapes come from the textbook formula written here, not
// from the window helpers the kernels and references share. The reductions' samples have their
// reduced axes and output shapes written out by hand too, and their sums computed by a loop here:
// the kernels and the reference share the helpers that pick the axes and shape the output.

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
      {"flatten",
       {{{2, 3, 4}, {2, 12}}, {{5}, {5, 1}}, {{2, 3, 2, 2}, {2, 12}}, {{0, 4, 2, 2}, {0, 16}}}},
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

struct ReduceRow {
  Shape input;
  std::vector<bool> reduced;  // per input axis, normalized by hand (negative axes, empty = all)
  Shape output;
};

// One row per sample of the reductions (they share one sample list), in sample order.
const std::vector<ReduceRow>& hand_reductions() {
  static const std::vector<ReduceRow> table = {
      {{3, 5}, {true, true}, {}},                                            // axes=[]
      {{3, 5}, {false, true}, {3}},                                          // axes=[1]
      {{3, 5}, {true, false}, {1, 5}},                                       // axes=[0], keep_dims
      {{2, 3, 4}, {false, false, true}, {2, 3, 1}},                          // axes=[-1], keep_dims
      {{2, 3, 4}, {true, false, true}, {3}},                                 // axes=[0, 2]
      {{3, 4, 2, 5, 6}, {false, true, false, true, true}, {3, 1, 2, 1, 1}},  // [1, 3, 4], keep
      {{2, 3, 4, 5, 6}, {true, false, true, false, true}, {3, 5}},           // axes=[0, 2, 4]
      {{2, 3, 4, 5}, {false, true, true, false}, {2, 1, 1, 5}},  // axes=[1, 2], keep_dims
      {{7}, {true}, {}},                                         // axes=[0]
      {{}, {}, {}},                                              // a scalar, axes=[]
      {{100000}, {true}, {}},                                    // axes=[]
      {{3, 1, 5000}, {true, false, false}, {1, 5000}},           // axes=[0]
  };
  return table;
}

// The sum over the hand-marked axes by a plain loop over input coordinates.
std::vector<double> hand_sum(const ReduceRow& row, const std::vector<double>& x) {
  std::vector<int64_t> kept_sizes;
  for (size_t d = 0; d < row.input.size(); ++d) {
    if (!row.reduced[d]) kept_sizes.push_back(row.input[d]);
  }
  int64_t out_count = 1;
  for (int64_t n : kept_sizes) out_count *= n;
  std::vector<double> sums(static_cast<size_t>(out_count), 0.0);
  std::vector<int64_t> coord(row.input.size(), 0);
  for (double value : x) {
    int64_t o = 0;
    for (size_t d = 0; d < coord.size(); ++d) {
      if (!row.reduced[d]) o = o * row.input[d] + coord[d];
    }
    sums[static_cast<size_t>(o)] += value;
    for (size_t d = coord.size(); d-- > 0;) {  // next coordinate, last axis fastest
      if (++coord[d] < row.input[d]) break;
      coord[d] = 0;
    }
  }
  return sums;
}

TEST(ReduceShapes, InferenceAndReferenceMatchAxesAndShapesWrittenByHand) {
  for (const char* name : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min"}) {
    SCOPED_TRACE(name);
    const ir::OpDef& op = ir::get_op(name);
    const std::vector<ReduceRow>& rows = hand_reductions();
    ASSERT_EQ(op.samples.size(), rows.size())
        << "the op's samples changed: write the new samples' axes and shapes into this table";
    for (size_t i = 0; i < rows.size(); ++i) {
      SCOPED_TRACE("sample " + std::to_string(i));
      const ir::OpSample& s = op.samples[i];
      ASSERT_EQ(s.inputs.at(0).shape, rows[i].input) << "the samples were reordered";
      ir::Attrs attrs = s.attrs;
      const std::vector<ir::TensorType> inferred = op.infer_types(s.inputs, attrs);
      ASSERT_EQ(inferred.size(), 1u);
      EXPECT_EQ(inferred[0].shape, rows[i].output)
          << "inference gives " << ir::shape_to_string(inferred[0].shape);
      // Distinct values, so a sum over the wrong axes cannot come out right.
      std::vector<double> x(static_cast<size_t>(ir::num_elements(rows[i].input)));
      for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<double>(k % 97) + 0.25 * (k % 5);
      const std::vector<ir::RefTensor> ref =
          op.reference(std::vector<ir::RefTensor>{{rows[i].input, x}}, attrs);
      ASSERT_EQ(ref.size(), 1u);
      EXPECT_EQ(ref[0].shape, rows[i].output) << "the reference's shape";
      if (std::string(name) == "reduce_sum") {
        EXPECT_EQ(ref[0].values, hand_sum(rows[i], x)) << "the reference summed other axes";
      }
    }
  }
}

}  // namespace
}  // namespace mf::runtime::ops
