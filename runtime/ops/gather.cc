// gather: picks slices of x along one axis by integer indices (numpy's take, ONNX's Gather). The
// output shape is x.shape[:axis] + indices.shape + x.shape[axis+1:]. Negative indices count from
// the end; an index out of range is an error at run time, never a read past the buffer.
//
// It moves bytes without interpreting them, so every dtype of x is supported and the kernel is
// instantiated per element size only, like the shape ops.

#include <cstring>

#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

std::vector<TensorType> infer_gather(std::span<const TensorType> in, const Attrs& attrs) {
  MF_CHECK(!in[0].shape.empty(), InvalidArgument, "gather: x must have rank >= 1, got a scalar");
  check_dtype("gather", in[1].dtype, {DType::kInt32, DType::kInt64}, "as indices");
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(attrs, "axis", "gather"), rank_of(in[0]), "gather");
  Shape out(in[0].shape.begin(), in[0].shape.begin() + axis);
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), in[0].shape.begin() + axis + 1, in[0].shape.end());
  return {{in[0].dtype, out}};
}

// (outer, axis length, inner) of x around axis.
struct GatherDims {
  int64_t outer = 1, dim = 1, inner = 1;
};

GatherDims gather_dims(const Shape& x, int64_t axis) {
  GatherDims g;
  for (int64_t d = 0; d < axis; ++d) g.outer *= x[d];
  g.dim = x[axis];
  for (size_t d = axis + 1; d < x.size(); ++d) g.inner *= x[d];
  return g;
}

template <typename I>
std::vector<int64_t> normalized_indices(const ir::TensorView& view, int64_t dim) {
  std::vector<int64_t> out(view.size());
  const I* p = view.as<I>();
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t v = static_cast<int64_t>(p[i]);
    if (v < 0) v += dim;
    MF_CHECK(v >= 0 && v < dim, InvalidArgument, "gather: index ", static_cast<int64_t>(p[i]),
             " is out of range for an axis of size ", dim, "; indices must be in [", -dim, ", ",
             dim, ")");
    out[i] = v;
  }
  return out;
}

void gather_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& x = ctx.inputs[0];
  const int64_t axis = ir::normalize_axis(ir::attr_int(ctx.attrs, "axis", ctx.op_name),
                                          x.type.shape.size(), ctx.op_name);
  const GatherDims g = gather_dims(x.type.shape, axis);
  const std::vector<int64_t> index = ctx.inputs[1].type.dtype == DType::kInt32
                                         ? normalized_indices<int32_t>(ctx.inputs[1], g.dim)
                                         : normalized_indices<int64_t>(ctx.inputs[1], g.dim);
  const size_t row = size_t(g.inner) * ir::dtype_size(x.type.dtype);
  const int64_t n = static_cast<int64_t>(index.size());
  const char* src = static_cast<const char*>(x.data);
  char* dst = static_cast<char*>(ctx.outputs[0].data);
  if (row == 0 || n == 0) return;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, row * n));
  parallel_for(g.outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(dst + (o * n + i) * row, src + (o * g.dim + index[i]) * row, row);
      }
    }
  });
}

std::vector<RefTensor> gather_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  int64_t axis = std::get<int64_t>(attrs.at("axis"));
  const Shape& xs = in[0].shape;
  if (axis < 0) axis += static_cast<int64_t>(xs.size());
  Shape out_shape(xs.begin(), xs.begin() + axis);
  out_shape.insert(out_shape.end(), in[1].shape.begin(), in[1].shape.end());
  out_shape.insert(out_shape.end(), xs.begin() + axis + 1, xs.end());
  RefTensor out = ref_tensor(out_shape);
  const size_t k = in[1].shape.size();
  for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
    const std::vector<int64_t> c = ref_unravel(i, out_shape);
    const std::vector<int64_t> ic(c.begin() + axis, c.begin() + axis + k);
    int64_t index = static_cast<int64_t>(in[1].values[ref_ravel(ic, in[1].shape)]);
    if (index < 0) index += xs[axis];
    MF_CHECK(index >= 0 && index < xs[axis], InvalidArgument, "gather: index out of range");
    std::vector<int64_t> xc(c.begin(), c.begin() + axis);
    xc.push_back(index);
    xc.insert(xc.end(), c.begin() + axis + k, c.end());
    out.values[i] = in[0].values[ref_ravel(xc, xs)];
  }
  return {out};
}

// Backward: dout added back into zeros of x's shape at the picked slices (picked twice, added
// twice), as a scatter_elements over x viewed as (outer, axis, inner) with each index repeated
// across the outer and inner positions.
void gather_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const TensorType& x = b.input_type(0);
  const TensorType& indices = b.input_type(1);
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(b.attrs(), "axis", "gather"), rank_of(x), "gather");
  const GatherDims g = gather_dims(x.shape, axis);
  const int64_t picks = ir::num_elements(indices.shape);
  const ir::GradValue updates = reshape_to(b, b.dout(0), {g.outer, picks, g.inner});
  const ir::GradValue where =
      broadcast_to(b, reshape_to(b, b.input(1), {1, picks, 1}), {g.outer, picks, g.inner});
  const ir::GradValue zeros = b.zeros_like({x.dtype, {g.outer, g.dim, g.inner}});
  const ir::GradValue summed = b.op("scatter_elements", {zeros, where, updates},
                                    {{"axis", int64_t{1}}, {"reduction", std::string("add")}});
  b.set_grad(0, reshape_to(b, summed, x.shape));
}

// Indices are drawn from [-10, 10] (integers are scaled by 5), so every sample's gathered axis has
// at least 11 entries: every drawn index is valid, negative ones included.
const ir::OpRegistration kGather =
    ir::define_op("gather")
        .arity(2)
        .attr("axis", ir::AttrKind::kInt, int64_t{0}, "the axis of x that indices pick from")
        .traits(Trait::kPure)
        .infer(infer_gather)
        .kernel(gather_kernel)
        .reference(gather_reference)
        .samples({
            sample({f32({12, 3}), i64({4})}),
            sample({f32({2, 11, 3}), i32({2, 2})}, {{"axis", int64_t{1}}}),
            sample({f32({3, 11}), i64({})}, {{"axis", int64_t{-1}}}),
            sample({i64({16}), i64({3, 2})}),
        })
        .doc("x.take(indices, axis): slices of x along axis picked by indices")
        .backward({.inputs = 0b10}, gather_backward);

}  // namespace
}  // namespace mf::runtime::ops
