#pragma once
// What backward rules share: the chain rule of a one-input op, sums over axes that tolerate an
// empty axis list (reduce ops read [] as "all"), and the attributes rules pass to shape ops. Rules
// see values only through ir::GradBuilder, so everything here emits registry ops by name.

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "ir/grad_builder.h"
#include "ir/op_def.h"

namespace mf::runtime::ops {

// A rank-0 constant of input i's dtype.
inline ir::GradValue scalar_like(ir::GradBuilder& b, double value, size_t i = 0) {
  return b.scalar(value, b.input_type(i).dtype);
}

inline std::vector<int64_t> dims_of(const ir::Shape& shape) {
  return std::vector<int64_t>(shape.begin(), shape.end());
}

// The gradient of a one-input op: dout times the local derivative `derivative(b)`, built only when
// the input wants a gradient.
inline ir::BackwardFn chain_rule(std::function<ir::GradValue(ir::GradBuilder&)> derivative) {
  return [derivative = std::move(derivative)](ir::GradBuilder& b) {
    if (!b.wants_grad(0)) return;
    b.set_grad(0, b.op("mul", {b.dout(0), derivative(b)}));
  };
}

// `g` summed over `axes` (none: `g` itself, never the whole tensor as reduce_sum reads []).
inline ir::GradValue sum_over(ir::GradBuilder& b, ir::GradValue g, std::vector<int64_t> axes,
                              bool keep_dims) {
  if (axes.empty()) return g;
  return b.op("reduce_sum", {g}, {{"axes", std::move(axes)}, {"keep_dims", keep_dims}});
}

inline ir::GradValue reshape_to(ir::GradBuilder& b, ir::GradValue g, const ir::Shape& shape) {
  if (b.type(g).shape == shape) return g;
  return b.op("reshape", {g}, {{"shape", dims_of(shape)}});
}

inline ir::GradValue broadcast_to(ir::GradBuilder& b, ir::GradValue g, const ir::Shape& shape) {
  if (b.type(g).shape == shape) return g;
  return b.op("broadcast_to", {g}, {{"shape", dims_of(shape)}});
}

// x normalized over `axes` as layer_norm and instance_norm compute it (the biased variance):
// xhat = (x - mean) rstd, rstd = 1 / sqrt(var + epsilon), rstd kept as size 1 along `axes`.
struct Normalized {
  ir::GradValue xhat, rstd;
};
inline Normalized normalize(ir::GradBuilder& b, ir::GradValue x, const std::vector<int64_t>& axes,
                            double epsilon) {
  const ir::Attrs kept = {{"axes", axes}, {"keep_dims", true}};
  const ir::GradValue centred = b.op("sub", {x, b.op("reduce_mean", {x}, kept)});
  const ir::GradValue var = b.op("reduce_mean", {b.op("mul", {centred, centred})}, kept);
  const ir::GradValue rstd =
      b.op("rsqrt", {b.op("add", {var, b.scalar(epsilon, b.type(x).dtype)})});
  return {b.op("mul", {centred, rstd}), rstd};
}

// The gradient of x given g, the gradient of xhat: rstd (g - mean(g) - xhat mean(g xhat)), means
// over `axes` (mean and variance both depend on every element they summarize).
inline ir::GradValue normalized_input_grad(ir::GradBuilder& b, ir::GradValue g, const Normalized& n,
                                           const std::vector<int64_t>& axes) {
  const ir::Attrs kept = {{"axes", axes}, {"keep_dims", true}};
  const ir::GradValue mean_g = b.op("reduce_mean", {g}, kept);
  const ir::GradValue mean_gx = b.op("reduce_mean", {b.op("mul", {g, n.xhat})}, kept);
  const ir::GradValue inner =
      b.op("sub", {b.op("sub", {g, mean_g}), b.op("mul", {n.xhat, mean_gx})});
  return b.op("mul", {n.rstd, inner});
}

// A per-channel vector (C) reshaped to (C, 1, ..., 1) so it broadcasts along axis `axis` of a
// tensor of rank `rank`; unchanged when the axis is the last.
inline ir::GradValue along_axis(ir::GradBuilder& b, ir::GradValue v, int64_t axis, int64_t rank) {
  if (axis == rank - 1) return v;
  ir::Shape shape(static_cast<size_t>(rank - axis), 1);
  shape[0] = b.type(v).shape[0];
  return reshape_to(b, v, shape);
}

// The axes [0, rank) without `axis`.
inline std::vector<int64_t> all_axes_but(int64_t axis, int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis) axes.push_back(d);
  }
  return axes;
}

// The gradient of a view (reshape, flatten, expand_dims, squeeze): dout back in input 0's shape.
inline void view_backward(ir::GradBuilder& b) {
  if (b.wants_grad(0)) b.set_grad(0, reshape_to(b, b.dout(0), b.input_type(0).shape));
}

}  // namespace mf::runtime::ops
