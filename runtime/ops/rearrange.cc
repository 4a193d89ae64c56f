// Ops that rearrange elements without computing on them: tile (repeats x along every axis),
// trilu (keeps a triangle of the last two axes, zeroes the rest), depth_to_space and
// space_to_depth (move NCHW channels into spatial blocks and back). Like the shape ops they move
// bytes, never interpret them (an all-zero byte pattern is 0 in every dtype), so every dtype is
// supported and the kernels are instantiated per element size only (strided.h).

#include <algorithm>
#include <cstring>
#include <utility>

#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/kernels/strided.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

// ---- tile ----

std::vector<TensorType> infer_tile(std::span<const TensorType> in, const Attrs& attrs) {
  const std::vector<int64_t>& multiples = ir::attr_ints(attrs, "multiples", "tile");
  const Shape& shape = in[0].shape;
  MF_CHECK(multiples.size() == shape.size(), InvalidArgument, "tile: multiples ",
           ints_to_string(multiples), " must have one entry per axis of x ",
           ir::shape_to_string(shape), " (", shape.size(), ")");
  Shape out;
  int64_t bound = 1;  // the output's element count, zero dimensions counted as 1 (ir/shape.h)
  for (size_t d = 0; d < shape.size(); ++d) {
    MF_CHECK(multiples[d] >= 0, InvalidArgument, "tile: multiples ", ints_to_string(multiples),
             " has the negative entry ", multiples[d], " at axis ", d);
    // Checked before use: x (2^30, 4) tiled by (2^40, 1) must not wrap around 64 bits.
    const std::optional<int64_t> dim = ir::checked_mul(shape[d], multiples[d]);
    const std::optional<int64_t> product =
        dim ? ir::checked_mul(bound, std::max<int64_t>(*dim, 1)) : std::nullopt;
    MF_CHECK(product.has_value() && *product <= ir::kMaxTensorElements, InvalidArgument, "tile: x ",
             ir::shape_to_string(shape), " tiled by ", ints_to_string(multiples),
             " has more than 2^40 (", ir::kMaxTensorElements,
             ") elements, the largest tensor supported");
    bound = *product;
    out.push_back(*dim);
  }
  return {{in[0].dtype, out}};
}

// Output axis d, of size multiples[d] * shape[d], walked as (copy, position): the copy index has
// stride 0 in x, the position x's own stride.
void tile_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& x = ctx.inputs[0];
  const Shape& shape = x.type.shape;
  const std::vector<int64_t>& multiples = ir::attr_ints(ctx.attrs, "multiples", ctx.op_name);
  const std::vector<int64_t> strides = ir::contiguous_strides(shape);
  StridedView view{x.data, {}, {}};
  for (size_t d = 0; d < shape.size(); ++d) {
    view.shape.push_back(multiples[d]);
    view.strides.push_back(0);
    view.shape.push_back(shape[d]);
    view.strides.push_back(strides[d]);
  }
  strided_copy(view, ir::dtype_size(x.type.dtype), ctx.outputs[0].data);
}

std::vector<RefTensor> tile_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const std::vector<int64_t>& multiples = std::get<std::vector<int64_t>>(attrs.at("multiples"));
  const Shape& shape = in[0].shape;
  Shape out_shape;
  for (size_t d = 0; d < shape.size(); ++d) out_shape.push_back(shape[d] * multiples[d]);
  RefTensor out = ref_tensor(out_shape);
  // A nonempty output has no empty axis of x: the modulo never divides by 0.
  for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
    std::vector<int64_t> c = ref_unravel(i, out_shape);
    for (size_t d = 0; d < c.size(); ++d) c[d] %= shape[d];
    out.values[i] = in[0].values[ref_ravel(c, shape)];
  }
  return {out};
}

ir::Attrs tile_attrs(std::vector<int64_t> m) {
  return {{"multiples", std::move(m)}};
}

const ir::OpRegistration kTile =
    ir::define_op("tile")
        .arity(1)
        .attr("multiples", ir::AttrKind::kInts, std::nullopt,
              "copies of x along each axis, one entry per axis, each >= 0")
        .traits(Trait::kPure)
        .infer(infer_tile)
        .kernel(tile_kernel)
        .reference(tile_reference)
        .samples({
            sample({f32({2, 3})}, tile_attrs({2, 1})),
            sample({f32({5})}, tile_attrs({3})),
            sample({f32({2, 1, 3})}, tile_attrs({1, 3, 2})),
            sample({f32({2, 3, 4, 5})}, tile_attrs({2, 1, 3, 1})),
            sample({f32({})}, tile_attrs({})),
            // No copies along axis 0: an empty result.
            sample({f32({2, 3})}, tile_attrs({0, 2})),
        })
        .doc("x repeated multiples[d] times along each axis d (numpy's tile, ONNX's Tile)")
        // Every copy's dout summed back: dout viewed as (m0, d0, m1, d1, ...), summed over the m.
        .backward({}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(0)) return;
          const Shape& shape = b.input_type(0).shape;
          const std::vector<int64_t>& multiples = ir::attr_ints(b.attrs(), "multiples", "tile");
          Shape split;
          std::vector<int64_t> copies;
          for (size_t d = 0; d < shape.size(); ++d) {
            copies.push_back(static_cast<int64_t>(split.size()));
            split.push_back(multiples[d]);
            split.push_back(shape[d]);
          }
          const ir::GradValue g = reshape_to(b, b.dout(0), split);
          b.set_grad(0, reshape_to(b, sum_over(b, g, copies, false), shape));
        });

// ---- trilu ----

std::vector<TensorType> infer_trilu(std::span<const TensorType> in, const Attrs& attrs) {
  MF_CHECK(in[0].shape.size() >= 2, InvalidArgument,
           "trilu: x must have rank >= 2 (a matrix or a batch of them), got ",
           ir::shape_to_string(in[0].shape));
  ir::attr_int(attrs, "k", "trilu");
  ir::attr_bool(attrs, "upper", "trilu");
  return {in[0]};
}

// The kept columns [begin, end) of row i: upper keeps j - i >= k, lower keeps j - i <= k. Compared
// without forming i + k, which could overflow for a k near the int64 limits.
std::pair<int64_t, int64_t> kept_columns(int64_t i, int64_t cols, int64_t k, bool upper) {
  if (upper) {
    const int64_t begin = k >= cols - i ? cols : k <= -i ? 0 : i + k;
    return {begin, cols};
  }
  const int64_t end = k >= cols - 1 - i ? cols : k < -i ? 0 : i + k + 1;
  return {0, end};
}

void trilu_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  const int64_t k = ir::attr_int(ctx.attrs, "k", ctx.op_name);
  const bool upper = ir::attr_bool(ctx.attrs, "upper", ctx.op_name);
  const int64_t rows = shape[shape.size() - 2];
  const int64_t cols = shape[shape.size() - 1];
  const int64_t total_rows = ir::num_elements(shape) / std::max<int64_t>(1, cols);
  if (rows == 0 || cols == 0 || total_rows == 0) return;
  const size_t elem = ir::dtype_size(ctx.inputs[0].type.dtype);
  const char* src = static_cast<const char*>(ctx.inputs[0].data);
  char* dst = static_cast<char*>(ctx.outputs[0].data);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / cols);
  parallel_for(total_rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const auto [first, last] = kept_columns(r % rows, cols, k, upper);
      const size_t row = static_cast<size_t>(r * cols) * elem;
      std::memset(dst + row, 0, static_cast<size_t>(first) * elem);
      std::memcpy(dst + row + first * elem, src + row + first * elem,
                  static_cast<size_t>(last - first) * elem);
      std::memset(dst + row + last * elem, 0, static_cast<size_t>(cols - last) * elem);
    }
  });
}

std::vector<RefTensor> trilu_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const int64_t k = std::get<int64_t>(attrs.at("k"));
  const bool upper = std::get<bool>(attrs.at("upper"));
  const Shape& shape = in[0].shape;
  RefTensor out = ref_tensor(shape);
  for (int64_t e = 0; e < static_cast<int64_t>(out.values.size()); ++e) {
    const std::vector<int64_t> c = ref_unravel(e, shape);
    const int64_t diagonal = c[c.size() - 1] - c[c.size() - 2];  // j - i
    const bool keep = upper ? diagonal >= k : diagonal <= k;
    out.values[e] = keep ? in[0].values[e] : 0.0;
  }
  return {out};
}

ir::Attrs trilu_attrs(bool upper, int64_t k) {
  return {{"upper", upper}, {"k", k}};
}

const ir::OpRegistration kTrilu =
    ir::define_op("trilu")
        .arity(1)
        .attr("upper", ir::AttrKind::kBool, true,
              "keep the upper triangle (j - i >= k); false: the lower one (j - i <= k)")
        .attr("k", ir::AttrKind::kInt, int64_t{0},
              "the diagonal: 0 the main one, > 0 above it, < 0 below it")
        .traits(Trait::kPure)
        .infer(infer_trilu)
        .kernel(trilu_kernel)
        .reference(trilu_reference)
        .samples({
            sample({f32({4, 5})}, trilu_attrs(true, 0)),
            sample({f32({4, 5})}, trilu_attrs(false, -1)),
            sample({f32({2, 3, 3})}, trilu_attrs(true, 1)),
            sample({f32({5, 3})}, trilu_attrs(true, -2)),
            sample({f32({2, 1, 3, 7})}, trilu_attrs(false, 2)),
            sample({f32({3, 4})}, trilu_attrs(false, -100)),  // every element zeroed
        })
        .doc("the upper (or lower) triangle of the last two axes from diagonal k, the rest zeroed")
        // A mask: dout through the same mask.
        .backward({}, [](ir::GradBuilder& b) {
          if (b.wants_grad(0)) b.set_grad(0, b.op("trilu", {b.dout(0)}, b.attrs()));
        });

// ---- depth_to_space, space_to_depth ----

int64_t block_size_of(std::string_view op, const Attrs& attrs) {
  const int64_t b = ir::attr_int(attrs, "block_size", op);
  MF_CHECK(b >= 1, InvalidArgument, op, ": block_size must be >= 1, got ", b);
  return b;
}

void check_nchw(std::string_view op, const Shape& shape) {
  MF_CHECK(shape.size() == 4, InvalidArgument, op, ": x must be NCHW (rank 4), got ",
           ir::shape_to_string(shape));
}

// b * b, or InvalidArgument when it does not fit (a block_size of 2^32 is not a layout).
int64_t block_area(std::string_view op, int64_t b) {
  const std::optional<int64_t> area = ir::checked_mul(b, b);
  MF_CHECK(area.has_value() && *area <= ir::kMaxTensorElements, InvalidArgument, op,
           ": block_size ", b, " is too large (its square exceeds 2^40)");
  return *area;
}

// dim * b for an output dimension, checked before use.
int64_t scaled(std::string_view op, const Shape& shape, int64_t dim, int64_t b) {
  const std::optional<int64_t> out = ir::checked_mul(dim, b);
  MF_CHECK(out.has_value() && *out <= ir::kMaxTensorElements, InvalidArgument, op, ": x ",
           ir::shape_to_string(shape), " with block_size ", b,
           " gives a dimension of more than 2^40");
  return *out;
}

bool crd_mode(const Attrs& attrs) {
  const std::string& mode = ir::attr_string(attrs, "mode", "depth_to_space");
  MF_CHECK(mode == "DCR" || mode == "CRD", InvalidArgument, "depth_to_space: mode must be \"DCR\" ",
           "(depth, column, row: ONNX's default) or \"CRD\" (column, row, depth: PyTorch's "
           "pixel_shuffle), got \"",
           echo(mode, 40), "\"");
  return mode == "CRD";
}

std::vector<TensorType> infer_depth_to_space(std::span<const TensorType> in, const Attrs& attrs) {
  constexpr std::string_view kOp = "depth_to_space";
  const Shape& s = in[0].shape;
  check_nchw(kOp, s);
  const int64_t b = block_size_of(kOp, attrs);
  crd_mode(attrs);
  const int64_t area = block_area(kOp, b);
  MF_CHECK(s[1] % area == 0, InvalidArgument, "depth_to_space: the channels of x ",
           ir::shape_to_string(s), " (", s[1], ") must be divisible by block_size^2 (", area, ")");
  return {{in[0].dtype, {s[0], s[1] / area, scaled(kOp, s, s[2], b), scaled(kOp, s, s[3], b)}}};
}

// The output (N, C / b^2, H * b, W * b) walked as (n, c, h, i, w, j): output row h * b + i, column
// w * b + j. DCR reads channel (i * b + j) * C' + c, CRD channel (c * b + i) * b + j.
void depth_to_space_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& x = ctx.inputs[0];
  const Shape& s = x.type.shape;
  const int64_t b = ir::attr_int(ctx.attrs, "block_size", ctx.op_name);
  const int64_t c_out = s[1] / (b * b);
  const int64_t hw = s[2] * s[3];
  const bool crd = crd_mode(ctx.attrs);
  const int64_t c_stride = crd ? b * b * hw : hw;
  const int64_t i_stride = crd ? b * hw : b * c_out * hw;
  const int64_t j_stride = crd ? hw : c_out * hw;
  const StridedView view{
      x.data, {s[0], c_out, s[2], b, s[3], b}, {s[1] * hw, c_stride, s[3], i_stride, 1, j_stride}};
  strided_copy(view, ir::dtype_size(x.type.dtype), ctx.outputs[0].data);
}

std::vector<RefTensor> depth_to_space_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& s = in[0].shape;
  const int64_t b = std::get<int64_t>(attrs.at("block_size"));
  const bool crd = std::get<std::string>(attrs.at("mode")) == "CRD";
  const int64_t c_out = s[1] / (b * b);
  const Shape out_shape{s[0], c_out, s[2] * b, s[3] * b};
  RefTensor out = ref_tensor(out_shape);
  for (int64_t e = 0; e < static_cast<int64_t>(out.values.size()); ++e) {
    const std::vector<int64_t> o = ref_unravel(e, out_shape);
    const int64_t i = o[2] % b, j = o[3] % b;
    const int64_t channel = crd ? (o[1] * b + i) * b + j : (i * b + j) * c_out + o[1];
    out.values[e] = in[0].values[ref_ravel({o[0], channel, o[2] / b, o[3] / b}, s)];
  }
  return {out};
}

// Backward: a permutation of the elements, undone. DCR's inverse is space_to_depth; CRD moves
// x viewed as (N, C', b, b, H, W) to (N, C', H, b, W, b), undone by the inverse transpose.
void depth_to_space_backward(ir::GradBuilder& b) {
  if (!b.wants_grad(0)) return;
  const int64_t block = ir::attr_int(b.attrs(), "block_size", "depth_to_space");
  if (!crd_mode(b.attrs())) {
    b.set_grad(0, b.op("space_to_depth", {b.dout(0)}, {{"block_size", block}}));
    return;
  }
  const Shape& x = b.input_type(0).shape;
  const int64_t channels = x[1] / (block * block);
  const ir::GradValue g = reshape_to(b, b.dout(0), {x[0], channels, x[2], block, x[3], block});
  const ir::GradValue moved =
      b.op("transpose", {g}, {{"perm", std::vector<int64_t>{0, 1, 3, 5, 2, 4}}});
  b.set_grad(0, reshape_to(b, moved, x));
}

ir::Attrs block_attrs(int64_t b, std::string mode) {
  return {{"block_size", b}, {"mode", std::move(mode)}};
}

const ir::OpRegistration kDepthToSpace =
    ir::define_op("depth_to_space")
        .arity(1)
        .attr("block_size", ir::AttrKind::kInt, std::nullopt, "the side of each spatial block")
        .attr("mode", ir::AttrKind::kString, std::string("DCR"),
              "\"DCR\": channel = (i * b + j) * C' + c; \"CRD\": channel = (c * b + i) * b + j")
        .traits(Trait::kPure)
        .infer(infer_depth_to_space)
        .kernel(depth_to_space_kernel)
        .reference(depth_to_space_reference)
        .samples({
            sample({f32({1, 8, 2, 3})}, block_attrs(2, "DCR")),
            sample({f32({1, 8, 2, 3})}, block_attrs(2, "CRD")),
            sample({f32({2, 9, 1, 2})}, block_attrs(3, "DCR")),
            sample({f32({2, 12, 3, 1})}, block_attrs(2, "CRD")),
            sample({f32({2, 5, 3, 2})}, block_attrs(1, "DCR")),
        })
        .doc("NCHW (N, C, H, W) -> (N, C / b^2, H * b, W * b): channels into b x b spatial blocks")
        .backward({}, depth_to_space_backward);

std::vector<TensorType> infer_space_to_depth(std::span<const TensorType> in, const Attrs& attrs) {
  constexpr std::string_view kOp = "space_to_depth";
  const Shape& s = in[0].shape;
  check_nchw(kOp, s);
  const int64_t b = block_size_of(kOp, attrs);
  MF_CHECK(s[2] % b == 0 && s[3] % b == 0, InvalidArgument,
           "space_to_depth: the height and width of x ", ir::shape_to_string(s),
           " must be divisible by block_size (", b, ")");
  return {{in[0].dtype, {s[0], scaled(kOp, s, s[1], block_area(kOp, b)), s[2] / b, s[3] / b}}};
}

// The output (N, b^2 * C, H / b, W / b) walked as (n, i, j, c, h, w): channel (i * b + j) * C + c
// reads x[n, c, h * b + i, w * b + j] (ONNX's SpaceToDepth, the inverse of DCR).
void space_to_depth_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& x = ctx.inputs[0];
  const Shape& s = x.type.shape;
  const int64_t b = ir::attr_int(ctx.attrs, "block_size", ctx.op_name);
  const int64_t hw = s[2] * s[3];
  const StridedView view{
      x.data, {s[0], b, b, s[1], s[2] / b, s[3] / b}, {s[1] * hw, s[3], 1, hw, b * s[3], b}};
  strided_copy(view, ir::dtype_size(x.type.dtype), ctx.outputs[0].data);
}

std::vector<RefTensor> space_to_depth_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& s = in[0].shape;
  const int64_t b = std::get<int64_t>(attrs.at("block_size"));
  const Shape out_shape{s[0], s[1] * b * b, s[2] / b, s[3] / b};
  RefTensor out = ref_tensor(out_shape);
  // A nonempty output has C > 0: the channel's division and modulo never divide by 0.
  for (int64_t e = 0; e < static_cast<int64_t>(out.values.size()); ++e) {
    const std::vector<int64_t> o = ref_unravel(e, out_shape);
    const int64_t block = o[1] / s[1], c = o[1] % s[1];
    const int64_t i = block / b, j = block % b;
    out.values[e] = in[0].values[ref_ravel({o[0], c, o[2] * b + i, o[3] * b + j}, s)];
  }
  return {out};
}

const ir::OpRegistration kSpaceToDepth =
    ir::define_op("space_to_depth")
        .arity(1)
        .attr("block_size", ir::AttrKind::kInt, std::nullopt, "the side of each spatial block")
        .traits(Trait::kPure)
        .infer(infer_space_to_depth)
        .kernel(space_to_depth_kernel)
        .reference(space_to_depth_reference)
        .samples({
            sample({f32({1, 1, 4, 6})}, {{"block_size", int64_t{2}}}),
            sample({f32({2, 3, 6, 3})}, {{"block_size", int64_t{3}}}),
            sample({f32({1, 2, 2, 4})}, {{"block_size", int64_t{2}}}),
            sample({f32({2, 3, 5, 7})}, {{"block_size", int64_t{1}}}),
        })
        .doc("NCHW (N, C, H, W) -> (N, C * b^2, H / b, W / b): b x b spatial blocks into channels")
        // The inverse of depth_to_space in DCR order: dout moved back by it.
        .backward({}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(0)) return;
          b.set_grad(0,
                     b.op("depth_to_space", {b.dout(0)},
                          {{"block_size", ir::attr_int(b.attrs(), "block_size", "space_to_depth")},
                           {"mode", std::string("DCR")}}));
        });

}  // namespace
}  // namespace mf::runtime::ops
