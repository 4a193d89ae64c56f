// Shape ops: reshape, flatten, expand_dims, squeeze and stop_gradient (views: only the shape
// changes, if anything), transpose, broadcast_to, slice, concat and split. They move bytes, never
// interpret them, so every dtype is supported and the kernels are instantiated per element size
// only (strided.h).

#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/kernels/strided.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

constexpr Trait kViewTraits = Trait::kView | Trait::kPure;
constexpr Trait kMoveTraits = Trait::kPure;

void copy_kernel(const ir::KernelContext& ctx) {
  if (ctx.outputs[0].data == ctx.inputs[0].data) return;  // an executor may alias a view
  std::memcpy(ctx.outputs[0].data, ctx.inputs[0].data,
              ctx.inputs[0].size() * ir::dtype_size(ctx.inputs[0].type.dtype));
}

// A view's reference: same values, new shape (computed by the op's own inference from the types).
ir::ReferenceFn view_reference(ir::InferFn infer) {
  return [infer](std::span<const RefTensor> in, const Attrs& attrs) {
    const TensorType type{DType::kFloat64, in[0].shape};
    RefTensor out = in[0];
    out.shape = infer(std::span<const TensorType>(&type, 1), attrs)[0].shape;
    return std::vector<RefTensor>{out};
  };
}

std::vector<ir::OpSample> with_attrs(std::vector<std::pair<TensorType, Attrs>> cases) {
  std::vector<ir::OpSample> out;
  for (auto& [type, attrs] : cases) out.push_back(sample({type}, attrs));
  return out;
}

// ---- reshape ----

std::vector<TensorType> infer_reshape(std::span<const TensorType> in, const Attrs& attrs) {
  const std::vector<int64_t>& target = ir::attr_ints(attrs, "shape", "reshape");
  const int64_t total = ir::num_elements(in[0].shape);
  Shape out(target.begin(), target.end());
  int64_t known = 1;
  int unknown = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      MF_CHECK(unknown < 0, InvalidArgument, "reshape: shape ", ints_to_string(target),
               " has more than one -1; at most one dimension can be inferred");
      unknown = static_cast<int>(i);
      continue;
    }
    MF_CHECK(out[i] >= 0, InvalidArgument, "reshape: shape ", ints_to_string(target),
             " has the negative dimension ", out[i], " (only -1, meaning 'inferred', is allowed)");
    // A product beyond the largest tensor can never equal the input's count; checked so that a
    // target like (16, 2^60 + 1) is not wrapped around 64 bits into 16.
    const std::optional<int64_t> product = ir::checked_mul(known, out[i]);
    MF_CHECK(product.has_value() && *product <= ir::kMaxTensorElements, InvalidArgument,
             "reshape: cannot reshape ", ir::shape_to_string(in[0].shape), " (", total,
             " elements) to ", ints_to_string(target),
             ": the target has more than 2^40 elements, the largest tensor supported");
    known = *product;
  }
  if (unknown >= 0) {
    MF_CHECK(known != 0 && total % known == 0, InvalidArgument, "reshape: cannot reshape ",
             ir::shape_to_string(in[0].shape), " (", total, " elements) to ",
             ints_to_string(target), ": ", total, " is not divisible by the product ", known,
             " of the known dimensions");
    out[unknown] = total / known;
  } else {
    MF_CHECK(known == total, InvalidArgument, "reshape: cannot reshape ",
             ir::shape_to_string(in[0].shape), " (", total, " elements) to ",
             ints_to_string(target), " (", known, " elements); the element count must not change");
  }
  return {{in[0].dtype, out}};
}

const ir::OpRegistration kReshape =
    ir::define_op("reshape")
        .arity(1)
        .attr("shape", ir::AttrKind::kInts, std::nullopt, "the new shape; one -1 is inferred")
        .traits(kViewTraits)
        .infer(infer_reshape)
        .kernel(copy_kernel)
        .reference(view_reference(infer_reshape))
        .samples(with_attrs({
            {f32({2, 3}), {{"shape", std::vector<int64_t>{3, 2}}}},
            {f32({2, 3, 4}), {{"shape", std::vector<int64_t>{-1, 4}}}},
            {f32({6}), {{"shape", std::vector<int64_t>{1, 2, 1, 3}}}},
            {f32({}), {{"shape", std::vector<int64_t>{1, 1}}}},
            {f32({1}), {{"shape", std::vector<int64_t>{}}}},
        }))
        .doc("same elements in row-major order, new shape")
        .backward({}, view_backward);

// ---- flatten ----

std::vector<TensorType> infer_flatten(std::span<const TensorType> in, const Attrs&) {
  MF_CHECK(!in[0].shape.empty(), InvalidArgument, "flatten: x must have rank >= 1, got a scalar");
  // The trailing product, not elements / lead: an empty batch keeps its other dimensions
  // ((0, 64, 8, 8) -> (0, 4096), as PyTorch and MindSpore give).
  int64_t rest = 1;
  for (size_t d = 1; d < in[0].shape.size(); ++d) {
    const std::optional<int64_t> product = ir::checked_mul(rest, in[0].shape[d]);
    MF_CHECK(product && *product <= ir::kMaxTensorElements, InvalidArgument, "flatten: x ",
             ir::shape_to_string(in[0].shape), " flattens to more than 2^40 elements per row");
    rest = *product;
  }
  return {{in[0].dtype, {in[0].shape[0], rest}}};
}

const ir::OpRegistration kFlatten =
    ir::define_op("flatten")
        .arity(1)
        .traits(kViewTraits)
        .infer(infer_flatten)
        .kernel(copy_kernel)
        .reference(view_reference(infer_flatten))
        .samples({sample({f32({2, 3, 4})}), sample({f32({5})}), sample({f32({2, 3, 2, 2})}),
                  sample({f32({0, 4, 2, 2})})})
        .doc("(d0, d1, ...) -> (d0, d1 * ...): keeps the batch dim")
        .backward({}, view_backward);

// ---- expand_dims ----

std::vector<TensorType> infer_expand_dims(std::span<const TensorType> in, const Attrs& attrs) {
  const int64_t axis = ir::normalize_axis(ir::attr_int(attrs, "axis", "expand_dims"),
                                          rank_of(in[0]) + 1, "expand_dims");
  Shape out = in[0].shape;
  out.insert(out.begin() + axis, 1);
  return {{in[0].dtype, out}};
}

const ir::OpRegistration kExpandDims =
    ir::define_op("expand_dims")
        .arity(1)
        .attr("axis", ir::AttrKind::kInt, std::nullopt,
              "where the new size-1 axis goes, in the output's numbering (-1 = last)")
        .traits(kViewTraits)
        .infer(infer_expand_dims)
        .kernel(copy_kernel)
        .reference(view_reference(infer_expand_dims))
        .samples(with_attrs({
            {f32({2, 3}), {{"axis", int64_t{0}}}},
            {f32({2, 3}), {{"axis", int64_t{-1}}}},
            {f32({2, 3}), {{"axis", int64_t{1}}}},
            {f32({}), {{"axis", int64_t{0}}}},
        }))
        .doc("inserts a size-1 axis")
        .backward({}, view_backward);

// ---- squeeze ----

std::vector<TensorType> infer_squeeze(std::span<const TensorType> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  const std::vector<int64_t>& axes = ir::attr_ints(attrs, "axes", "squeeze");
  std::vector<bool> drop(shape.size(), false);
  if (axes.empty()) {
    for (size_t d = 0; d < shape.size(); ++d) drop[d] = shape[d] == 1;
  }
  for (int64_t axis : axes) {
    const int64_t a = ir::normalize_axis(axis, rank_of(in[0]), "squeeze");
    MF_CHECK(shape[a] == 1, InvalidArgument, "squeeze: axis ", axis, " of ",
             ir::shape_to_string(shape), " has size ", shape[a],
             "; only size-1 axes can be removed");
    drop[a] = true;
  }
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!drop[d]) out.push_back(shape[d]);
  }
  return {{in[0].dtype, out}};
}

const ir::OpRegistration kSqueeze =
    ir::define_op("squeeze")
        .arity(1)
        .attr("axes", ir::AttrKind::kInts, std::vector<int64_t>{},
              "size-1 axes to remove; [] = all size-1 axes")
        .traits(kViewTraits)
        .infer(infer_squeeze)
        .kernel(copy_kernel)
        .reference(view_reference(infer_squeeze))
        .samples(with_attrs({
            {f32({1, 3, 1, 2}), {}},
            {f32({1, 3, 1, 2}), {{"axes", std::vector<int64_t>{-2}}}},
            {f32({1}), {}},
        }))
        .doc("removes size-1 axes")
        .backward({}, view_backward);

// ---- stop_gradient ----

std::vector<TensorType> infer_identity(std::span<const TensorType> in, const Attrs&) {
  return {in[0]};
}

// The identity as a view (copied only where the executor gives it bytes of its own, in place where
// x dies here), declared kNoGradient so that differentiation treats y as a constant. No pass
// matches it by name: simplification keeps it, constant folding folds it like any pure op, and
// fusion treats it as the view it is (a boundary).
const ir::OpRegistration kStopGradient =
    ir::define_op("stop_gradient")
        .arity(1)
        .traits(kViewTraits | Trait::kNoGradient)
        .infer(infer_identity)
        .kernel(copy_kernel)
        .reference(view_reference(infer_identity))
        .samples({sample({f32({2, 3})}), sample({f32({})}), sample({f64({4, 1, 5})}),
                  sample({i64({6})}), sample({boolean({3, 2})})})
        .doc("x unchanged; no gradient flows back through it (MindSpore's stop_gradient)");

// ---- transpose ----

std::vector<int64_t> resolve_perm(const Shape& shape, const Attrs& attrs) {
  std::vector<int64_t> perm = ir::attr_ints(attrs, "perm", "transpose");
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (perm.empty()) {
    for (int64_t d = rank - 1; d >= 0; --d) perm.push_back(d);
    return perm;
  }
  MF_CHECK(static_cast<int64_t>(perm.size()) == rank, InvalidArgument, "transpose: perm ",
           ints_to_string(perm), " must list all ", rank, " axes of ", ir::shape_to_string(shape));
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    p = ir::normalize_axis(p, rank, "transpose");
    MF_CHECK(!seen[p], InvalidArgument, "transpose: perm ",
             ints_to_string(ir::attr_ints(attrs, "perm", "transpose")), " repeats axis ", p);
    seen[p] = true;
  }
  return perm;
}

std::vector<TensorType> infer_transpose(std::span<const TensorType> in, const Attrs& attrs) {
  const std::vector<int64_t> perm = resolve_perm(in[0].shape, attrs);
  Shape out;
  for (int64_t p : perm) out.push_back(in[0].shape[p]);
  return {{in[0].dtype, out}};
}

void transpose_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  const std::vector<int64_t> perm = resolve_perm(shape, ctx.attrs);
  const std::vector<int64_t> strides = ir::contiguous_strides(shape);
  StridedView view{ctx.inputs[0].data, {}, {}};
  for (int64_t p : perm) {
    view.shape.push_back(shape[p]);
    view.strides.push_back(strides[p]);
  }
  strided_copy(view, ir::dtype_size(ctx.inputs[0].type.dtype), ctx.outputs[0].data);
}

const ir::OpRegistration kTranspose =
    ir::define_op("transpose")
        .arity(1)
        .attr("perm", ir::AttrKind::kInts, std::vector<int64_t>{},
              "output axis i is input axis perm[i]; [] reverses the axes")
        .traits(kMoveTraits)
        .infer(infer_transpose)
        .kernel(transpose_kernel)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          const std::vector<int64_t> perm = resolve_perm(in[0].shape, attrs);
          Shape shape;
          for (int64_t p : perm) shape.push_back(in[0].shape[p]);
          RefTensor out = ref_tensor(shape);
          for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
            const std::vector<int64_t> oc = ref_unravel(i, shape);
            std::vector<int64_t> ic(oc.size());
            for (size_t d = 0; d < perm.size(); ++d) ic[perm[d]] = oc[d];
            out.values[i] = in[0].values[ref_ravel(ic, in[0].shape)];
          }
          return std::vector<RefTensor>{out};
        })
        .samples(with_attrs({
            {f32({2, 3}), {}},
            {f32({2, 3, 4}), {{"perm", std::vector<int64_t>{1, 0, 2}}}},
            {f32({2, 3, 4, 5}), {{"perm", std::vector<int64_t>{0, 2, 3, 1}}}},
            {f32({8, 128, 4, 16}), {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}},
            {f32({}), {}},
        }))
        .doc("permutes axes")
        .backward({}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(0)) return;
          // The inverse permutation: input axis perm[i] comes back from output axis i.
          const std::vector<int64_t> perm = resolve_perm(b.input_type(0).shape, b.attrs());
          std::vector<int64_t> inverse(perm.size());
          for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
          b.set_grad(0, b.op("transpose", {b.dout(0)}, {{"perm", inverse}}));
        });

// ---- broadcast_to ----

std::vector<TensorType> infer_broadcast_to(std::span<const TensorType> in, const Attrs& attrs) {
  const std::vector<int64_t>& target = ir::attr_ints(attrs, "shape", "broadcast_to");
  const Shape shape(target.begin(), target.end());
  const Shape joined = ir::broadcast_shapes(in[0].shape, shape, "broadcast_to");
  MF_CHECK(joined == shape, InvalidArgument, "broadcast_to: ", ir::shape_to_string(in[0].shape),
           " cannot be broadcast to ", ir::shape_to_string(shape), " (it would give ",
           ir::shape_to_string(joined), "; axes may only grow from 1)");
  return {{in[0].dtype, shape}};
}

const ir::OpRegistration kBroadcastTo =
    ir::define_op("broadcast_to")
        .arity(1)
        .attr("shape", ir::AttrKind::kInts, std::nullopt, "the target shape")
        .traits(Trait::kBroadcast | Trait::kPure)
        .infer(infer_broadcast_to)
        .kernel([](const ir::KernelContext& ctx) {
          const Shape& out = ctx.outputs[0].type.shape;
          strided_copy(StridedView{ctx.inputs[0].data, out,
                                   broadcast_strides(ctx.inputs[0].type.shape, out)},
                       ir::dtype_size(ctx.inputs[0].type.dtype), ctx.outputs[0].data);
        })
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          const std::vector<int64_t>& target = std::get<std::vector<int64_t>>(attrs.at("shape"));
          RefTensor out = ref_tensor(Shape(target.begin(), target.end()));
          for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
            out.values[i] = ref_broadcast_at(in[0], ref_unravel(i, out.shape));
          }
          return std::vector<RefTensor>{out};
        })
        .samples(with_attrs({
            {f32({3}), {{"shape", std::vector<int64_t>{2, 3}}}},
            {f32({2, 1}), {{"shape", std::vector<int64_t>{4, 2, 5}}}},
            {f32({}), {{"shape", std::vector<int64_t>{3, 2}}}},
            {f32({2, 3}), {{"shape", std::vector<int64_t>{2, 3}}}},
            // Broadcast to an empty shape, and an empty x broadcast along a new axis.
            {f32({1, 3}), {{"shape", std::vector<int64_t>{0, 3}}}},
            {f32({1, 0}), {{"shape", std::vector<int64_t>{4, 0}}}},
        }))
        .doc("numpy broadcast of x to shape")
        .backward({}, [](ir::GradBuilder& b) {
          if (b.wants_grad(0)) b.set_grad(0, b.reduce_to(b.dout(0), b.input_type(0).shape));
        });

// ---- slice ----

struct SliceSpec {
  std::vector<int64_t> begin, step;
  Shape out;
};

SliceSpec resolve_slice(const Shape& shape, const Attrs& attrs) {
  const std::vector<int64_t>& begin = ir::attr_ints(attrs, "begin", "slice");
  const std::vector<int64_t>& end = ir::attr_ints(attrs, "end", "slice");
  std::vector<int64_t> step = ir::attr_ints(attrs, "strides", "slice");
  const size_t rank = shape.size();
  if (step.empty()) step.assign(rank, 1);
  MF_CHECK(begin.size() == rank && end.size() == rank && step.size() == rank, InvalidArgument,
           "slice: begin ", ints_to_string(begin), ", end ", ints_to_string(end), " and strides ",
           ints_to_string(step), " must each have one entry per axis of ",
           ir::shape_to_string(shape), " (", rank, ")");
  SliceSpec spec;
  spec.step = step;
  for (size_t d = 0; d < rank; ++d) {
    MF_CHECK(step[d] > 0, InvalidArgument, "slice: strides must be positive, got ",
             ints_to_string(step));
    // Python semantics: negative indices count from the end; out-of-range indices clamp.
    auto clamp = [&](int64_t i) {
      if (i < 0) i += shape[d];
      return std::clamp<int64_t>(i, 0, shape[d]);
    };
    const int64_t b = clamp(begin[d]), e = clamp(end[d]);
    spec.begin.push_back(b);
    spec.out.push_back(e > b ? (e - b + step[d] - 1) / step[d] : 0);
  }
  return spec;
}

std::vector<TensorType> infer_slice(std::span<const TensorType> in, const Attrs& attrs) {
  return {{in[0].dtype, resolve_slice(in[0].shape, attrs).out}};
}

void slice_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  const SliceSpec spec = resolve_slice(shape, ctx.attrs);
  if (ir::num_elements(spec.out) == 0) return;
  const size_t elem = ir::dtype_size(ctx.inputs[0].type.dtype);
  const std::vector<int64_t> strides = ir::contiguous_strides(shape);
  int64_t offset = 0;
  StridedView view{nullptr, spec.out, {}};
  for (size_t d = 0; d < shape.size(); ++d) {
    offset += spec.begin[d] * strides[d];
    view.strides.push_back(strides[d] * spec.step[d]);
  }
  view.data = static_cast<const char*>(ctx.inputs[0].data) + offset * elem;
  strided_copy(view, elem, ctx.outputs[0].data);
}

// The backward of a slice puts dout back where it came from, zeros elsewhere. Along an axis of
// step s the m values move to every s-th place (each value followed by s - 1 zeros: a new axis
// padded to s, merged back), then one pad puts the block at its begin, cropping the zeros that
// run past the end (pad takes negative pads as crops).
void slice_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const Shape& shape = b.input_type(0).shape;
  const SliceSpec spec = resolve_slice(shape, b.attrs());
  const size_t rank = shape.size();
  ir::GradValue g = b.dout(0);
  Shape spread = spec.out;
  for (size_t d = 0; d < rank; ++d) {
    if (spec.step[d] == 1 || spec.out[d] == 0) continue;
    Shape split = spread;
    split.insert(split.begin() + d + 1, 1);
    g = reshape_to(b, g, split);
    std::vector<int64_t> pads(2 * (rank + 1), 0);
    pads[rank + 1 + d + 1] = spec.step[d] - 1;
    g = b.op("pad", {g}, {{"pads", pads}});
    spread[d] *= spec.step[d];
    g = reshape_to(b, g, spread);
  }
  std::vector<int64_t> pads(2 * rank);
  for (size_t d = 0; d < rank; ++d) {
    pads[d] = spec.begin[d];
    pads[rank + d] = shape[d] - spec.begin[d] - spread[d];
  }
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; })) {
    g = b.op("pad", {g}, {{"pads", pads}});
  }
  b.set_grad(0, g);
}

ir::Attrs slice_attrs(std::vector<int64_t> begin, std::vector<int64_t> end,
                      std::vector<int64_t> strides = {}) {
  return {{"begin", begin}, {"end", end}, {"strides", strides}};
}

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

const ir::OpRegistration kSlice =
    ir::define_op("slice")
        .arity(1)
        .attr("begin", ir::AttrKind::kInts, std::nullopt,
              "first index per axis (negative: from end)")
        .attr("end", ir::AttrKind::kInts, std::nullopt, "one past the last index per axis; clamped")
        .attr("strides", ir::AttrKind::kInts, std::vector<int64_t>{},
              "positive step per axis; [] = all 1")
        .traits(kMoveTraits)
        .infer(infer_slice)
        .kernel(slice_kernel)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          const SliceSpec spec = resolve_slice(in[0].shape, attrs);
          RefTensor out = ref_tensor(spec.out);
          for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
            std::vector<int64_t> c = ref_unravel(i, spec.out);
            for (size_t d = 0; d < c.size(); ++d) c[d] = spec.begin[d] + c[d] * spec.step[d];
            out.values[i] = in[0].values[ref_ravel(c, in[0].shape)];
          }
          return std::vector<RefTensor>{out};
        })
        .samples(with_attrs({
            {f32({5, 6}), slice_attrs({1, 2}, {4, 5})},
            {f32({5, 6}), slice_attrs({0, -3}, {kMax, kMax})},
            {f32({4, 5, 6}), slice_attrs({0, 1, 0}, {4, 5, 6}, {2, 2, 3})},
            {f32({7}), slice_attrs({-100}, {100})},
            {f32({3, 4}), slice_attrs({2, 0}, {1, 4})},  // empty
        }))
        .doc("x[begin:end:strides] per axis, numpy basic slicing with positive steps")
        .backward({}, slice_backward);

// ---- concat ----

std::vector<TensorType> infer_concat(std::span<const TensorType> in, const Attrs& attrs) {
  const DType dtype = common_dtype("concat", in);
  const Shape& first = in[0].shape;
  MF_CHECK(!first.empty(), InvalidArgument, "concat: inputs must have rank >= 1, got a scalar");
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(attrs, "axis", "concat"), rank_of(in[0]), "concat");
  Shape out = first;
  out[axis] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& s = in[i].shape;
    bool ok = s.size() == first.size();
    for (size_t d = 0; ok && d < s.size(); ++d) ok = d == size_t(axis) || s[d] == first[d];
    MF_CHECK(ok, InvalidArgument, "concat: input ", i, " has shape ", ir::shape_to_string(s),
             " but input 0 has ", ir::shape_to_string(first), "; all dims except the concat axis ",
             axis, " must agree");
    out[axis] += s[axis];
  }
  return {{dtype, out}};
}

// Splits `shape` around `axis` into (outer, axis length * inner).
std::pair<int64_t, int64_t> outer_and_row(const Shape& shape, int64_t axis) {
  int64_t outer = 1, row = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis; d < shape.size(); ++d) row *= shape[d];
  return {outer, row};
}

void concat_kernel(const ir::KernelContext& ctx) {
  const Shape& out_shape = ctx.outputs[0].type.shape;
  const int64_t axis = ir::normalize_axis(ir::attr_int(ctx.attrs, "axis", ctx.op_name),
                                          out_shape.size(), ctx.op_name);
  const size_t elem = ir::dtype_size(ctx.outputs[0].type.dtype);
  const auto [outer, out_row] = outer_and_row(out_shape, axis);
  char* out = static_cast<char*>(ctx.outputs[0].data);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, out_row));
  parallel_for(outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      char* dst = out + o * out_row * elem;
      for (const ir::TensorView& in : ctx.inputs) {
        const int64_t row = outer_and_row(in.type.shape, axis).second;
        // An empty input may have no buffer at all: memcpy's pointers must not be null.
        if (row > 0)
          std::memcpy(dst, static_cast<const char*>(in.data) + o * row * elem, row * elem);
        dst += row * elem;
      }
    }
  });
}

const ir::OpRegistration kConcat =
    ir::define_op("concat")
        .inputs(1, -1)
        .attr("axis", ir::AttrKind::kInt, int64_t{0}, "the axis to join along")
        .traits(kMoveTraits)
        .infer(infer_concat)
        .kernel(concat_kernel)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          int64_t axis = std::get<int64_t>(attrs.at("axis"));
          if (axis < 0) axis += static_cast<int64_t>(in[0].shape.size());
          Shape shape = in[0].shape;
          shape[axis] = 0;
          for (const RefTensor& t : in) shape[axis] += t.shape[axis];
          RefTensor out = ref_tensor(shape);
          int64_t base = 0;
          for (const RefTensor& t : in) {
            for (int64_t i = 0; i < static_cast<int64_t>(t.values.size()); ++i) {
              std::vector<int64_t> c = ref_unravel(i, t.shape);
              c[axis] += base;
              out.values[ref_ravel(c, shape)] = t.values[i];
            }
            base += t.shape[axis];
          }
          return std::vector<RefTensor>{out};
        })
        .samples({
            sample({f32({2, 3}), f32({4, 3})}),
            sample({f32({2, 3}), f32({2, 1}), f32({2, 5})}, {{"axis", int64_t{-1}}}),
            sample({f32({2, 3, 4}), f32({2, 2, 4})}, {{"axis", int64_t{1}}}),
            sample({f32({5})}),
        })
        .doc("joins inputs along axis")
        .backward({}, [](ir::GradBuilder& b) {
          // dout cut back into the inputs' parts by one split.
          const int64_t axis = ir::normalize_axis(ir::attr_int(b.attrs(), "axis", "concat"),
                                                  rank_of(b.input_type(0)), "concat");
          std::vector<int64_t> sections;
          bool any = false;
          for (size_t i = 0; i < b.num_inputs(); ++i) {
            sections.push_back(b.input_type(i).shape[axis]);
            any = any || b.wants_grad(i);
          }
          if (!any) return;
          const std::vector<ir::GradValue> parts =
              b.emit("split", {b.dout(0)}, {{"axis", axis}, {"sections", sections}});
          for (size_t i = 0; i < b.num_inputs(); ++i) {
            if (b.wants_grad(i)) b.set_grad(i, parts[i]);
          }
        });

// ---- split ----

std::vector<int64_t> split_sizes(const Shape& shape, const Attrs& attrs, int64_t* axis_out) {
  MF_CHECK(!shape.empty(), InvalidArgument, "split: x must have rank >= 1, got a scalar");
  const int64_t axis = ir::normalize_axis(ir::attr_int(attrs, "axis", "split"),
                                          static_cast<int64_t>(shape.size()), "split");
  *axis_out = axis;
  const int64_t dim = shape[axis];
  std::vector<int64_t> sizes = ir::attr_ints(attrs, "sections", "split");
  const int64_t num = ir::attr_int(attrs, "num", "split");
  MF_CHECK(sizes.empty() != (num == 0), InvalidArgument,
           "split: give exactly one of 'sections' (sizes) or 'num' (equal parts), got sections ",
           ints_to_string(sizes), " and num ", num);
  if (num != 0) {
    MF_CHECK(num > 0 && dim % num == 0, InvalidArgument, "split: axis ", axis, " of ",
             ir::shape_to_string(shape), " (size ", dim, ") cannot be split into ", num,
             " equal parts");
    return std::vector<int64_t>(num, dim / num);
  }
  int64_t known = 0, unknown = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && unknown < 0) {
      unknown = static_cast<int64_t>(i);
      continue;
    }
    MF_CHECK(sizes[i] >= 0, InvalidArgument, "split: sections ",
             ints_to_string(ir::attr_ints(attrs, "sections", "split")),
             " may hold one -1 and otherwise sizes >= 0");
    known += sizes[i];
  }
  if (unknown >= 0) {
    MF_CHECK(known <= dim, InvalidArgument, "split: sections ", ints_to_string(sizes),
             " add up to ", known, ", more than axis ", axis, " of ", ir::shape_to_string(shape),
             " (", dim, ")");
    sizes[unknown] = dim - known;
  } else {
    MF_CHECK(known == dim, InvalidArgument, "split: sections ", ints_to_string(sizes),
             " add up to ", known, " but axis ", axis, " of ", ir::shape_to_string(shape),
             " has size ", dim);
  }
  return sizes;
}

std::vector<TensorType> infer_split(std::span<const TensorType> in, const Attrs& attrs) {
  int64_t axis = 0;
  std::vector<TensorType> out;
  for (int64_t size : split_sizes(in[0].shape, attrs, &axis)) {
    TensorType t = in[0];
    t.shape[axis] = size;
    out.push_back(t);
  }
  return out;
}

void split_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  int64_t axis = 0;
  split_sizes(shape, ctx.attrs, &axis);
  const size_t elem = ir::dtype_size(ctx.inputs[0].type.dtype);
  const auto [outer, in_row] = outer_and_row(shape, axis);
  const char* in = static_cast<const char*>(ctx.inputs[0].data);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, in_row));
  parallel_for(outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const char* src = in + o * in_row * elem;
      for (const ir::TensorView& out : ctx.outputs) {
        const int64_t row = outer_and_row(out.type.shape, axis).second;
        std::memcpy(static_cast<char*>(out.data) + o * row * elem, src, row * elem);
        src += row * elem;
      }
    }
  });
}

const ir::OpRegistration kSplit =
    ir::define_op("split")
        .arity(1)
        .outputs(-1)
        .attr("axis", ir::AttrKind::kInt, int64_t{0}, "the axis to cut")
        .attr("sections", ir::AttrKind::kInts, std::vector<int64_t>{},
              "sizes of the parts (one may be -1); exclusive with num")
        .attr("num", ir::AttrKind::kInt, int64_t{0},
              "number of equal parts; exclusive with sections")
        .traits(kMoveTraits)
        .infer(infer_split)
        .kernel(split_kernel)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          int64_t axis = 0;
          const std::vector<int64_t> sizes = split_sizes(in[0].shape, attrs, &axis);
          std::vector<RefTensor> outs;
          int64_t base = 0;
          for (int64_t size : sizes) {
            Shape shape = in[0].shape;
            shape[axis] = size;
            RefTensor out = ref_tensor(shape);
            for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
              std::vector<int64_t> c = ref_unravel(i, shape);
              c[axis] += base;
              out.values[i] = in[0].values[ref_ravel(c, in[0].shape)];
            }
            outs.push_back(out);
            base += size;
          }
          return outs;
        })
        .samples(with_attrs({
            {f32({6, 4}), {{"num", int64_t{3}}}},
            {f32({2, 7}), {{"axis", int64_t{-1}}, {"sections", std::vector<int64_t>{2, -1, 1}}}},
            {f32({2, 6, 3}), {{"axis", int64_t{1}}, {"sections", std::vector<int64_t>{1, 5}}}},
            {f32({4}), {{"num", int64_t{1}}}},
        }))
        .doc("cuts x along axis into parts: one output per part")
        .backward({}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(0)) return;
          std::vector<ir::GradValue> douts;
          for (size_t k = 0; k < b.num_outputs(); ++k) douts.push_back(b.dout(k));
          b.set_grad(0,
                     b.op("concat", douts, {{"axis", ir::attr_int(b.attrs(), "axis", "split")}}));
        });

}  // namespace
}  // namespace mf::runtime::ops
