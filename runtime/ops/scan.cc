// cumsum {axis, exclusive, reverse}: running sums along one axis (numpy's cumsum, ONNX's CumSum).
// exclusive leaves each element out of its own sum (the first is 0); reverse sums from the end.
//
// Each column is summed in axis order by one task, so the bits do not depend on the thread count.
// Integers wrap around on overflow as two's complement (summed as unsigned, where wrapping is
// defined) rather than being undefined behaviour.

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

std::vector<TensorType> infer_cumsum(std::span<const TensorType> in, const Attrs& attrs) {
  check_dtype("cumsum", in[0].dtype, kNumericTypes);
  MF_CHECK(!in[0].shape.empty(), InvalidArgument, "cumsum: x must have rank >= 1, got a scalar");
  ir::normalize_axis(ir::attr_int(attrs, "axis", "cumsum"), rank_of(in[0]), "cumsum");
  return {in[0]};
}

// The type a running sum is kept in: integers as unsigned, where wrapping around is defined.
template <typename T>
struct Accumulator {
  using type = T;
};
template <>
struct Accumulator<int32_t> {
  using type = uint32_t;
};
template <>
struct Accumulator<int64_t> {
  using type = uint64_t;
};

// y[r, i] for i in [0, width) of one [count, inner] block, rows in axis order (or reversed).
template <typename T>
void cumsum_columns(const T* x, T* y, int64_t count, int64_t inner, int64_t width, bool exclusive,
                    bool reverse) {
  using Acc = typename Accumulator<T>::type;
  std::vector<Acc> acc(static_cast<size_t>(width), Acc(0));
  for (int64_t s = 0; s < count; ++s) {
    const int64_t r = reverse ? count - 1 - s : s;
    const T* xr = x + r * inner;
    T* yr = y + r * inner;
    for (int64_t i = 0; i < width; ++i) {
      if (exclusive) {
        yr[i] = static_cast<T>(acc[i]);
        acc[i] += static_cast<Acc>(xr[i]);
      } else {
        acc[i] += static_cast<Acc>(xr[i]);
        yr[i] = static_cast<T>(acc[i]);
      }
    }
  }
}

void cumsum_kernel(const ir::KernelContext& ctx) {
  const ir::TensorView& x = ctx.inputs[0];
  const Shape& shape = x.type.shape;
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(ctx.attrs, "axis", ctx.op_name), shape.size(), ctx.op_name);
  const bool exclusive = ir::attr_bool(ctx.attrs, "exclusive", ctx.op_name);
  const bool reverse = ir::attr_bool(ctx.attrs, "reverse", ctx.op_name);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t count = shape[axis];
  if (outer == 0 || inner == 0 || count == 0) return;
  // Columns in blocks, so that one long inner extent is split across threads too.
  constexpr int64_t kWidth = 1024;
  const int64_t col_blocks = (inner + kWidth - 1) / kWidth;
  const int64_t grain = std::max<int64_t>(
      1, (int64_t{1} << 16) / std::max<int64_t>(1, count * std::min(inner, kWidth)));
  ir::visit_dtype(x.type.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      MF_FAIL(Internal, ctx.op_name, ": no kernel for Bool");
    } else {
      const T* src = x.as<T>();
      T* dst = ctx.outputs[0].as<T>();
      parallel_for(outer * col_blocks, grain, [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t o = item / col_blocks;
          const int64_t c0 = item % col_blocks * kWidth;
          const int64_t offset = o * count * inner + c0;
          cumsum_columns<T>(src + offset, dst + offset, count, inner, std::min(kWidth, inner - c0),
                            exclusive, reverse);
        }
      });
    }
  });
}

// Each output element summed afresh over its own range of positions.
std::vector<RefTensor> cumsum_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const Shape& shape = in[0].shape;
  int64_t axis = std::get<int64_t>(attrs.at("axis"));
  if (axis < 0) axis += static_cast<int64_t>(shape.size());
  const bool exclusive = std::get<bool>(attrs.at("exclusive"));
  const bool reverse = std::get<bool>(attrs.at("reverse"));
  const int64_t count = shape[axis];
  RefTensor out = ref_tensor(shape);
  for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
    std::vector<int64_t> c = ref_unravel(i, shape);
    const int64_t k = c[axis];
    // Positions [first, last) summed into element k.
    const int64_t first = reverse ? (exclusive ? k + 1 : k) : 0;
    const int64_t last = reverse ? count : (exclusive ? k : k + 1);
    double sum = 0;
    for (int64_t t = first; t < last; ++t) {
      c[axis] = t;
      sum += in[0].values[ref_ravel(c, shape)];
    }
    out.values[i] = sum;
  }
  return {out};
}

ir::Attrs cumsum_attrs(int64_t axis, bool exclusive, bool reverse) {
  return {{"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}};
}

const ir::OpRegistration kCumsum =
    ir::define_op("cumsum")
        .arity(1)
        .attr("axis", ir::AttrKind::kInt, int64_t{0}, "the axis summed along (negative: from end)")
        .attr("exclusive", ir::AttrKind::kBool, false, "leave each element out of its own sum")
        .attr("reverse", ir::AttrKind::kBool, false, "sum from the last position to the first")
        .traits(Trait::kPure)
        .infer(infer_cumsum)
        .kernel(cumsum_kernel)
        .reference(cumsum_reference)
        .samples({
            sample({f32({7})}, cumsum_attrs(0, false, false)),
            sample({f32({3, 5})}, cumsum_attrs(1, true, false)),
            sample({f32({4, 3, 2})}, cumsum_attrs(1, false, true)),
            sample({f32({2, 9})}, cumsum_attrs(-1, true, true)),
            sample({f32({3, 1, 4})}, cumsum_attrs(1, false, false)),
            sample({f32({3, 2, 1030})}, cumsum_attrs(1, true, false)),  // two column blocks
        })
        .tolerance(1e-4)  // float32 running sums against double ones
        .doc("running sums along axis (exclusive: each without itself; reverse: from the end)")
        // Element k feeds the sums after it (before it, reversed): dout summed the other way.
        .backward({}, [](ir::GradBuilder& b) {
          if (!b.wants_grad(0)) return;
          ir::Attrs attrs = b.attrs();
          attrs["reverse"] = !ir::attr_bool(attrs, "reverse", "cumsum");
          b.set_grad(0, b.op("cumsum", {b.dout(0)}, std::move(attrs)));
        });

}  // namespace
}  // namespace mf::runtime::ops
